package copilot

import (
	"encoding/json"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/hookjson"
	"github.com/sessiond/sessiond/session"
)

// Copilot CLI's hooks: sessionctl installs them into settings.json of
// its home ("hooks", the user-level hooks, as in .github/hooks/*.json)
// under their Claude Code names, for which 1.0.102 sends Claude Code's
// payloads ({hook_event_name, session_id, cwd, tool_name, tool_input},
// the tool names Claude's: "Bash"). Under its own names (preToolUse, …)
// it sends {sessionId, toolName, toolInput, …} with no event name, which
// is refused; PermissionRequest comes in its own shape whatever its key,
// with the event in hookName ({hookName: "permissionRequest", sessionId,
// toolName, toolInput}), which is read. Copilot runs a hook as a child of the copilot that holds
// the session (docs/agents/copilot.md#hooks).
//
// Events are Claude Code's, the names under which Copilot sends Claude's
// payloads, and Copilot's own as they are read (PascalCase); another is
// counted as drift, and taken as saying nothing of the activity.
var (
	hooks = hookjson.Agent{QuestionTools: []string{"ask_user", "AskUserQuestion"}, Events: []string{
		"SessionStart", "SessionEnd", "UserPromptSubmit", "UserPromptSubmitted", "PreToolUse", "PostToolUse",
		"PostToolUseFailure", "PermissionRequest", "Notification", "Stop", "AgentStop", "SubagentStart",
		"SubagentStop", "PreCompact", "ErrorOccurred",
	}}

	_ adapters.HookReader = (*Adapter)(nil)
	_ adapters.ToolMarker = (*Adapter)(nil)
)

// ToolSessionVar implements adapters.ToolMarker: every tool Copilot runs
// carries its session's id in COPILOT_AGENT_SESSION_ID, and one process
// can hold several sessions (the TUI's tabs).
func (a *Adapter) ToolSessionVar() string { return "COPILOT_AGENT_SESSION_ID" }

// native is a payload in Copilot's own shape.
type native struct {
	HookName  string          `json:"hookName"`
	SessionID string          `json:"sessionId"`
	Cwd       string          `json:"cwd"`
	ToolName  string          `json:"toolName"`
	ToolInput json.RawMessage `json:"toolInput"`
}

// ReadHook reads one payload of `sessionctl hook copilot`. Hooks say
// busy and idle sooner than a pass reads events.jsonl; a pending
// permission is there already, with the command (permission.requested),
// and no hook says one:
//   - PermissionRequest says busy, never waiting: Copilot runs it before
//     its rules decide, for calls it then runs unasked too (an `echo` in
//     -p mode, seen on 1.0.102);
//   - a Notification says nothing of the activity: none fired for a
//     permission prompt on 1.0.102, and one that did would name no
//     command (Claude Code's permission_prompt carries only a message),
//     where the events name it;
//   - a question (ask_user) asked is waiting for the question, its
//     message the question.
func (a *Adapter) ReadHook(payload []byte) (adapters.Hook, error) {
	var head struct {
		Event     string          `json:"hook_event_name"`
		ToolInput json.RawMessage `json:"tool_input"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		return adapters.Hook{}, err
	}
	if head.Event == "" {
		var n native
		if json.Unmarshal(payload, &n) == nil && n.HookName != "" {
			payload, _ = json.Marshal(map[string]any{"hook_event_name": upperFirst(n.HookName), "session_id": n.SessionID,
				"cwd": n.Cwd, "tool_name": n.ToolName, "tool_input": n.ToolInput})
			head.ToolInput = n.ToolInput
		}
	}
	h, err := hooks.Read(payload)
	if err != nil {
		return h, err
	}
	if !hooks.Known(h.Event) {
		a.hookDrift.Note("hook:"+h.UpstreamID, "hooked session", "", adapters.DriftHookEvent, h.Event)
		h.Activity, h.WaitingFor = "", nil
		return h, nil
	}
	switch {
	case h.Event == "PermissionRequest":
		h.Activity, h.WaitingFor = session.ActivityBusy, nil
	case h.Event == "Notification":
		h.Activity, h.WaitingFor = "", nil
	case h.WaitingFor != nil && h.WaitingFor.Kind == session.WaitingQuestion && h.WaitingFor.Question == "":
		// ask_user's input is {message, requestedSchema}.
		var in struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(head.ToolInput, &in)
		h.WaitingFor.Question = hookjson.Cut(in.Message)
	}
	return h, nil
}

// upperFirst is a camelCase event name in Claude Code's PascalCase.
func upperFirst(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
