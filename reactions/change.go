// Package reactions acts on session changes outside sessiond: it runs the
// user's executables in hooks.d with each change, and sends a desktop
// notification when a session needs its user.
//
// It is downstream of the event log, never of a pass: the daemon hands it
// each committed event (Observe), which only queues work and returns.
// Nothing a hook does — hang, fail, flood — can hold a pass or a request.
package reactions

import (
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/lib/printable"
	"github.com/sessiond/sessiond/session"
)

// Kinds of change a hook is run for.
const (
	// KindCreated: a session appeared (discovered or launched).
	KindCreated = "created"
	// KindStatus: its status changed.
	KindStatus = "status"
	// KindActivity: a running session's activity, or what it waits for,
	// changed.
	KindActivity = "activity"
)

// State is what a change is about: the status, the activity and what the
// session waits for.
type State struct {
	Status     session.Status      `json:"status"`
	Activity   session.Activity    `json:"activity,omitempty"`
	WaitingFor *session.WaitingFor `json:"waiting_for,omitempty"`
}

func (s State) same(o State) bool {
	return s.Status == o.Status && s.Activity == o.Activity && s.WaitingFor.Equal(o.WaitingFor)
}

// Change is what a hook reads on its stdin, as JSON: one change of one
// session, as the event log recorded it, with the state before it and the
// session as stored when the change was handed over (it may have moved
// on since; Seq orders changes).
type Change struct {
	Kind      string    `json:"kind"`
	Seq       uint64    `json:"seq"`
	Time      time.Time `json:"time"`
	SessionID string    `json:"session_id"`
	Agent     string    `json:"agent"`
	State
	// Reason is the status reason after the change.
	Reason string `json:"reason,omitempty"`
	// Previous is the state before the change; nil for a new session.
	Previous *State `json:"previous,omitempty"`
	// Session is the whole record in its API form, when it could be read.
	Session *api.Session `json:"session,omitempty"`
}

// env is the change as SESSIOND_* variables, for hooks written in shell.
func (c *Change) env() []string {
	env := []string{
		"SESSIOND_EVENT=" + c.Kind,
		"SESSIOND_SEQ=" + strconv.FormatUint(c.Seq, 10),
		"SESSIOND_ID=" + c.SessionID,
		"SESSIOND_AGENT=" + c.Agent,
		"SESSIOND_STATUS=" + string(c.Status),
		"SESSIOND_ACTIVITY=" + string(c.Activity),
		"SESSIOND_WAITING_FOR=" + waitingKind(c.WaitingFor),
		"SESSIOND_REASON=" + c.Reason,
	}
	// Every variable is set, empty when unknown, so none is ever one
	// inherited from sessiond's own environment.
	var prev State
	if c.Previous != nil {
		prev = *c.Previous
	}
	env = append(env,
		"SESSIOND_PREVIOUS_STATUS="+string(prev.Status),
		"SESSIOND_PREVIOUS_ACTIVITY="+string(prev.Activity))
	var cwd, title string
	if c.Session != nil {
		cwd, title = c.Session.Cwd, c.Session.Title
	}
	return append(env, "SESSIOND_CWD="+cwd, "SESSIOND_TITLE="+title)
}

// hookEnv is the environment of a hook's run: sessiond's own, less any
// SESSIOND_* variable in it (a hook must not read a stale value as this
// change's), then the change's.
func hookEnv(base []string, c *Change, socket string) []string {
	env := make([]string, 0, len(base)+16)
	for _, kv := range base {
		if !strings.HasPrefix(kv, "SESSIOND_") {
			env = append(env, kv)
		}
	}
	// Values come from agents' files: a NUL would make exec refuse the
	// whole environment, a newline or an escape would reach a script
	// that echoes it.
	for _, kv := range c.env() {
		env = append(env, printable.Line(kv))
	}
	if socket != "" {
		env = append(env, "SESSIOND_SOCKET="+socket)
	}
	return env
}

func waitingKind(w *session.WaitingFor) string {
	if w == nil {
		return ""
	}
	return string(w.Kind)
}
