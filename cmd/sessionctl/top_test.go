package main

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

func topSession(id string, st session.Status, act session.Activity, sinceAgo time.Duration, now time.Time) api.Session {
	at := now.Add(-sinceAgo)
	s := api.Session{ID: id, Agent: "claude", Status: st, Activity: act, Cwd: "/src/" + id, UpdatedAt: at}
	if st == session.StatusRunning {
		s.ActivitySince = &at
	} else {
		s.StoppedAt = &at
	}
	return s
}

func rowIDs(ss []api.Session) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return strings.Join(out, " ")
}

// TestTopRows: waiting, interrupted, busy, idle, stopped; the longest
// waiting or interrupted first, the others most recent first; stopped
// sessions older than a day only with all; the filter matches words of
// the row.
func TestTopRows(t *testing.T) {
	now := time.Now()
	ss := []api.Session{
		topSession("old", session.StatusStopped, "", 48*time.Hour, now),
		topSession("idle1", session.StatusRunning, session.ActivityIdle, time.Hour, now),
		topSession("stop1", session.StatusStopped, "", time.Hour, now),
		topSession("wait-new", session.StatusRunning, session.ActivityWaiting, time.Minute, now),
		topSession("busy-old", session.StatusRunning, session.ActivityBusy, time.Hour, now),
		topSession("int1", session.StatusInterrupted, "", 3*time.Hour, now),
		topSession("wait-old", session.StatusRunning, session.ActivityWaiting, time.Hour, now),
		topSession("busy-new", session.StatusRunning, session.ActivityBusy, time.Minute, now),
		topSession("unk", session.StatusUnknown, "", time.Minute, now),
	}
	if got, want := rowIDs(topRows(ss, topOptions{now: now})), "wait-old wait-new int1 busy-new busy-old idle1 unk stop1"; got != want {
		t.Errorf("rows:\n%s\nwant:\n%s", got, want)
	}
	if got := rowIDs(topRows(ss, topOptions{now: now, all: true})); !strings.HasSuffix(got, "stop1 old") {
		t.Errorf("with all, the day-old stopped session comes last: %s", got)
	}
	if got := rowIDs(topRows(ss, topOptions{now: now, filter: "BUSY"})); got != "busy-new busy-old" {
		t.Errorf("filter busy: %s", got)
	}
	if got := summary(topRows(ss, topOptions{now: now})); got != "2 waiting, 1 interrupted, 2 busy, 1 idle, 1 unknown, 1 stopped" {
		t.Errorf("summary: %s", got)
	}
}

// TestTopFollowsTheSelection: when a change reorders the rows, the
// selection stays on its session; a session gone from the store leaves
// the view.
func TestTopFollowsTheSelection(t *testing.T) {
	now := time.Now()
	m := testTopModel(now)
	m.Update(listMsg{ss: []api.Session{
		topSession("a", session.StatusRunning, session.ActivityBusy, time.Minute, now),
		topSession("b", session.StatusRunning, session.ActivityIdle, time.Minute, now),
		topSession("c", session.StatusRunning, session.ActivityIdle, 2*time.Minute, now),
	}})
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("j")})
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("j")})
	if s := m.current(); s == nil || s.ID != "c" {
		t.Fatalf("after j j: %+v", s)
	}
	c := topSession("c", session.StatusRunning, session.ActivityWaiting, 0, now)
	m.fetching[sessKey{"", "c"}] = true
	m.Update(sessionMsg{key: sessKey{"", "c"}, s: &c})
	if s := m.current(); s == nil || s.ID != "c" || m.cursor != 0 {
		t.Errorf("c started waiting: cursor %d on %+v, want 0 on c", m.cursor, s)
	}
	m.fetching[sessKey{"", "c"}] = true
	m.Update(sessionMsg{key: sessKey{"", "c"}, err: &api.StatusError{StatusCode: 404, Body: api.Error{Code: api.CodeNotFound}}})
	if _, ok := m.sessions[sessKey{"", "c"}]; ok || len(m.rows) != 2 {
		t.Errorf("c is gone from the store but still shown: %s", rowIDs(m.rows))
	}
	if v := m.View(); !strings.Contains(v, "1 busy, 1 idle") {
		t.Errorf("view:\n%s", v)
	}
}

// TestTopLatePlanIsDropped: a plan that arrives while the user types a
// filter is not shown, so the keys typed go to the filter and none of
// them confirms it; a result leaves the typing alone.
func TestTopLatePlanIsDropped(t *testing.T) {
	now := time.Now()
	m := testTopModel(now)
	m.Update(listMsg{ss: []api.Session{topSession("a", session.StatusRunning, session.ActivityBusy, time.Minute, now)}})
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("S")})
	seq := m.planSeq
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("/")})
	m.Update(planMsg{p: &plan{action: "stop", id: "a", lines: []string{"[ ] SIGTERM"}}, seq: seq})
	m.Update(resultMsg{text: "send done"})
	m.Update(tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune("y")})
	if m.mode != modeFilter || m.plan != nil || m.opts.filter != "y" {
		t.Errorf("mode %d, plan %+v, filter %q: the late plan took the keys", m.mode, m.plan, m.opts.filter)
	}
}

