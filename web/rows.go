package web

import (
	"fmt"
	"html"
	"html/template"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// The first page comes with its rows: on screen when the HTML is, before
// any script ran. The script then takes them over (assets/app.js, which
// orders and words them the same way for every change after).

// rankNames name attentionRank's ranks.
var rankNames = []string{"waiting", "interrupted", "busy", "idle", "running", "unknown", "stopped"}

// attentionRank orders by who needs the user, as sessionctl top does:
// waiting, interrupted, busy (and starting), idle, running, unknown,
// stopped.
func attentionRank(s *api.Session) int {
	switch s.Status {
	case session.StatusRunning:
		switch s.Activity {
		case session.ActivityWaiting:
			return 0
		case session.ActivityBusy:
			return 2
		case session.ActivityIdle:
			return 3
		}
		return 4
	case session.StatusInterrupted:
		return 1
	case session.StatusStarting:
		return 2
	case session.StatusUnknown:
		return 5
	}
	return 6
}

// since is when s came to be as it is: its activity's start while it
// runs, its end once it stopped.
func since(s *api.Session) time.Time {
	switch {
	case s.Status == session.StatusRunning && s.ActivitySince != nil:
		return *s.ActivitySince
	case s.StoppedAt != nil:
		return *s.StoppedAt
	case s.LastActivityAt != nil:
		return *s.LastActivityAt
	}
	return s.UpdatedAt
}

// stoppedShown is how long a stopped session is shown without the toggle.
const stoppedShown = 24 * time.Hour

// ordered is ss in top's order: by attention, then those waiting or
// interrupted longest first, the others most recently changed first;
// stopped sessions older than a day left out unless all.
func ordered(ss []api.Session, now time.Time, all bool) []api.Session {
	out := make([]api.Session, 0, len(ss))
	for i := range ss {
		if !all && ss[i].Status == session.StatusStopped && now.Sub(since(&ss[i])) > stoppedShown {
			continue
		}
		out = append(out, ss[i])
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		ra, rb := attentionRank(a), attentionRank(b)
		if ra != rb {
			return ra < rb
		}
		sa, sb := since(a), since(b)
		if !sa.Equal(sb) {
			if ra <= 1 {
				return sa.Before(sb)
			}
			return sa.After(sb)
		}
		return a.ID < b.ID
	})
	return out
}

// waitingWords says what a session waits for, as sessionctl does.
func waitingWords(w *session.WaitingFor) string {
	var s string
	switch w.Kind {
	case session.WaitingPermission:
		s = "permission"
		if w.Tool != "" {
			s += " for " + w.Tool
		}
		if w.Input != "" {
			s += ": " + w.Input
		}
	case session.WaitingQuestion:
		s = "a question"
		if w.Question != "" {
			s += ": " + w.Question
		}
	case session.WaitingInput:
		s = "input (the turn ended)"
	default:
		s = string(w.Kind)
	}
	if w.Detail != "" && w.Kind != session.WaitingInput {
		s += " (" + w.Detail + ")"
	}
	return s
}

func stateText(s *api.Session) string {
	if s.Status != session.StatusRunning {
		return string(s.Status)
	}
	switch {
	case s.Activity == session.ActivityWaiting && s.WaitingFor != nil:
		return "waiting: " + waitingWords(s.WaitingFor)
	case s.Activity == "" || s.Activity == session.ActivityUnknown:
		return "running"
	}
	return string(s.Activity)
}

func age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func hostLabel(h string) string {
	if h == "" {
		return "local"
	}
	return strings.TrimPrefix(h, "ssh://")
}

// row is one session's row as the page's template writes it.
type row struct {
	Rank                                          int
	Host, ID, State, StateText, Age, Agent, Label string
	Cwd, Title, Wait, Problems, Updated, Href     string
	Orphans                                       int
	Named                                         bool
}

