package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/view"
)

func newLs(a *app) *cobra.Command {
	var opts api.ListOptions
	cmd := &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List sessions (stopped ones only with --all or --status)",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return listSessions(cmd.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.All, "all", "a", false, "include stopped sessions")
	cmd.Flags().StringVar(&opts.Agent, "agent", "", "only this agent (claude, opencode, codex, copilot)")
	cmd.Flags().StringVar(&opts.Status, "status", "", "only these statuses, comma-separated (starting,running,stopped,interrupted,unknown)")
	_ = cmd.RegisterFlagCompletionFunc("status", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return []string{"starting", "running", "stopped", "interrupted", "unknown"}, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

func printTable(a *app, ss []api.Session, now time.Time) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	hosts := a.hostsNamed()
	if hosts {
		fmt.Fprint(tw, "HOST\t")
	}
	fmt.Fprintln(tw, "ID\tAGENT\tSTATUS\tACTIVITY\tPID\tAGE\tCWD\tPROBLEMS")
	for _, s := range ss {
		if hosts {
			fmt.Fprintf(tw, "%s\t", hostLabel(s.Host))
		}
		pid := "-"
		if s.PID > 0 {
			pid = strconv.Itoa(s.PID)
			if len(s.CandidatePIDs) > 1 {
				pid += "+" + strconv.Itoa(len(s.CandidatePIDs)-1)
			}
		}
		act := string(s.Activity)
		switch {
		case act == "":
			act = "-"
		case s.Activity == session.ActivityWaiting && s.WaitingFor != nil:
			act += " (" + string(s.WaitingFor.Kind) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.ID, s.Agent, s.Status, act, pid,
			view.Age(now.Sub(s.CreatedAt)), shortPath(s.Cwd), problemSummary(s.Problems))
	}
	tw.Flush()
}

// shortPath replaces the home directory with ~.
func shortPath(p string) string {
	if p == "" {
		return "-"
	}
	if h, err := os.UserHomeDir(); err == nil && h != "/" {
		if p == h {
			return "~"
		}
		if strings.HasPrefix(p, h+string(filepath.Separator)) {
			return "~" + p[len(h):]
		}
	}
	return p
}

func problemSummary(ps []session.Problem) string {
	if len(ps) == 0 {
		return "-"
	}
	n := map[session.ProblemKind]int{}
	var order []session.ProblemKind
	for _, p := range ps {
		if n[p.Kind] == 0 {
			order = append(order, p.Kind)
		}
		n[p.Kind]++
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = string(k)
		if n[k] > 1 {
			parts[i] += fmt.Sprintf("(%d)", n[k])
		}
	}
	return strings.Join(parts, ",")
}

func newShow(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one session by id, upstream id or a unique prefix",
		Args:  exactArgs(1, "one session id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, s, err := a.sessionOnHosts(cmd.Context(), args[0])
			if err == nil && s == nil {
				s, err = c.Session(cmd.Context(), args[0])
			}
			if err != nil {
				return err
			}
			s.Host = c.Host
			if a.json {
				return a.printJSON(s)
			}
			printSession(a, s)
			return nil
		},
	}
}

