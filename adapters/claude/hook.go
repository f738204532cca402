package claude

import (
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/hookjson"
)

// Claude Code's command hooks (settings.json "hooks"): AskUserQuestion's
// call is a question put to the user, shown as the call starts. Events
// are the 33 of 2.1.328 (read from its binary) and 2.1.332's
// PreSkillShellCommand; another is counted as drift, and taken as saying
// nothing of the activity.
var hooks = hookjson.Agent{QuestionTools: []string{"AskUserQuestion"}, Events: []string{
	"PreToolUse", "PostToolUse", "PostToolUseFailure", "PostToolBatch", "Notification", "UserPromptSubmit",
	"UserPromptExpansion", "SessionStart", "SessionEnd", "Stop", "StopFailure", "SubagentStart", "SubagentStop",
	"PreCompact", "PostCompact", "PreModelSwitch", "PostModelSwitch", "PermissionRequest", "PermissionDenied",
	"Setup", "TeammateIdle", "TaskCreated", "TaskCompleted", "Elicitation", "ElicitationResult", "ConfigChange",
	"WorktreeCreate", "WorktreeRemove", "InstructionsLoaded", "CwdChanged", "FileChanged", "DirectoryAdded",
	"MessageDisplay", "PreSkillShellCommand",
}}

// ReadHook reads one payload of `sessionctl hook claude`; an event
// sessiond does not know is counted as drift (health).
func (a *Adapter) ReadHook(payload []byte) (adapters.Hook, error) {
	h, err := hooks.Read(payload)
	if err == nil && !hooks.Known(h.Event) {
		a.hookDrift.Note("hook:"+h.UpstreamID, "hooked session", "", adapters.DriftHookEvent, h.Event)
	}
	return h, err
}