func makeRow(s *api.Session, now time.Time, named bool) row {
	r := row{Rank: attentionRank(s), Host: s.Host, ID: s.ID, Agent: s.Agent, Label: hostLabel(s.Host), Cwd: s.Cwd, Title: s.Title,
		Age: age(now.Sub(since(s))), Named: named, Updated: s.UpdatedAt.Format(time.RFC3339Nano),
		Href: "/session?host=" + url.QueryEscape(s.Host) + "&id=" + url.QueryEscape(s.ID)}
	r.State = rankNames[r.Rank]
	r.StateText = stateText(s)
	if r.Rank == 0 {
		r.StateText = "waiting"
	}
	if r.Cwd == "" {
		r.Cwd = "-"
	}
	if s.WaitingFor != nil && s.Activity == session.ActivityWaiting {
		r.Wait = waitingWords(s.WaitingFor)
	}
	n := map[session.ProblemKind]int{}
	var kinds []session.ProblemKind
	for _, p := range s.Problems {
		if p.Kind == session.ProblemOrphanProcesses {
			r.Orphans++
			continue
		}
		if n[p.Kind] == 0 {
			kinds = append(kinds, p.Kind)
		}
		n[p.Kind]++
	}
	var parts []string
	for _, k := range kinds {
		if n[k] > 1 {
			parts = append(parts, fmt.Sprintf("%s(%d)", k, n[k]))
		} else {
			parts = append(parts, string(k))
		}
	}
	r.Problems = strings.Join(parts, ", ")
	return r
}

// summary counts rows by rank: "2 waiting, 1 interrupted".
func summary(ss []api.Session) string {
	counts := make([]int, len(rankNames))
	for i := range ss {
		counts[attentionRank(&ss[i])]++
	}
	var parts []string
	for i, c := range counts {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, rankNames[i]))
		}
	}
	if len(parts) == 0 {
		return "no sessions"
	}
	return strings.Join(parts, ", ")
}

// rowsHTML writes the rows as assets/app.js's rowHTML does. Every value
// is escaped here: html/template's contextual escaping took 0.1 s for
// 2,000 rows, most of the first page's time on the server.
func rowsHTML(ss []api.Session, now time.Time, named bool) template.HTML {
	var b strings.Builder
	b.Grow(len(ss) * 512)
	e := html.EscapeString
	for i := range ss {
		r := makeRow(&ss[i], now, named)
		fmt.Fprintf(&b, `<a class="row r%d" href="%s" data-host="%s" data-id="%s" data-state="%s" data-updated="%s">`,
			r.Rank, e(r.Href), e(r.Host), e(r.ID), r.State, e(r.Updated))
		fmt.Fprintf(&b, `<div class="line"><span class="state">%s</span><span class="muted age">%s</span><span>%s</span>`, e(r.StateText), r.Age, e(r.Agent))
		if r.Named {
			fmt.Fprintf(&b, `<span class="muted">%s</span>`, e(r.Label))
		}
		fmt.Fprintf(&b, `<span class="muted">%s</span></div><div class="line"><span class="where">%s</span>`, e(r.ID), e(r.Cwd))
		if r.Title != "" {
			fmt.Fprintf(&b, `<span>“%s”</span>`, e(r.Title))
		}
		b.WriteString(`</div>`)
		if r.Wait != "" {
			fmt.Fprintf(&b, `<div class="line wait">%s</div>`, e(r.Wait))
		}
		if r.Problems != "" || r.Orphans > 0 {
			fmt.Fprintf(&b, `<div class="line problems">%s`, e(r.Problems))
			if r.Orphans == 1 {
				b.WriteString(`<span>1 orphan</span>`)
			} else if r.Orphans > 1 {
				fmt.Fprintf(&b, `<span>%d orphans</span>`, r.Orphans)
			}
			b.WriteString(`</div>`)
		}
		b.WriteString(`</a>`)
	}
	return template.HTML(b.String())
}
