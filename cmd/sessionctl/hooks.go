package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/agents"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/cmd/sessionctl/hookinstall"
)

// hookBudget bounds `sessionctl hook` from start to exit: the agent waits
// for its hooks, so sessiond down, slow or gone must never hold it up.
const hookBudget = 90 * time.Millisecond

// hookMaxPayload is the largest payload posted whole; a larger one (a
// Write of a big file) has its large fields cut (shrinkPayload).
const hookMaxPayload = 256 << 10

func newHook(a *app) *cobra.Command {
	var verbose bool
	cmd := &cobra.Command{
		Use:   "hook AGENT",
		Short: "The command an agent runs as its hook: posts the hook's JSON (stdin) to sessiond",
		Long: `hook is what 'sessionctl hooks install' puts in an agent's hook settings.
It reads the hook's JSON from stdin, posts it to sessiond and exits 0 within
about 100 ms, whatever happens: sessiond down, slow, or the payload odd. It
never writes to stdout (Claude Code adds a hook's stdout to the context) and
never fails or blocks the agent.

sessiond takes a hook as evidence of the activity of the session it names
(waiting for a permission or a question, busy, the turn ended) when the hook's
process descends from that session's live owner; never as evidence that the
session runs.`,
		Example:   "  echo '{\"session_id\":\"…\",\"hook_event_name\":\"Stop\"}' | sessionctl hook claude --verbose",
		Args:      exactArgs(1, "the agent whose hook this is ("+strings.Join(hookAgentNames(), ", ")+")"),
		ValidArgs: hookAgentNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), hookBudget)
			defer cancel()
			res, err := postHook(ctx, a, args[0])
			if verbose {
				switch {
				case err != nil:
					fmt.Fprintln(a.stderr, "sessionctl hook:", err)
				default:
					b, _ := json.Marshal(res)
					fmt.Fprintf(a.stderr, "sessionctl hook: %s\n", b)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "say on stderr what sessiond answered, or why it did not")
	return cmd
}

// postHook reads the payload and posts it, all within ctx.
func postHook(ctx context.Context, a *app, agent string) (*api.HookResult, error) {
	type read struct {
		b   []byte
		err error
	}
	got := make(chan read, 1)
	go func() {
		// Read it all (an agent writing into a closed pipe may complain),
		// keeping at most 8 MiB.
		b, err := io.ReadAll(io.LimitReader(a.stdin, 8<<20))
		_, _ = io.Copy(io.Discard, a.stdin)
		got <- read{b, err}
	}()
	var in read
	select {
	case in = <-got:
	case <-ctx.Done():
		return nil, fmt.Errorf("stdin not closed within %s", hookBudget)
	}
	if in.err != nil {
		return nil, fmt.Errorf("read stdin: %w", in.err)
	}
	payload := bytes.TrimSpace(in.b)
	if !json.Valid(payload) {
		return nil, fmt.Errorf("stdin is not JSON (%d bytes)", len(in.b))
	}
	if len(payload) > hookMaxPayload {
		payload = shrinkPayload(payload)
	}
	return a.client().Hook(ctx, agent, payload)
}

