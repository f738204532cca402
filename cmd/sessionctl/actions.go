package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// newAction builds repair, abort, reap and stop: the same request, a
// checklist answer.
func newAction(a *app, name, short, long string, dryRun, signals bool) *cobra.Command {
	var req api.ActionRequest
	var timeout time.Duration
	use := name + " ID"
	if dryRun {
		use += " [--apply]"
	}
	if signals {
		use += " [--timeout 10s] [--force]"
	}
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  exactArgs(1, "one session id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !dryRun {
				req.Apply = true
			}
			if signals && timeout > 0 {
				req.Timeout = timeout.String()
			}
			c, err := a.clientForID(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			res, err := c.Action(cmd.Context(), args[0], name, req)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(res)
			}
			printChecklist(a, res, dryRun)
			return nil
		},
	}
	if dryRun {
		cmd.Flags().BoolVar(&req.Apply, "apply", false, "carry the plan out (default: only show it)")
	}
	if signals {
		cmd.Flags().DurationVar(&timeout, "timeout", 10*time.Second, "wait this long after SIGTERM before SIGKILL (at most 25s)")
		cmd.Flags().BoolVar(&req.Force, "force", false, "SIGKILL at once")
	}
	return cmd
}

var marks = map[string]string{
	session.OutcomePlanned: "[ ]",
	session.OutcomeDone:    "[x]",
	session.OutcomeSkipped: "[-]",
	session.OutcomePending: "[~]",
	session.OutcomeFailed:  "[!]",
}

func printChecklist(a *app, res *api.ActionResult, dryRun bool) {
	head := fmt.Sprintf("%s %s", res.Action, res.Session.ID)
	if dryRun && !res.Applied {
		head += " (dry run: --apply carries it out)"
	}
	fmt.Fprintln(a.stdout, head)
	for _, line := range checklist(res) {
		fmt.Fprintln(a.stdout, "  "+line)
	}
	fmt.Fprintf(a.stdout, "%s; session is now %s\n", res.Summary, res.Session.Status)
}

// checklist is an action's steps, one line each: its mark, what it does
// to what, its detail and its error.
func checklist(res *api.ActionResult) []string {
	var out []string
	for _, s := range res.Steps {
		line := fmt.Sprintf("%s %s %s", marks[s.Outcome], s.Action, s.Target)
		if s.Detail != "" {
			line += " - " + s.Detail
		}
		if s.Error != "" {
			line += " (error: " + s.Error + ")"
		}
		out = append(out, line)
	}
	return out
}

func actionCommands(a *app) []*cobra.Command {
	return []*cobra.Command{
		newAction(a, "repair", "Plan, or with --apply carry out, a repair of a dead session's agent data",
			`Repair cleans up what a crashed agent left behind: Claude Code registry
entries of dead processes (stale "busy" markers); OpenCode messages and tool
parts left in flight. It is a dry run unless --apply; applying plans again
first, so it never touches what became live meanwhile, and a repaired
session plans nothing.`, true, false),
		newAction(a, "abort", "Get a session stuck busy going again",
			`Abort is the stuck-busy escape hatch: for OpenCode, through its server
(reject a pending question, abort the turn, patch stuck tool parts); for a
dead owner, the same as repair --apply. A live Claude Code session cannot be
aborted from outside: stop it.`, false, false),
		newAction(a, "reap", "Plan, or with --apply terminate, tool processes orphaned by a dead session",
			`Reap terminates the tool processes (a test run, a server) that a dead
session's agent left running, and only those positively attributed to the
session. Each process's identity is checked just before each signal, so a
reused PID is never hit. SIGTERM, then SIGKILL after --timeout.`, true, true),
		newAction(a, "stop", "Stop a session's owner (SIGTERM, then SIGKILL after --timeout)",
			`Stop sends SIGTERM to the session's owner (to its whole process group
when sessiond launched it), and SIGKILL if it still runs after --timeout
(--force: at once). The status then changes when sessiond notices the exit.`, false, true),
	}
}
