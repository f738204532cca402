// Package copilottest builds GitHub Copilot CLI homes for tests: session
// folders with events.jsonl and workspace.yaml written line by line in
// the shapes the real CLI (1.0.102) writes them, recorded from runs
// against internal/testkit/fakemodel (`copilot -p` and the TUI in tmux,
// docs/agents/copilot.md). Each line keeps the keys, their order and the
// fields sessiond reads; fields nothing reads (usage figures, the system
// prompt's text) are shortened.
package copilottest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Session is one session folder being written: each method appends one
// line to its events.jsonl, as the CLI does (one write per line, a
// newline after each).
type Session struct {
	Root string // the Copilot home
	ID   string
	Cwd  string
	Dir  string // <Root>/session-state/<ID>
	// At is the time of the next line; each line moves it on by Step.
	At   time.Time
	Step time.Duration
	// Interaction is the id user.message starts and the turns carry.
	Interaction string

	parent string
	n      int
	lines  [][]byte
}

// New makes the session folder (no file yet).
func New(root, id, cwd string, at time.Time) (*Session, error) {
	s := &Session{Root: root, ID: id, Cwd: cwd, Dir: filepath.Join(root, "session-state", id), At: at.UTC(), Step: 10 * time.Millisecond}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	return s, nil
}

// EventsPath is the session's events.jsonl.
func (s *Session) EventsPath() string { return filepath.Join(s.Dir, "events.jsonl") }

// Lines are the lines written so far, each without its newline.
func (s *Session) Lines() [][]byte { return s.lines }

// uuid is a deterministic uuid-shaped id for the n-th thing of a session.
func (s *Session) uuid(kind byte) string {
	s.n++
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", s.n, int(kind), s.n%4096, s.n%4096, s.n)
}

// ts is the RFC 3339 form the CLI writes (milliseconds, Z).
func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// line appends {"type","data","id","timestamp","parentId"}.
func (s *Session) line(typ string, data any) error {
	d, err := json.Marshal(data)
	if err != nil {
		return err
	}
	id := s.uuid('e')
	var parent any
	if s.parent != "" {
		parent = s.parent
	}
	p, _ := json.Marshal(parent)
	b := fmt.Appendf(nil, `{"type":%q,"data":%s,"id":%q,"timestamp":%q,"parentId":%s}`, typ, d, id, ts(s.At), p)
	s.parent = id
	s.At = s.At.Add(s.Step)
	return s.Raw(b)
}

