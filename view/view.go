// Package view is how a session is shown to a person, in one place for
// sessionctl's terminal (ls, show, top, wait) and the web dashboard: the
// order by who needs the user (top's), when a session came to be as it
// is, and its state and what it waits for in a few words.
package view

import (
	"fmt"
	"sort"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// RankNames name Rank's ranks.
var RankNames = []string{"waiting", "interrupted", "busy", "idle", "running", "unknown", "stopped"}

// Rank orders sessions by who needs their user: waiting first, then
// interrupted, busy (and starting), idle, running with no activity known,
// unknown, and stopped last.
func Rank(s *api.Session) int {
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

// Since is when s came to be as it is now: its activity's start while it
// runs, its end once it stopped.
func Since(s *api.Session) time.Time {
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

// StoppedShown is how long a stopped session stays in the list unless
// all are asked for.
const StoppedShown = 24 * time.Hour

// Order is ss in top's order: by Rank, then those waiting or interrupted
// longest first (they have waited most), the others most recently
// changed first. Stopped sessions older than StoppedShown are left out
// unless all, and those keep refuses (a filter; nil keeps every one).
func Order(ss []api.Session, now time.Time, all bool, keep func(*api.Session) bool) []api.Session {
	out := make([]api.Session, 0, len(ss))
	for i := range ss {
		s := &ss[i]
		if !all && s.Status == session.StatusStopped && now.Sub(Since(s)) > StoppedShown {
			continue
		}
		if keep != nil && !keep(s) {
			continue
		}
		out = append(out, *s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := &out[i], &out[j]
		ra, rb := Rank(a), Rank(b)
		if ra != rb {
			return ra < rb
		}
		sa, sb := Since(a), Since(b)
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

// WaitingWords says what a session waits for: "permission for Bash:
// make test", "a question: Which one?", "input (the turn ended)".
func WaitingWords(w *session.WaitingFor) string {
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

// StateText is a session's state in a few words: "waiting: permission
// for Bash", "busy", "interrupted".
func StateText(s *api.Session) string {
	if s.Status != session.StatusRunning {
		return string(s.Status)
	}
	switch {
	case s.Activity == session.ActivityWaiting && s.WaitingFor != nil:
		return "waiting: " + WaitingWords(s.WaitingFor)
	case s.Activity == "" || s.Activity == session.ActivityUnknown:
		return "running"
	}
	return string(s.Activity)
}

// Age formats a duration the way ps and docker do: 45s, 12m, 3h, 5d; a
// negative one (a clock behind) as 0s.
func Age(d time.Duration) string {
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
