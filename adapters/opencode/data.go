package opencode

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/session"
)

// sessionData is what one source (a database or the legacy storage) shows
// of one session: its row, its last assistant message and the tool calls
// it left pending or running. It is cached between passes; only sessions
// that changed or have work in flight are read again.
type sessionData struct {
	ID        string
	ProjectID string
	ParentID  string
	Directory string
	Title     string
	Version   string
	Created   time.Time
	Updated   time.Time
	Archived  time.Time

	// LastAssistant is the session's last assistant message, nil when it
	// has none (a new session, or only user messages).
	LastAssistant *ocMessage
	// Tools are the session's tool parts in pending or running state.
	Tools []toolCall
	// LastWrite is the latest time_updated seen among the session row,
	// its newest messages and the parts of its last assistant message.
	LastWrite time.Time

	// Source is the database path, or the legacy storage directory.
	Source string
	legacy bool
	// drift is what the session's messages read showed that sessiond does
	// not understand (a role, a field of another JSON type); each read
	// of the session reads them afresh, so it is what a whole read says.
	drift kit.Seen
}

// toolCall is an in-flight tool part with its row times.
type toolCall struct {
	ocPart
	Created time.Time
	Updated time.Time
}

// inFlight reports whether the data shows a turn that never finished.
func (s *sessionData) inFlight() bool {
	return len(s.Tools) > 0 || (s.LastAssistant != nil && s.LastAssistant.Open())
}

func (s *sessionData) touch(t time.Time) {
	if t.After(s.LastWrite) {
		s.LastWrite = t
	}
}

// sortTools puts the tool parts in the order of their ids (OpenCode's ids
// grow with time), however they were read: a whole read, a read of what
// changed and a restored checkpoint then hold the same data.
func (s *sessionData) sortTools() {
	sort.Slice(s.Tools, func(i, j int) bool { return s.Tools[i].ID < s.Tools[j].ID })
}

// runningQuestion returns the first running `question` tool part, if any.
func (s *sessionData) runningQuestion() *toolCall {
	for i := range s.Tools {
		if s.Tools[i].Tool == "question" && s.Tools[i].Status == "running" {
			return &s.Tools[i]
		}
	}
	return nil
}

// issues lists the in-flight work as adapter issues: incomplete_message
// for an open last assistant message and orphaned_tool_call per part.
func (s *sessionData) issues(prefix string) []adapters.Issue {
	var out []adapters.Issue
	if m := s.LastAssistant; m != nil && m.Open() {
		d := fmt.Sprintf("assistant message %s", m.ID)
		if m.Agent != "" || m.ModelID != "" {
			d += fmt.Sprintf(" (agent %s, model %s)", orDash(m.Agent), orDash(m.ModelID))
		}
		if !m.Created.IsZero() {
			d += " started " + m.Created.UTC().Format(time.RFC3339)
		}
		d += " has no time.completed"
		out = append(out, adapters.Issue{Kind: session.ProblemIncompleteMessage, Key: m.ID, Detail: prefix + d, Since: m.Created})
	}
	tools := append([]toolCall(nil), s.Tools...)
	sort.Slice(tools, func(i, j int) bool { return tools[i].ID < tools[j].ID })
	for _, t := range tools {
		since := t.Start
		if since.IsZero() {
			since = t.Created
		}
		d := fmt.Sprintf("tool %s (call %s, part %s, message %s) is %s", orDash(t.Tool), orDash(t.CallID), t.ID, t.MessageID, t.Status)
		if !since.IsZero() {
			d += " since " + since.UTC().Format(time.RFC3339)
		}
		if t.ChildSessionID != "" {
			d += "; subagent session " + t.ChildSessionID
		}
		out = append(out, adapters.Issue{Kind: session.ProblemOrphanedToolCall, Key: t.ID, Detail: prefix + d, Since: since})
	}
	return out
}

// describeFlight says in words what is in flight, for activity evidence.
func (s *sessionData) describeFlight() string {
	var parts []string
	if m := s.LastAssistant; m != nil && m.Open() {
		parts = append(parts, "assistant message "+m.ID+" not completed")
	}
	if n := len(s.Tools); n > 0 {
		names := make([]string, 0, n)
		for _, t := range s.Tools {
			names = append(names, t.Tool+" "+t.Status)
		}
		sort.Strings(names)
		parts = append(parts, "tool parts: "+strings.Join(names, ", "))
	}
	return strings.Join(parts, "; ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
