// Package hookjson reads hook payloads of the shape Claude Code defined
// and Codex copied: one JSON object on the hook's stdin with session_id,
// hook_event_name and cwd, and per event the tool's name and input, the
// prompt, or the notification's type. Each adapter says which of its
// tools ask the user a question; the rest is the same for both agents.
package hookjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// payload is the part of a hook's JSON sessiond reads.
type payload struct {
	SessionID        string          `json:"session_id"`
	Event            string          `json:"hook_event_name"`
	Cwd              string          `json:"cwd"`
	ToolName         string          `json:"tool_name"`
	ToolInput        json.RawMessage `json:"tool_input"`
	NotificationType string          `json:"notification_type"`
	Message          string          `json:"message"`
}

// Agent is what differs between the agents that speak this shape.
type Agent struct {
	// QuestionTools are the tools whose call asks the user a question
	// (Claude Code's AskUserQuestion), by name.
	QuestionTools []string
	// Events are every hook event the agent's versions sessiond knows
	// send; another is counted as drift by the adapter (Known).
	Events []string
}

// Known reports whether event is one of the agent's events sessiond
// knows.
func (a Agent) Known(event string) bool {
	for _, e := range a.Events {
		if e == event {
			return true
		}
	}
	return false
}

// Read reads one payload: the session it names, the event, and what the
// event says the session does from now on.
func (a Agent) Read(b []byte) (adapters.Hook, error) {
	var p payload
	if err := json.Unmarshal(b, &p); err != nil {
		return adapters.Hook{}, fmt.Errorf("hook payload is not a JSON object: %w", err)
	}
	switch {
	case p.SessionID == "":
		return adapters.Hook{}, errors.New("hook payload has no session_id")
	case !isID(p.SessionID, maxID):
		return adapters.Hook{}, fmt.Errorf("hook payload's session_id %q is not a session id (at most %d letters, digits and . _ : -)", oneline.Cut(p.SessionID, 40), maxID)
	case p.Event == "":
		return adapters.Hook{}, errors.New("hook payload has no hook_event_name")
	case !isID(p.Event, maxEvent):
		return adapters.Hook{}, fmt.Errorf("hook payload's hook_event_name %q is not an event name (at most %d letters and digits)", oneline.Cut(p.Event, 40), maxEvent)
	}
	// Whatever sends a hook can name anything: what is kept of it is
	// bounded (a tool's name, a folder).
	p.ToolName = oneline.Cut(p.ToolName, maxToolName)
	if len(p.Cwd) > maxCwd {
		p.Cwd = ""
	}
	h := adapters.Hook{UpstreamID: p.SessionID, Event: p.Event, Cwd: p.Cwd}
	h.Activity, h.WaitingFor = a.activity(&p)
	return h, nil
}

// activity maps an event to the activity it starts. Events that say
// nothing about what comes next (SessionStart, SessionEnd, the rest of
// Claude Code's 34) map to "".
func (a Agent) activity(p *payload) (session.Activity, *session.WaitingFor) {
	question := func() (session.Activity, *session.WaitingFor) {
		return session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingQuestion, Tool: p.ToolName, Question: QuestionText(p.ToolInput)}
	}
	asks := p.ToolName != "" && containsFold(a.QuestionTools, p.ToolName)
	switch p.Event {
	case "PreToolUse":
		if asks {
			// The question shows as the call starts; no permission
			// request follows it.
			return question()
		}
		return session.ActivityBusy, nil
	case "PermissionRequest":
		if asks {
			return question()
		}
		return session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Tool: p.ToolName, Input: shortInput(p.ToolInput)}
	case "UserPromptSubmit", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "PermissionDenied",
		"SubagentStart", "SubagentStop", "PreCompact", "PostCompact":
		return session.ActivityBusy, nil
	case "PreSkillShellCommand":
		// Claude Code 2.1.332: a guard before a skill's or slash
		// command's embedded shell command runs, as Claude expands it.
		// Its tool_use_id names no call in the transcript and it asks
		// the user nothing: busy, whatever tool it names, never a
		// question or a permission (one that needs approval sends its
		// own PermissionRequest).
		return session.ActivityBusy, nil
	case "Stop", "Interrupt":
		// The turn ended (Codex's Interrupt: the user stopped it): the
		// agent waits for the next prompt.
		return session.ActivityIdle, &session.WaitingFor{Kind: session.WaitingInput}
	case "Notification":
		switch p.NotificationType {
		case "permission_prompt":
			return session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Detail: oneline.Cut(p.Message, maxShort)}
		case "idle_prompt":
			return session.ActivityIdle, &session.WaitingFor{Kind: session.WaitingInput}
		}
	}
	return "", nil
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// maxShort bounds the short forms, in runes.
const maxShort = 160

// Bounds on a payload's names: session ids are UUIDs (Claude Code,
// Codex), event names CamelCase words, tool names short words (an MCP
// tool's "mcp__server__tool" is the longest kind); a path is at most
// PATH_MAX.
const (
	maxID       = 128
	maxEvent    = 64
	maxToolName = 128
	maxCwd      = 4096
)

// isID reports whether s is a non-empty name of at most max bytes of
// letters, digits and . _ : -.
func isID(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}

// shortInput is a one-line form of a tool's input for a person deciding
// on it: its command, file, URL or pattern when it has one, else its
// JSON, cut at maxShort runes.
func shortInput(raw json.RawMessage) string {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "path", "notebook_path", "url", "pattern", "query", "prompt"} {
			var s string
			if v, ok := obj[k]; ok && json.Unmarshal(v, &s) == nil && s != "" {
				return oneline.Cut(s, maxShort)
			}
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return ""
	}
	if buf.String() == "null" {
		return ""
	}
	return oneline.Cut(buf.String(), maxShort)
}

// QuestionText is the first question of a question tool's input
// (AskUserQuestion's {"questions":[{"question":…}]}, or a plain
// {"question":…}).
func QuestionText(raw json.RawMessage) string {
	var in struct {
		Question  string `json:"question"`
		Questions []struct {
			Question string `json:"question"`
		} `json:"questions"`
	}
	if json.Unmarshal(raw, &in) != nil {
		return ""
	}
	q := in.Question
	if len(in.Questions) > 0 {
		q = in.Questions[0].Question
		if n := len(in.Questions); n > 1 {
			q = fmt.Sprintf("%s (and %d more)", q, n-1)
		}
	}
	return oneline.Cut(q, maxShort)
}

// ShortInput is the one-line form of a tool's input sessiond shows as
// what a permission is for: its command, file, URL or pattern when it
// has one, else its JSON, cut at 160 runes. For adapters whose agent
// names the call in another field than tool_input.
func ShortInput(raw json.RawMessage) string { return shortInput(raw) }

// Cut is s on one line, cut at 160 runes: how a permission's detail is
// kept.
func Cut(s string) string { return oneline.Cut(s, maxShort) }
