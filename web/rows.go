package web

import (
	"fmt"
	"html"
	"html/template"
	"net/url"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/view"
)

// The first page comes with its rows: on screen when the HTML is, before
// any script ran. The script then takes them over (assets/app.js, which
// orders and words them the same way for every change after).

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
	r := row{Rank: view.Rank(s), Host: s.Host, ID: s.ID, Agent: s.Agent, Label: hostLabel(s.Host), Cwd: s.Cwd, Title: s.Title,
		Age: view.Age(now.Sub(view.Since(s))), Named: named, Updated: s.UpdatedAt.Format(time.RFC3339Nano),
		Href: "/session?host=" + url.QueryEscape(s.Host) + "&id=" + url.QueryEscape(s.ID)}
	r.State = view.RankNames[r.Rank]
	r.StateText = view.StateText(s)
	if r.Rank == 0 {
		r.StateText = "waiting"
	}
	if r.Cwd == "" {
		r.Cwd = "-"
	}
	if s.WaitingFor != nil && s.Activity == session.ActivityWaiting {
		r.Wait = view.WaitingWords(s.WaitingFor)
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
	counts := make([]int, len(view.RankNames))
	for i := range ss {
		counts[view.Rank(&ss[i])]++
	}
	var parts []string
	for i, c := range counts {
		if c > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", c, view.RankNames[i]))
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
