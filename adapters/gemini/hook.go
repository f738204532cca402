package gemini

import (
	"encoding/json"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/hookjson"
	"github.com/sessiond/sessiond/session"
)

// Gemini CLI's hooks (settings.json's "hooks" in its data folder) send
// Claude Code's base fields, {session_id, transcript_path, cwd,
// hook_event_name, timestamp}, with events of Gemini's own names
// (docs/agents/gemini.md#hooks). They are the only sign of a pending
// approval: 0.61.0 writes nothing to the chat before a call finished. It
// runs them as children of the gemini that owns the session, through
// `bash -c`, with GEMINI_SESSION_ID; its tools carry no session id, so
// there is no ToolMarker.
//
// Events are the 11 of 0.61.0 (its HookEventName, read from its bundle);
// another is counted as drift, and taken as saying nothing of the
// activity.
var (
	hooks = hookjson.Agent{Events: []string{"SessionStart", "SessionEnd", "BeforeAgent", "AfterAgent", "BeforeModel",
		"AfterModel", "BeforeToolSelection", "BeforeTool", "AfterTool", "PreCompress", "Notification"}}

	_ adapters.HookReader = (*Adapter)(nil)
)

// geminiPayload is what sessiond reads of a hook beyond the base fields:
// a Notification's type and details (for ToolPermission, the call's
// confirmation: its title and the command, file, URLs or MCP tool).
type geminiPayload struct {
	NotificationType string          `json:"notification_type"`
	Message          string          `json:"message"`
	Details          json.RawMessage `json:"details"`
}

// ReadHook reads one payload of `sessionctl hook gemini`:
//   - BeforeAgent (a prompt taken), BeforeTool, AfterTool, BeforeModel,
//     AfterModel, BeforeToolSelection, PreCompress: busy;
//   - Notification of type ToolPermission: waiting for the permission,
//     with the confirmation's title as the tool and its command (or
//     file, URL, MCP tool) as the input;
//   - AfterAgent: the turn ended, idle;
//   - SessionStart, SessionEnd, other notifications, an event sessiond
//     does not know (counted as drift): nothing of the activity.
func (a *Adapter) ReadHook(payload []byte) (adapters.Hook, error) {
	h, err := hooks.Read(payload)
	if err != nil {
		return h, err
	}
	if !hooks.Known(h.Event) {
		a.hookDrift.Note("hook:"+h.UpstreamID, "hooked session", "", adapters.DriftHookEvent, h.Event)
	}
	var p geminiPayload
	_ = json.Unmarshal(payload, &p) // hooks.Read parsed it as an object
	h.Activity, h.WaitingFor = "", nil
	switch h.Event {
	case "BeforeAgent", "BeforeTool", "AfterTool", "BeforeModel", "AfterModel", "BeforeToolSelection", "PreCompress":
		h.Activity = session.ActivityBusy
	case "AfterAgent":
		h.Activity, h.WaitingFor = session.ActivityIdle, &session.WaitingFor{Kind: session.WaitingInput}
	case "Notification":
		if p.NotificationType == "ToolPermission" {
			h.Activity, h.WaitingFor = session.ActivityWaiting, permission(p)
		}
	}
	return h, nil
}

// permission is what a ToolPermission notification waits for. Its
// details are the call's confirmation (0.61.0's toSerializableDetails):
// type exec {title, command, rootCommand} (only the shell tool,
// run_shell_command, asks so), edit {title, fileName, filePath, …}, mcp
// {title, serverName, toolName}, info {title, prompt, urls}. The tool is
// the shell's or MCP's name, else the confirmation's title ("Confirm
// Edit: …").
func permission(p geminiPayload) *session.WaitingFor {
	var d struct {
		Type     string   `json:"type"`
		Title    string   `json:"title"`
		Command  string   `json:"command"`
		FilePath string   `json:"filePath"`
		FileName string   `json:"fileName"`
		ToolName string   `json:"toolName"`
		Server   string   `json:"serverName"`
		URLs     []string `json:"urls"`
		Prompt   string   `json:"prompt"`
	}
	_ = json.Unmarshal(p.Details, &d)
	tool, input := d.Title, ""
	switch {
	case d.Type == "exec":
		tool, input = shellTool, d.Command
	case d.Type == "mcp" && d.ToolName != "":
		tool, input = d.ToolName, d.Server
	case d.FilePath != "":
		input = d.FilePath
	case d.FileName != "":
		input = d.FileName
	case len(d.URLs) > 0:
		input = d.URLs[0]
	case d.Prompt != "":
		input = d.Prompt
	}
	if tool == "" && input == "" {
		// An unknown confirmation: its message says what it is.
		return &session.WaitingFor{Kind: session.WaitingPermission, Detail: hookjson.Cut(p.Message)}
	}
	return &session.WaitingFor{Kind: session.WaitingPermission, Tool: hookjson.Cut(tool), Input: hookjson.Cut(input)}
}

// shellTool is Gemini CLI's shell tool.
const shellTool = "run_shell_command"
