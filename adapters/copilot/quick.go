package copilot

import (
	"encoding/json"

	"github.com/sessiond/sessiond/lib/jsonscan"
)

// The quick decoder reads an event line into an event without
// encoding/json, in one pass that checks it as JSON and skips what the
// state does not read (a reply's text, a tool's result) at memory speed.
// It reads only plain lines, as Copilot CLI writes them: every key the
// event reads written as its field's name, once, of its field's type (no
// null but in a raw value). Any other line takes the pruned
// encoding/json decode, so a line moves the state the same either way
// (FuzzApplyIsWhole). A content is kept only for a user.message, the one
// event the state reads it from.

var (
	eventFields = jsonscan.Fields{"type", "timestamp", "agentId", "data"} // the strings first
	dataFields  = jsonscan.Fields{"sessionId", "copilotVersion", "startTime", "context", "content", "toolRequests",
		"parentToolCallId", "toolCallId", "toolName", "arguments", "requestId", "permissionRequest", "reason", "shutdownType"}
	contextFields = jsonscan.Fields{"cwd"}
)

// quickEvent decodes the line b into e (a new event) as encoding/json
// would, and reports whether it could.
func quickEvent(b []byte, e *event) bool {
	var content []byte
	strs := [...]*string{&e.Type, &e.Timestamp, &e.AgentID}
	end, ok := eventFields.Object(b, jsonscan.SkipSpace(b, 0), 0, func(f, v int) (int, bool) {
		if f < len(strs) {
			return jsonscan.StringInto(strs[f], b, v)
		}
		return quickData(b, v, e, &content) // data
	})
	if !ok || jsonscan.SkipSpace(b, end) != len(b) {
		return false
	}
	if e.Type == "user.message" && content != nil {
		e.Data.Content = append(json.RawMessage(nil), content...)
	}
	return true
}

// quickData decodes the event's data at b[i]; content is where its
// content lies.
func quickData(b []byte, i int, e *event, content *[]byte) (int, bool) {
	d := &e.Data
	strs := [...]*string{&d.SessionID, &d.CopilotVersion, &d.StartTime, nil, nil, nil,
		&d.ParentToolCallID, &d.ToolCallID, &d.ToolName, nil, &d.RequestID, nil, &d.Reason, &d.ShutdownType}
	return dataFields.Object(b, i, 1, func(f, v int) (int, bool) {
		if strs[f] != nil {
			return jsonscan.StringInto(strs[f], b, v)
		}
		switch dataFields[f] {
		case "context":
			return contextFields.Object(b, v, 2, func(f, v int) (int, bool) {
				return jsonscan.StringInto(&d.Context.Cwd, b, v)
			})
		case "toolRequests":
			d.ToolRequests = []json.RawMessage{}
			return jsonscan.Array(b, v, 2, func(e int) (int, bool) {
				end, ok := jsonscan.Value(b, e, 3)
				d.ToolRequests = append(d.ToolRequests, append(json.RawMessage(nil), b[e:end]...))
				return end, ok
			})
		}
		// A raw value, as written (null too, as encoding/json keeps it).
		end, ok := jsonscan.Value(b, v, 2)
		if !ok {
			return end, false
		}
		switch dataFields[f] {
		case "content":
			*content = b[v:end]
		case "arguments":
			d.Arguments = append(json.RawMessage(nil), b[v:end]...)
		case "permissionRequest":
			d.PermissionRequest = append(json.RawMessage(nil), b[v:end]...)
		}
		return end, true
	})
}