func printSession(a *app, s *api.Session) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Local().Format(time.RFC3339)
	}
	row("Host", s.Host)
	row("ID", s.ID)
	row("Agent", s.Agent)
	row("Upstream ID", s.UpstreamID)
	row("Status", fmt.Sprintf("%s (%s)", s.Status, s.StatusReason))
	act := string(s.Activity)
	if s.ActivitySource != "" {
		act += " (from the " + string(s.ActivitySource)
		if s.ActivitySince != nil {
			act += ", since " + ts(s.ActivitySince)
		}
		act += ")"
	}
	row("Activity", act)
	if s.WaitingFor != nil {
		row("Waiting for", view.WaitingWords(s.WaitingFor))
	}
	if s.PID > 0 {
		owner := strconv.Itoa(s.PID)
		if s.OwnerInferred {
			owner += " (inferred"
		} else {
			owner += " ("
		}
		if s.OwnerEvidence != "" {
			if s.OwnerInferred {
				owner += ": "
			}
			owner += s.OwnerEvidence
		}
		owner += ")"
		row("Owner PID", owner)
	}
	if len(s.CandidatePIDs) > 0 {
		var c []string
		for _, p := range s.CandidatePIDs {
			c = append(c, strconv.Itoa(p))
		}
		row("Candidates", strings.Join(c, ", "))
	}
	row("Cwd", shortPath(s.Cwd))
	row("Title", s.Title)
	row("Launched", strconv.FormatBool(s.Launched))
	if s.Pane != nil {
		row("Pane", s.Pane.ID+" of tmux server "+s.Pane.Socket+" (sessionctl attach "+s.ID+")")
	}
	if s.Launched {
		row("Mode", s.Mode)
		if s.Tmux != "" {
			row("Attach", "tmux attach -t "+s.Tmux)
		}
		row("Log", s.LogPath)
		if x := s.Exit; x != nil {
			how := fmt.Sprintf("code %d", x.Code)
			if x.Signal != "" {
				how = "signal " + x.Signal
			}
			row("Exit", fmt.Sprintf("pid %d, %s, at %s", x.PID, how, x.At.Local().Format(time.RFC3339)))
		}
	}
	row("Created", ts(&s.CreatedAt))
	row("Updated", ts(&s.UpdatedAt))
	row("Last activity", ts(s.LastActivityAt))
	row("Stopped", ts(s.StoppedAt))
	if s.Resume != nil {
		row("Resume", fmt.Sprintf("%s %s in %s", s.Resume.Agent, s.Resume.UpstreamID, shortPath(s.Resume.Cwd)))
	}
	tw.Flush()
	if len(s.Problems) == 0 {
		fmt.Fprintln(a.stdout, "Problems:       none")
		return
	}
	fmt.Fprintln(a.stdout, "Problems:")
	for _, p := range s.Problems {
		fmt.Fprintf(a.stdout, "  - %s: %s (since %s)\n", p.Kind, p.Detail, p.Since.Local().Format(time.RFC3339))
	}
}

func newHealth(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Show the daemon's health: store, last reconcile, each adapter's last scan",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return showHealth(cmd.Context(), a)
		},
	}
}

func printHealth(a *app, h *api.Health) error {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	if h.Host != "" {
		fmt.Fprintf(tw, "host:\t%s\n", h.Host)
	}
	fmt.Fprintf(tw, "sessiond:\t%s (pid %d, up %s)\n", h.Version, h.PID, h.Uptime)
	fmt.Fprintf(tw, "socket:\t%s\n", h.Socket)
	fmt.Fprintf(tw, "store:\t%s (last event %d)\n", h.StorePath, h.LastEventSeq)
	if h.StoreRecovered != "" {
		fmt.Fprintf(tw, "store recovered:\ta corrupt store was moved to %s\n", h.StoreRecovered)
	}
	rec := fmt.Sprintf("%s ago, took %s", view.Age(time.Since(h.LastReconcile)), h.ReconcileTook)
	if h.ReconcileError != "" {
		rec += "; error: " + h.ReconcileError
	}
	fmt.Fprintf(tw, "last reconcile:\t%s\n", rec)
	var counts []string
	for _, st := range []string{"starting", "running", "interrupted", "unknown", "stopped"} {
		if n := h.Sessions[st]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, st))
		}
	}
	if len(counts) == 0 {
		counts = []string{"none"}
	}
	fmt.Fprintf(tw, "sessions:\t%s\n", strings.Join(counts, ", "))
	if len(h.Adapters) == 0 {
		fmt.Fprintf(tw, "adapters:\tnone\n")
	}
	for _, ad := range h.Adapters {
		line := fmt.Sprintf("%d sessions, scanned %s ago in %s", ad.Sessions, view.Age(time.Since(ad.LastScan)), ad.LastDuration)
		if ad.LastError != "" {
			line += "; ERROR: " + ad.LastError
		}
		fmt.Fprintf(tw, "adapter %s:\t%s\n", ad.Name, line)
		for _, ie := range ad.InputErrors {
			fmt.Fprintf(tw, "\tunreadable: %s\n", ie)
		}
		for _, w := range ad.InputWarnings {
			fmt.Fprintf(tw, "\tbad data: %s\n", w)
		}
		for _, d := range ad.Drift {
			fmt.Fprintf(tw, "\tdrift: %s\n", driftLine(ad.Name, d))
		}
	}
	printReactionsHealth(tw, h.Reactions)
	return tw.Flush()
}