// Raw appends bytes as one line (a newline is added): damaged lines for
// tests of bad input.
func (s *Session) Raw(b []byte) error {
	f, err := os.OpenFile(s.EventsPath(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	s.lines = append(s.lines, append([]byte(nil), b...))
	_, err = f.Write(append(b, '\n'))
	return err
}

// Start writes session.start.
func (s *Session) Start(version string) error {
	return s.line("session.start", map[string]any{
		"sessionId": s.ID, "version": 1, "producer": "copilot-agent", "copilotVersion": version,
		"startTime": ts(s.At), "selectedModel": "fake-model", "contextTier": nil,
		"context": map[string]any{"cwd": s.Cwd}, "alreadyInUse": false, "remoteSteerable": false,
	})
}

// Resume writes session.resume, as a process that takes the session over
// does.
func (s *Session) Resume(eventCount int) error {
	return s.line("session.resume", map[string]any{
		"resumeTime": ts(s.At), "eventCount": eventCount, "selectedModel": "fake-model",
		"context": map[string]any{"cwd": s.Cwd}, "alreadyInUse": false, "sessionWasActive": false,
	})
}

// UserMessage writes a prompt and starts an interaction.
func (s *Session) UserMessage(text string) error {
	s.Interaction = s.uuid('i')
	return s.line("user.message", map[string]any{
		"content": text, "transformedContent": "<current_datetime>" + ts(s.At) + "</current_datetime>\n\n" + text,
		"messageId": s.uuid('m'), "supportedNativeDocumentMimeTypes": []string{}, "delivery": "idle",
		"interactionId": s.Interaction, "turnId": "0", "parentAgentTaskId": s.uuid('t'),
	})
}

// SystemMessage writes the system prompt line (its text shortened).
func (s *Session) SystemMessage() error {
	return s.line("system.message", map[string]any{"role": "system", "content": "You are the GitHub Copilot CLI, a terminal assistant built by GitHub."})
}

// TurnStart writes assistant.turn_start (turn ids count from 0 in each
// interaction).
func (s *Session) TurnStart(turn int) error {
	return s.line("assistant.turn_start", map[string]any{"turnId": strconv.Itoa(turn), "interactionId": s.Interaction})
}

// TurnEnd writes assistant.turn_end.
func (s *Session) TurnEnd(turn int) error {
	return s.line("assistant.turn_end", map[string]any{"turnId": strconv.Itoa(turn)})
}

// SubagentTurnEnd writes a sub-agent's assistant.turn_end, which names
// the task call it runs under.
func (s *Session) SubagentTurnEnd(turn int, parentCall string) error {
	return s.line("assistant.turn_end", map[string]any{"turnId": strconv.Itoa(turn), "parentToolCallId": parentCall})
}

// UsageRecord writes a session.usage_record (figures shortened).
func (s *Session) UsageRecord() error {
	return s.line("session.usage_record", map[string]any{"usage": map[string]any{"model": "fake-model", "inputTokens": 12293, "outputTokens": 1, "isByok": true}})
}

// ToolRequest is one tool call of an assistant.message.
type ToolRequest struct {
	ID      string
	Name    string // "bash", "ask_user", ...
	Command string // the bash tool's command
}

func (r ToolRequest) arguments() map[string]any {
	if r.Name == "ask_user" {
		return map[string]any{"message": r.Command, "requestedSchema": map[string]any{"type": "object",
			"properties": map[string]any{"answer": map[string]any{"type": "string"}}, "required": []string{"answer"}}}
	}
	return map[string]any{"command": r.Command, "description": "Run it", "timeout": 600000}
}

// AssistantMessage writes the model's reply in a turn: text, and tool
// requests (another turn follows once they ran).
func (s *Session) AssistantMessage(turn int, text string, reqs ...ToolRequest) error {
	tr := []map[string]any{}
	for _, r := range reqs {
		tr = append(tr, map[string]any{"toolCallId": r.ID, "name": r.Name, "arguments": r.arguments(), "type": "function",
			"intentionSummary": "Run it", "toolTitle": "Running command"})
	}
	return s.line("assistant.message", map[string]any{
		"messageId": s.uuid('m'), "model": "fake-model", "content": text, "toolRequests": tr,
		"interactionId": s.Interaction, "turnId": strconv.Itoa(turn), "rte": false,
	})
}

// ToolStart writes tool.execution_start.
func (s *Session) ToolStart(turn int, r ToolRequest) error {
	return s.line("tool.execution_start", map[string]any{
		"toolCallId": r.ID, "toolName": r.Name, "arguments": r.arguments(), "turnId": strconv.Itoa(turn),
		"model": "fake-model", "toolTitle": "Running command",
	})
}

// ToolComplete writes tool.execution_complete; interaction "resume" is
// the one a resume writes for a call a dead process left.
func (s *Session) ToolComplete(turn int, id string, success bool) error {
	data := map[string]any{"toolCallId": id, "model": "fake-model", "interactionId": s.Interaction,
		"turnId": strconv.Itoa(turn), "rte": false, "success": success}
	if !success {
		data["error"] = map[string]any{"message": "Permission denied", "code": "denied"}
	}
	return s.line("tool.execution_complete", data)
}

// PermissionRequested writes a shell permission request for a call.
func (s *Session) PermissionRequested(reqID string, r ToolRequest) error {
	return s.line("permission.requested", map[string]any{
		"requestId": reqID,
		"permissionRequest": map[string]any{"kind": "shell", "toolCallId": r.ID, "fullCommandText": r.Command,
			"shellType": "bash", "intention": "Run it", "commands": []map[string]any{}, "possiblePaths": []string{},
			"canOfferSessionApproval": true, "hasWriteFileRedirection": false, "possibleUrls": []string{}},
		"promptRequest": map[string]any{"kind": "commands", "fullCommandText": r.Command, "toolCallId": r.ID},
		"agentMode":     "interactive", "permissionMode": "manual", "ownerSessionId": s.ID,
	})
}

// PermissionCompleted writes the answer: "approved", or
// "denied-no-approval-rule-and-could-not-request-from-user" as `-p`
// without --allow-all-tools answers.
func (s *Session) PermissionCompleted(reqID, callID, kind string) error {
	return s.line("permission.completed", map[string]any{"requestId": reqID, "toolCallId": callID,
		"result": map[string]any{"kind": kind}, "decisionSource": "human_response"})
}

// Error writes session.error, as a failed model call does after its
// turn's assistant.turn_end.
func (s *Session) Error(errorType, message string, status int) error {
	return s.line("session.error", map[string]any{"errorType": errorType, "message": message, "statusCode": status})
}

// Abort writes abort, as Ctrl-C during a turn does (after the turn's
// assistant.turn_end, with no completion for the running tool).
func (s *Session) Abort(reason string) error {
	return s.line("abort", map[string]any{"reason": reason})
}

// Shutdown writes session.shutdown (shortened), as the process writes at
// its end.
func (s *Session) Shutdown(kind string) error {
	return s.line("session.shutdown", map[string]any{"shutdownType": kind, "totalApiDurationMs": 175,
		"sessionStartTime": s.At.UnixMilli(), "codeChanges": map[string]any{"linesAdded": 0, "linesRemoved": 0, "filesModified": []string{}},
		"modelMetrics": map[string]any{}})
}

// Workspace writes workspace.yaml as the CLI does (name empty: the TUI's
// before the first prompt, which has no name line).
func (s *Session) Workspace(name string, created, updated time.Time) error {
	b := fmt.Appendf(nil, "id: %s\ncwd: %s\nclient_name: github/cli\n", s.ID, s.Cwd)
	if name != "" {
		b = fmt.Appendf(b, "name: %s\n", name)
	}
	b = fmt.Appendf(b, "user_named: false\nsummary_count: 0\nfork_count: 0\ncreated_at: %s\nupdated_at: %s\n", ts(created), ts(updated))
	tmp := filepath.Join(s.Dir, ".workspace.yaml.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(s.Dir, "workspace.yaml"))
}

// InUse writes inuse.<pid>.lock (the pid) and an empty inuse.<pid>.hold,
// as a process that opens the session does; the returned function
// removes them, as its clean exit does.
func (s *Session) InUse(pid int) (func() error, error) {
	lock := filepath.Join(s.Dir, fmt.Sprintf("inuse.%d.lock", pid))
	hold := filepath.Join(s.Dir, fmt.Sprintf("inuse.%d.hold", pid))
	if err := os.WriteFile(lock, []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		return nil, err
	}
	return func() error {
		os.Remove(hold)
		return os.Remove(lock)
	}, nil
}

// HoldPath is inuse.<pid>.hold of the session.
func (s *Session) HoldPath(pid int) string {
	return filepath.Join(s.Dir, fmt.Sprintf("inuse.%d.hold", pid))
}

// Headless writes what `copilot -p <prompt> --allow-all-tools` writes for
// one prompt whose model runs command once and then answers: start,
// prompt, the tool's turn and the answer's turn, shutdown. With
// killed, it stops as a kill -9 mid tool leaves it: after
// tool.execution_start.
func (s *Session) Headless(prompt, command string, killed bool) error {
	call := ToolRequest{ID: s.uuid('c'), Name: "bash", Command: command}
	steps := []func() error{
		func() error { return s.Start("1.0.102") },
		func() error { return s.UserMessage(prompt) },
		s.SystemMessage,
		func() error { return s.TurnStart(0) },
		s.UsageRecord,
		func() error { return s.AssistantMessage(0, "", call) },
		func() error { return s.ToolStart(0, call) },
	}
	if !killed {
		steps = append(steps,
			func() error { return s.ToolComplete(0, call.ID, true) },
			func() error { return s.TurnEnd(0) },
			func() error { return s.TurnStart(1) },
			s.UsageRecord,
			func() error { return s.AssistantMessage(1, "All done.") },
			func() error { return s.TurnEnd(1) },
			func() error { return s.Shutdown("routine") },
		)
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// CallID returns a fresh tool call id in the CLI's shape for OpenAI
// models ("call_" and 24 hex digits).
func (s *Session) CallID() string {
	s.n++
	return fmt.Sprintf("call_%024x", s.n)
}