// shrinkPayload cuts the large values of a payload's object (a tool's
// input or response, a long message) to a short string each, and those
// of its tool_input and details objects one level down (Gemini CLI's
// Notification carries the command in details, beside an edit's whole
// old and new content), so the fields sessiond reads (the session, the
// event, the tool, its command or file) stay whole.
func shrinkPayload(b []byte) []byte {
	const big = 4 << 10
	cut := func(v json.RawMessage) json.RawMessage {
		if len(v) <= big {
			return v
		}
		s, _ := json.Marshal(fmt.Sprintf("(%d bytes, cut by sessionctl hook)", len(v)))
		return s
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(b, &obj) != nil {
		return b
	}
	for k, v := range obj {
		var inner map[string]json.RawMessage
		if (k == "tool_input" || k == "details") && json.Unmarshal(v, &inner) == nil {
			for ik, iv := range inner {
				inner[ik] = cut(iv)
			}
			if nb, err := json.Marshal(inner); err == nil {
				obj[k] = nb
				continue
			}
		}
		obj[k] = cut(v)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return b
	}
	return out
}

func newHooks(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "Install, remove or show sessiond's hooks in the agents' hook settings",
		Long: `Agent hooks tell sessiond at once what no file shows: that a session waits for
a permission or a question, is busy, or ended its turn. 'hooks install' adds
'sessionctl hook <agent>' to the agent's hook settings, for the events that say
so:

  claude   "hooks" in settings.json of each config root ($CLAUDE_CONFIG_DIR,
           else ~/.claude, and the roots of sessions sessiond knows)
  codex    "hooks" in $CODEX_HOME/hooks.json (else ~/.codex/hooks.json).
           Codex runs new hooks only once you trust them: start codex and
           choose "Trust all and continue" (or review them with /hooks).
  qwen     "hooks" in settings.json of $QWEN_HOME (else ~/.qwen)
  copilot  "hooks" in settings.json of $COPILOT_HOME (else ~/.copilot):
           user-level hooks, run in every folder
  gemini   "hooks" in settings.json of $GEMINI_CLI_HOME/.gemini (else
           ~/.gemini). Gemini CLI runs hooks only in trusted folders.

Only sessiond's entries change: every other byte of the file stays as it
was. A file that is a symlink (kept in a dotfiles repository) is written
through it, and stays a link. The file as it was is kept in
<file>.sessiond-backup first; 'hooks uninstall' puts it back byte for byte
when nothing else changed since (else it removes only sessiond's entries).
A file that changed between sessionctl's read and its write (the agent
wrote it) is left as it is, with an error (exit 1): run the command again.
Both are idempotent; --dry-run shows the diff and writes nothing.`,
	}
	cmd.AddCommand(newHooksChange(a, "install"), newHooksChange(a, "uninstall"), newHooksStatus(a))
	return cmd
}

// hookRoots are the roots to act on: those given, else the agent's
// default ones and, for an agent whose hooks go into its sessions' roots
// (Claude), the roots of the sessions sessiond knows.
func hookRoots(ctx context.Context, a *app, ag hookinstall.Agent, given []string) []string {
	if len(given) > 0 {
		return given
	}
	var roots []string
	if facts, ok := agents.Lookup(ag.Name); ok {
		roots = append(roots, facts.DefaultRoots()...)
	}
	if ag.SessionRoots {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if ss, err := a.client().Sessions(ctx, api.ListOptions{Agent: ag.Name, All: true}); err == nil {
			for _, s := range ss {
				if s.Resume != nil && s.Resume.Root != "" {
					roots = append(roots, s.Resume.Root)
				}
			}
		}
	}
	for i := range roots {
		roots[i] = filepath.Clean(roots[i])
	}
	slices.Sort(roots)
	return slices.Compact(roots)
}

// hookAgentNames are the agents that run command hooks, for completion.
func hookAgentNames() []string {
	var out []string
	for _, ag := range hookinstall.All() {
		out = append(out, ag.Name)
	}
	return out
}