// printReactionsHealth adds the hooks directory, the notifications and
// each hook's record to health's table; a failing hook says FAILING.
func printReactionsHealth(w io.Writer, r *api.ReactionsHealth) {
	if r == nil {
		return
	}
	dir := r.HooksDir
	switch {
	case dir == "":
		dir = "none (--hooks-dir \"\")"
	case r.HooksDirError != "":
		dir += "; ERROR: " + r.HooksDirError
	}
	fmt.Fprintf(w, "hooks dir:\t%s\n", dir)
	fmt.Fprintf(w, "notify:\t%s\n", r.Notify)
	for _, h := range r.Hooks {
		var line string
		switch {
		case h.Skipped != "":
			line = "not run: " + h.Skipped
		case h.Runs == 0 || h.LastRun == nil:
			line = "no run yet"
		default:
			line = fmt.Sprintf("%d runs, %d failed, last %s ago (took %s)", h.Runs, h.Failures, view.Age(time.Since(*h.LastRun)), h.LastTook)
		}
		if h.Dropped > 0 {
			line += fmt.Sprintf("; %d changes dropped while it was behind", h.Dropped)
		}
		if h.Failing {
			line += "; FAILING: " + h.LastError
		} else if h.LastError != "" && h.LastErrorAt != nil {
			line += fmt.Sprintf("; failed %s ago: %s", view.Age(time.Since(*h.LastErrorAt)), h.LastError)
		}
		fmt.Fprintf(w, "hook %s:\t%s\n", h.Name, line)
	}
}

// printEvent prints one event: a line, or its JSON object, each with the
// host it came from when that has a name (the local socket has none).
func printEvent(a *app, host string, ev api.Event) error {
	if a.json {
		return a.printJSON(struct {
			Host string `json:"host,omitempty"`
			api.Event
		}{host, ev})
	}
	change := string(ev.To)
	if ev.From != "" && ev.From != ev.To {
		change = string(ev.From) + " -> " + string(ev.To)
	}
	if ev.Activity != "" {
		change += "/" + string(ev.Activity)
	}
	if ev.WaitingFor != nil && ev.Activity == session.ActivityWaiting {
		change += " (" + view.WaitingWords(ev.WaitingFor) + ")"
	}
	prefix := ""
	if host != "" {
		prefix = hostLabel(host) + "\t"
	}
	reason := ev.Reason
	if ev.Origin != "" {
		reason += " (by " + ev.Origin + ")"
	}
	_, err := fmt.Fprintf(a.stdout, "%s%d\t%s\t%s\t%-16s\t%s\t%s\n", prefix, ev.Seq, ev.Time.Local().Format(time.RFC3339),
		ev.SessionID, ev.Type, change, reason)
	return err
}

func newEvents(a *app) *cobra.Command {
	var opts api.EventsOptions
	cmd := &cobra.Command{
		Use:   "events",
		Short: "Print the event log; --follow keeps printing new events",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return followEvents(cmd.Context(), a, opts)
		},
	}
	cmd.Flags().Uint64Var(&opts.Since, "since", 0, "print events after this sequence number")
	cmd.Flags().BoolVarP(&opts.Follow, "follow", "f", false, "keep printing new events")
	return cmd
}

// driftLine says one drift entry of health: "claude 2.1.340: 2 unknown
// line types (x, y) in 14 transcripts — activity may be approximate".
func driftLine(agent string, d api.Drift) string {
	version := d.Version
	if version == "" {
		version = "(version not written)"
	}
	vals := make([]string, 0, len(d.Values)+1)
	for _, v := range d.Values {
		vals = append(vals, v.Value)
	}
	n := len(d.Values)
	if d.Others > 0 {
		vals = append(vals, fmt.Sprintf("and others in %d", d.Others))
	}
	what := driftNouns[d.Kind]
	if what == "" {
		what = "unknown " + strings.ReplaceAll(d.Kind, "_", " ")
	}
	after := "activity may be approximate"
	if d.Kind == "hook_event" {
		after = "those hooks say nothing of activity"
	}
	return fmt.Sprintf("%s %s: %d %s (%s) in %d %s — %s", agent, version, n, plural(what, n), strings.Join(vals, ", "),
		d.Inputs, plural(d.Input, d.Inputs), after)
}

// driftNouns name the kinds of api.Drift, one of each.
var driftNouns = map[string]string{
	"line_type":   "unknown line type",
	"status":      "unknown status value",
	"waiting_for": "unknown waitingFor value",
	"hook_event":  "unknown hook event",
	"field_type":  "field of another type",
}

// plural is noun for n of it: "transcripts", "registry entries",
// "fields of another type".
func plural(noun string, n int) string {
	if n == 1 {
		return noun
	}
	first, rest, _ := strings.Cut(noun, " of ")
	if rest != "" {
		return plural(first, n) + " of " + rest
	}
	if strings.HasSuffix(noun, "y") && !strings.HasSuffix(noun, "ey") {
		return noun[:len(noun)-1] + "ies"
	}
	return noun + "s"
}
