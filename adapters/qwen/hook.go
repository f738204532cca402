package qwen

import (
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/hookjson"
)

// Qwen Code's hooks (settings.json's "hooks" in its home) take Claude
// Code's shape: {session_id, transcript_path, cwd, hook_event_name,
// permission_mode, …}. They are the only sign of a permission prompt: the
// chat then looks exactly like a running tool (docs/agents/qwen.md). Qwen
// runs them as children of the qwen that owns the session, each with the
// session's QWEN_CODE_SESSION_ID, as its tools (seen in
// /proc/<pid>/environ of 0.24.4).
//
// Events are those 0.24.4 knows (its HookEventName); another is counted
// as drift, and taken as saying nothing of the activity.
var (
	hooks = hookjson.Agent{QuestionTools: []string{"ask_user_question"}, Events: []string{"PreToolUse", "PostToolUse",
		"PostToolUseFailure", "PostToolBatch", "Notification", "UserPromptSubmit", "UserPromptExpansion", "SessionStart",
		"SessionEnd", "SessionDelete", "Stop", "StopFailure", "SubagentStart", "SubagentStop", "PreCompact", "PostCompact",
		"PermissionRequest", "PermissionDenied", "InstructionsLoaded", "MessageDisplay", "TodoCreated", "TodoCompleted"}}

	_ adapters.HookReader = (*Adapter)(nil)
	_ adapters.ToolMarker = (*Adapter)(nil)
)

// ToolSessionVar implements adapters.ToolMarker.
func (a *Adapter) ToolSessionVar() string { return sessionVar }

// ReadHook reads one payload of `sessionctl hook qwen`. A Notification
// says nothing of the activity: Qwen sends its permission_prompt right
// after the PermissionRequest, without the command, and its idle_prompt
// after the Stop (both seen on 0.24.4).
func (a *Adapter) ReadHook(payload []byte) (adapters.Hook, error) {
	h, err := hooks.Read(payload)
	if err == nil && !hooks.Known(h.Event) {
		a.hookDrift.Note("hook:"+h.UpstreamID, "hooked session", "", adapters.DriftHookEvent, h.Event)
	}
	if err == nil && h.Event == "Notification" {
		h.Activity, h.WaitingFor = "", nil
	}
	return h, err
}