func newHooksChange(a *app, verb string) *cobra.Command {
	var roots []string
	var dry bool
	short := "Add sessiond's hook to an agent's hook settings (a backup first)"
	if verb == "uninstall" {
		short = "Take sessiond's hook out again: the file as it was before the install"
	}
	cmd := &cobra.Command{
		Use:       verb + " AGENT",
		Short:     short,
		Args:      exactArgs(1, "the agent ("+strings.Join(hookAgentNames(), ", ")+")"),
		ValidArgs: hookAgentNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			ag, err := hookinstall.For(args[0])
			if err != nil {
				return usageError{err}
			}
			command := ""
			if verb == "install" {
				exe, err := sessionctlPath()
				if err != nil {
					return err
				}
				sock, err := filepath.Abs(a.socket)
				if err != nil {
					return err
				}
				command = ag.Command(exe, sock)
			}
			var plans []*hookinstall.Plan
			var errs []string
			for _, root := range hookRoots(cmd.Context(), a, ag, roots) {
				var p *hookinstall.Plan
				if verb == "install" {
					p, err = ag.Install(root, command)
				} else {
					p, err = ag.Uninstall(root)
				}
				if err != nil {
					errs = append(errs, err.Error())
					continue
				}
				if !dry {
					// Apply's errors name the file.
					if err := p.Apply(); err != nil {
						errs = append(errs, err.Error())
						continue
					}
				}
				plans = append(plans, p)
			}
			if a.json {
				type out struct {
					Path    string `json:"path"`
					Changed bool   `json:"changed"`
					Applied bool   `json:"applied"`
					Note    string `json:"note"`
					Diff    string `json:"diff,omitempty"`
				}
				res := struct {
					Plans  []out    `json:"plans"`
					Errors []string `json:"errors,omitempty"`
				}{Plans: []out{}, Errors: errs}
				for _, p := range plans {
					res.Plans = append(res.Plans, out{p.Path, p.Changed(), !dry && p.Changed(), p.Note, p.Diff()})
				}
				if err := a.printJSON(res); err != nil {
					return err
				}
			} else {
				for _, p := range plans {
					state := "unchanged"
					switch {
					case p.Changed() && dry:
						state = "would change"
					case p.Changed():
						state = "changed"
					}
					fmt.Fprintf(a.stdout, "%s: %s: %s\n", p.Path, state, p.Note)
					if dry {
						fmt.Fprint(a.stdout, p.Diff())
					}
				}
				if verb == "install" && ag.Trust != "" && !dry && len(plans) > 0 {
					fmt.Fprintln(a.stdout, ag.Trust)
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("%s", strings.Join(errs, "; "))
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&roots, "root", nil, "the agent's root to act on, repeatable (default: see 'sessionctl hooks --help')")
	cmd.Flags().BoolVar(&dry, "dry-run", false, "show what would change, as a diff, and change nothing")
	return cmd
}

func newHooksStatus(a *app) *cobra.Command {
	var roots []string
	cmd := &cobra.Command{
		Use:       "status [AGENT]",
		Short:     "Show whether sessiond's hooks are in each agent's settings (and, for Codex, trusted)",
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: hookAgentNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			hookAgents := hookinstall.All()
			if len(args) == 1 {
				ag, err := hookinstall.For(args[0])
				if err != nil {
					return usageError{err}
				}
				hookAgents = []hookinstall.Agent{ag}
			}
			var all []hookinstall.Status
			for _, ag := range hookAgents {
				for _, root := range hookRoots(cmd.Context(), a, ag, roots) {
					all = append(all, ag.Status(root))
				}
			}
			if a.json {
				return a.printJSON(all)
			}
			tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tFILE\tHOOKS\tNOTE")
			for _, s := range all {
				var hooks, note string
				switch {
				case s.Error != "":
					hooks, note = "?", s.Error
				case len(s.Events) == 0:
					hooks = "not installed"
				case s.Installed():
					hooks = "installed"
				default:
					hooks, note = "partly", "missing: "+strings.Join(s.Missing, ", ")
				}
				if len(s.Untrusted) > 0 {
					note = strings.TrimPrefix(note+"; ", "; ") + "not yet trusted by Codex: " + strings.Join(s.Untrusted, ", ")
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", s.Agent, s.Path, hooks, note)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringArrayVar(&roots, "root", nil, "the agent's root to look at, repeatable")
	return cmd
}

// sessionctlPath is this sessionctl's absolute path, for the hook
// command; refused when it is a `go run` build that will be deleted.
func sessionctlPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find sessionctl's own path: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	if strings.Contains(exe, string(filepath.Separator)+"go-build") {
		return "", fmt.Errorf("this sessionctl is a temporary `go run` build (%s): install it first (go install ./cmd/sessionctl) and run that one", exe)
	}
	return exe, nil
}
