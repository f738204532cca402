package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/view"
)

func newTop(a *app) *cobra.Command {
	var opts topOptions
	cmd := &cobra.Command{
		Use:   "top",
		Short: "A live view of every session, those that need you first",
		Long: `top shows every session of every agent, updated as sessiond sees changes
(its event stream), ordered by who needs attention: waiting (for a permission,
a question), interrupted, busy, idle, then stopped. Each row says for how long
the session has been so, its problems, its orphan processes and its tmux pane.

Keys:
  up/down, j/k, pgup/pgdn   move          enter   show the session
  /                         filter        a       attach to its tmux pane
  s                         send a prompt (queued until idle if it is busy)
  S stop   A abort   r repair   R reap    each shows its plan; y carries it out
  .                         show stopped sessions older than a day too
  esc                       clear the filter (without one: quit)
  q, ctrl+c                 quit

Not on a terminal (a pipe, a file), or with --once, it prints the table once
(--json: the sessions in that order) and exits.`,
		Example: `  sessionctl top
  sessionctl top --once
  sessionctl top --filter myrepo`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.now = time.Now()
			tty := false
			if f, ok := a.stdout.(*os.File); ok {
				tty = term.IsTerminal(int(f.Fd()))
			}
			if !tty || opts.once || a.json {
				ss, err := sessionsOfHosts(cmd.Context(), a, api.ListOptions{All: true})
				if err != nil {
					return err
				}
				rows := topRows(ss, opts)
				if a.json {
					if rows == nil {
						rows = []api.Session{}
					}
					return a.printJSON(rows)
				}
				printTopTable(a, rows, opts.now)
				return nil
			}
			return runTop(cmd.Context(), a, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.once, "once", false, "print the table once and exit, even on a terminal")
	cmd.Flags().BoolVarP(&opts.all, "all", "a", false, "also show sessions stopped more than a day ago")
	cmd.Flags().StringVar(&opts.filter, "filter", "", "show only sessions whose id, agent, state, folder, title or host contains this")
	return cmd
}

// topOptions are what rows top shows.
type topOptions struct {
	once   bool
	all    bool
	filter string
	now    time.Time
}

// topRows is ss filtered and in top's order (view.Order).
func topRows(ss []api.Session, o topOptions) []api.Session {
	f := strings.ToLower(o.filter)
	var keep func(*api.Session) bool
	if f != "" {
		keep = func(s *api.Session) bool {
			return strings.Contains(strings.ToLower(strings.Join([]string{s.ID, s.Agent, view.StateText(s), s.Cwd, s.Title, s.Host}, " ")), f)
		}
	}
	return view.Order(ss, o.now, o.all, keep)
}

// orphanCount is how many orphan processes s has.
func orphanCount(s *api.Session) int {
	n := 0
	for _, p := range s.Problems {
		if p.Kind == session.ProblemOrphanProcesses {
			n++
		}
	}
	return n
}

// paneText names where s can be attached: its tmux pane, or the tmux
// session sessiond launched it in.
func paneText(s *api.Session) string {
	switch {
	case s.Pane != nil:
		return s.Pane.ID
	case s.Tmux != "":
		return s.Tmux
	}
	return "-"
}

// otherProblems is s's problems but its orphans, which have a column.
func otherProblems(s *api.Session) string {
	var ps []session.Problem
	for _, p := range s.Problems {
		if p.Kind != session.ProblemOrphanProcesses {
			ps = append(ps, p)
		}
	}
	return problemSummary(ps)
}

// where is the session's title, else its folder.
func where(s *api.Session) string {
	w := shortPath(s.Cwd)
	if s.Title != "" {
		w += "  " + strconv.Quote(s.Title)
	}
	return w
}

var topColumns = []string{"ID", "AGENT", "STATE", "FOR", "PANE", "ORPHANS", "PROBLEMS", "WHERE"}

// topHeader is the column heads, with HOST first when hosts were named.
func topHeader(hosts bool) []string {
	if hosts {
		return append([]string{"HOST"}, topColumns...)
	}
	return topColumns
}

// topCells is one row of the table.
func topCells(s *api.Session, now time.Time) []string {
	orphans := "-"
	if n := orphanCount(s); n > 0 {
		orphans = strconv.Itoa(n)
	}
	return []string{s.ID, s.Agent, view.StateText(s), view.Age(now.Sub(view.Since(s))), paneText(s), orphans, otherProblems(s), where(s)}
}

// topRowCells is topCells with the host first when hosts were named.
func topRowCells(s *api.Session, now time.Time, hosts bool) []string {
	if hosts {
		return append([]string{hostLabel(s.Host)}, topCells(s, now)...)
	}
	return topCells(s, now)
}

// printTopTable is top's table, once, for a pipe or a file.
func printTopTable(a *app, rows []api.Session, now time.Time) {
	tw := tabwriter.NewWriter(a.stdout, 2, 4, 2, ' ', 0)
	hosts := a.hostsNamed()
	fmt.Fprintln(tw, strings.Join(topHeader(hosts), "\t"))
	for i := range rows {
		fmt.Fprintln(tw, strings.Join(topRowCells(&rows[i], now, hosts), "\t"))
	}
	tw.Flush()
}

// summary counts rows by what they need: "2 waiting, 1 interrupted, ...".
func summary(ss []api.Session) string {
	names := []string{"waiting", "interrupted", "busy", "idle", "running", "unknown", "stopped"}
	counts := make([]int, len(names))
	for i := range ss {
		counts[view.Rank(&ss[i])]++
	}
	var parts []string
	for i, n := range counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, names[i]))
		}
	}
	if len(parts) == 0 {
		return "no sessions"
	}
	return strings.Join(parts, ", ")
}
