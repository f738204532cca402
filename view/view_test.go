package view

import (
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

func at(id string, st session.Status, act session.Activity, ago time.Duration, now time.Time) api.Session {
	t := now.Add(-ago)
	s := api.Session{ID: id, Status: st, Activity: act, UpdatedAt: t}
	if st == session.StatusRunning {
		s.ActivitySince = &t
	} else {
		s.StoppedAt = &t
	}
	return s
}

func ids(ss []api.Session) string {
	var out []string
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return strings.Join(out, " ")
}

// Waiting, interrupted, busy (and starting), idle, running, unknown,
// stopped; the longest waiting or interrupted first, the others most
// recent first; stopped over a day ago only with all; keep filters.
func TestOrder(t *testing.T) {
	now := time.Now()
	ss := []api.Session{
		at("old", session.StatusStopped, "", 48*time.Hour, now),
		at("idle1", session.StatusRunning, session.ActivityIdle, time.Hour, now),
		at("stop1", session.StatusStopped, "", time.Hour, now),
		at("wait-new", session.StatusRunning, session.ActivityWaiting, time.Minute, now),
		at("busy-old", session.StatusRunning, session.ActivityBusy, time.Hour, now),
		at("int1", session.StatusInterrupted, "", 3*time.Hour, now),
		at("wait-old", session.StatusRunning, session.ActivityWaiting, time.Hour, now),
		at("start", session.StatusStarting, "", 30*time.Second, now),
		at("run", session.StatusRunning, "", time.Minute, now),
		at("busy-new", session.StatusRunning, session.ActivityBusy, time.Minute, now),
		at("unk", session.StatusUnknown, "", time.Minute, now),
	}
	if got, want := ids(Order(ss, now, false, nil)), "wait-old wait-new int1 start busy-new busy-old idle1 run unk stop1"; got != want {
		t.Errorf("order:\n%s\nwant:\n%s", got, want)
	}
	if got := ids(Order(ss, now, true, nil)); !strings.HasSuffix(got, "stop1 old") {
		t.Errorf("with all, the day-old stopped session comes last: %s", got)
	}
	busy := func(s *api.Session) bool { return s.Activity == session.ActivityBusy }
	if got := ids(Order(ss, now, false, busy)); got != "busy-new busy-old" {
		t.Errorf("kept busy: %s", got)
	}
	for _, s := range ss {
		if r := Rank(&s); RankNames[r] == "" {
			t.Errorf("%s: rank %d unnamed", s.ID, r)
		}
	}
}

func TestWords(t *testing.T) {
	w := &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "make test"}
	s := api.Session{Status: session.StatusRunning, Activity: session.ActivityWaiting, WaitingFor: w}
	if got := StateText(&s); got != "waiting: permission for Bash: make test" {
		t.Errorf("state %q", got)
	}
	if got := WaitingWords(&session.WaitingFor{Kind: session.WaitingQuestion, Question: "Which one?"}); got != "a question: Which one?" {
		t.Errorf("question %q", got)
	}
	for d, want := range map[time.Duration]string{-time.Second: "0s", 45 * time.Second: "45s", 12 * time.Minute: "12m", 3 * time.Hour: "3h", 120 * time.Hour: "5d"} {
		if got := Age(d); got != want {
			t.Errorf("Age(%s) = %s, want %s", d, got, want)
		}
	}
}