// TestTopListDoesNotUndoAFetch: a whole list read before a change does
// not replace what a fetch for that change already showed, nor drop a
// session created while it was read; the sessions named meanwhile are
// fetched again.
func TestTopListDoesNotUndoAFetch(t *testing.T) {
	now := time.Now()
	m := testTopModel(now)
	m.Update(listMsg{ss: []api.Session{topSession("a", session.StatusRunning, session.ActivityBusy, time.Minute, now)}})
	m.load() // a reconnect reloads the list; it is read now, landing later
	m.Update(eventMsg{"", api.Event{Seq: 7, SessionID: "a"}})
	m.Update(eventMsg{"", api.Event{Seq: 8, SessionID: "n"}})
	a := topSession("a", session.StatusRunning, session.ActivityWaiting, 0, now)
	n := topSession("n", session.StatusRunning, session.ActivityIdle, 0, now)
	m.Update(sessionMsg{key: sessKey{"", "a"}, s: &a})
	m.Update(sessionMsg{key: sessKey{"", "n"}, s: &n})
	_, cmd := m.Update(listMsg{ss: []api.Session{topSession("a", session.StatusRunning, session.ActivityBusy, time.Minute, now)}})
	if got := m.sessions[sessKey{"", "a"}].Activity; got != session.ActivityWaiting {
		t.Errorf("a is %s after the late list, want waiting (fetched after it was read)", got)
	}
	if _, ok := m.sessions[sessKey{"", "n"}]; !ok {
		t.Errorf("n, created while the list was read, was dropped")
	}
	if cmd == nil || !m.fetching[sessKey{"", "a"}] || !m.fetching[sessKey{"", "n"}] {
		t.Errorf("the sessions named while the list was read are not fetched again (fetching %v)", m.fetching)
	}
	// An older fetch landing after a newer one does not take its place.
	old := topSession("a", session.StatusRunning, session.ActivityBusy, time.Hour, now)
	m.Update(sessionMsg{key: sessKey{"", "a"}, s: &old})
	if got := m.sessions[sessKey{"", "a"}].Activity; got != session.ActivityWaiting {
		t.Errorf("a is %s after an older fetch, want waiting", got)
	}
}

func testTopModel(now time.Time) *topModel {
	m := newTopModel(context.Background(), &app{socket: "/nonexistent"}, topOptions{now: now}, []hostClient{{"", api.NewClient("/nonexistent")}})
	m.width, m.height = 140, 20
	return m
}

// TestTopSeveralHosts: one id on two hosts is two rows, each with its
// host; a list from one host leaves the other's rows alone; an event
// names its host's session only.
func TestTopSeveralHosts(t *testing.T) {
	now := time.Now()
	a := &app{socket: "/nonexistent", hosts: []api.Host{{Name: "ssh://a"}, {Name: "ssh://b"}}}
	m := newTopModel(context.Background(), a, topOptions{now: now}, []hostClient{{"ssh://a", api.NewClient("/nonexistent")}, {"ssh://b", api.NewClient("/nonexistent")}})
	m.width, m.height = 160, 20
	m.Update(listMsg{host: "ssh://a", ss: []api.Session{topSession("x", session.StatusRunning, session.ActivityBusy, time.Minute, now)}})
	m.Update(listMsg{host: "ssh://b", ss: []api.Session{topSession("x", session.StatusRunning, session.ActivityWaiting, time.Minute, now)}})
	if len(m.rows) != 2 || m.rows[0].Host != "ssh://b" || m.rows[1].Host != "ssh://a" {
		t.Fatalf("rows: %+v", m.rows)
	}
	v := m.View()
	if !strings.Contains(v, "HOST") || !strings.Contains(v, "a  ") || !strings.Contains(v, "b  ") {
		t.Errorf("view without hosts:\n%s", v)
	}
	// b lists again with nothing: a's row stays.
	m.Update(listMsg{host: "ssh://b", ss: nil})
	if len(m.rows) != 1 || m.rows[0].Host != "ssh://a" {
		t.Errorf("after b's empty list: %+v", m.rows)
	}
	m.Update(eventMsg{"ssh://a", api.Event{Seq: 3, SessionID: "x"}})
	if !m.fetching[sessKey{"ssh://a", "x"}] || m.fetching[sessKey{"ssh://b", "x"}] {
		t.Errorf("an event of a fetched %v", m.fetching)
	}
}
