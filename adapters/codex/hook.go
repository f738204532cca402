package codex

import (
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/hookjson"
)

// Codex's hooks (`$CODEX_HOME/hooks.json`) take Claude Code's shape. They
// are the only sign of a pending approval: the rollout's tail then looks
// exactly like a running tool (docs/agents/codex.md). Codex runs hooks
// from the process that holds the thread (the app-server daemon for the
// TUI), and only once the user trusted them.
//
// Events are those 0.169.0 knows (read from its binary); another is
// counted as drift, and taken as saying nothing of the activity.
var hooks = hookjson.Agent{Events: []string{"SessionStart", "UserPromptSubmit", "PreToolUse", "PermissionRequest",
	"PostToolUse", "Stop", "Interrupt", "SessionEnd", "PreCompact", "PostCompact", "SubagentStart", "SubagentStop", "Notification"}}

// ToolSessionVar implements adapters.ToolMarker: every tool Codex runs
// carries its session's id in CODEX_THREAD_ID, and its hook processes
// carry none (both seen in /proc/<pid>/environ of Codex 0.169.0).
func (a *Adapter) ToolSessionVar() string { return "CODEX_THREAD_ID" }

// ReadHook reads one payload of `sessionctl hook codex`.
// An event sessiond does not know is counted as drift (health).
func (a *Adapter) ReadHook(payload []byte) (adapters.Hook, error) {
	h, err := hooks.Read(payload)
	if err == nil && !hooks.Known(h.Event) {
		a.hookDrift.Note("hook:"+h.UpstreamID, "hooked session", "", adapters.DriftHookEvent, h.Event)
	}
	return h, err
}
