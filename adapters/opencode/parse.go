package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
)

// ocMessage is what sessiond needs of one OpenCode message: the `data` column
// of the message table (or a legacy storage/message file).
type ocMessage struct {
	ID        string
	SessionID string
	Role      string
	Agent     string
	ModelID   string
	Cwd       string
	Created   time.Time
	// Completed is zero while the message is open. An assistant message
	// left open by a dead process is the "Thinking forever" shape.
	Completed time.Time
	// ErrorName and ErrorMessage are the message's error, if any
	// ("MessageAbortedError", ...).
	ErrorName    string
	ErrorMessage string
}

// messageDrift notes in seen what a message sessiond could not read, or
// read, shows that it does not understand: a field of another JSON type
// (time.created as text), a role other than user and assistant.
func messageDrift(seen *kit.Seen, m ocMessage, err error) {
	var te *json.UnmarshalTypeError
	var jt *jsTimeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		seen.Add(adapters.DriftFieldType, "message."+te.Field+": "+te.Value)
	case errors.As(err, &jt):
		seen.Add(adapters.DriftFieldType, "message.time: "+jt.got)
	case err == nil && m.Role != "user" && m.Role != "assistant":
		seen.Add(adapters.DriftLineType, "message role "+m.Role)
	}
}

// Assistant reports whether the message is the assistant's.
func (m *ocMessage) Assistant() bool { return m.Role == "assistant" }

// Open reports whether an assistant message never completed.
func (m *ocMessage) Open() bool { return m.Assistant() && m.Completed.IsZero() }

type rawMessage struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	Role      string `json:"role"`
	Agent     string `json:"agent"`
	Mode      string `json:"mode"`
	ModelID   string `json:"modelID"`
	Path      *struct {
		Cwd string `json:"cwd"`
	} `json:"path"`
	Time *struct {
		Created   jsTime `json:"created"`
		Completed jsTime `json:"completed"`
	} `json:"time"`
	Error *struct {
		Name string `json:"name"`
		Data *struct {
			Message any `json:"message"`
		} `json:"data"`
	} `json:"error"`
}

// parseMessage parses a message's JSON. It accepts both the table's data
// column (without id and sessionID) and a legacy file (with them). Unknown
// fields are ignored; a wrong type in a field sessiond needs is an error.
func parseMessage(b []byte) (ocMessage, error) {
	var r rawMessage
	if err := json.Unmarshal(b, &r); err != nil {
		return ocMessage{}, fmt.Errorf("parse message: %w", err)
	}
	if r.Role == "" {
		return ocMessage{}, errors.New("parse message: no role")
	}
	m := ocMessage{ID: r.ID, SessionID: r.SessionID, Role: r.Role, Agent: r.Agent, ModelID: r.ModelID}
	if m.Agent == "" {
		m.Agent = r.Mode
	}
	if r.Path != nil {
		m.Cwd = r.Path.Cwd
	}
	if r.Time != nil {
		m.Created = r.Time.Created.t
		m.Completed = r.Time.Completed.t
	}
	if r.Error != nil {
		m.ErrorName = r.Error.Name
		if m.ErrorName == "" {
			m.ErrorName = "error"
		}
		if r.Error.Data != nil {
			if s, ok := r.Error.Data.Message.(string); ok {
				m.ErrorMessage = s
			}
		}
	}
	return m, nil
}

// ocPart is what sessiond needs of one OpenCode part: the `data` column of
// the part table (or a legacy storage/part file).
type ocPart struct {
	ID        string
	MessageID string
	SessionID string
	// Type is "tool", "text", "step-start", ...
	Type string
	// Tool, CallID and Status are set for tool parts. Status is "pending",
	// "running", "completed" or "error".
	Tool   string
	CallID string
	Status string
	Title  string
	// Start is state.time.start (running, completed, error).
	Start time.Time
	End   time.Time
	// ChildSessionID is a task part's subagent session (state.metadata.sessionId).
	ChildSessionID string
	// Interrupted is state.metadata.interrupted, set when OpenCode itself
	// (or a repair) marked an abandoned call.
	Interrupted bool
}

// InFlight reports whether the part is a tool call that has not finished.
func (p *ocPart) InFlight() bool {
	return p.Type == "tool" && (p.Status == "pending" || p.Status == "running")
}

type rawPart struct {
	ID        string `json:"id"`
	MessageID string `json:"messageID"`
	SessionID string `json:"sessionID"`
	Type      string `json:"type"`
	Tool      string `json:"tool"`
	CallID    string `json:"callID"`
	State     *struct {
		Status string `json:"status"`
		Title  any    `json:"title"`
		Time   *struct {
			Start jsTime `json:"start"`
			End   jsTime `json:"end"`
		} `json:"time"`
		Metadata map[string]any `json:"metadata"`
	} `json:"state"`
}

// parsePart parses a part's JSON (the data column or a legacy file).
func parsePart(b []byte) (ocPart, error) {
	var r rawPart
	if err := json.Unmarshal(b, &r); err != nil {
		return ocPart{}, fmt.Errorf("parse part: %w", err)
	}
	if r.Type == "" {
		return ocPart{}, errors.New("parse part: no type")
	}
	p := ocPart{ID: r.ID, MessageID: r.MessageID, SessionID: r.SessionID, Type: r.Type, Tool: r.Tool, CallID: r.CallID}
	if r.State != nil {
		p.Status = r.State.Status
		if s, ok := r.State.Title.(string); ok {
			p.Title = s
		}
		if r.State.Time != nil {
			p.Start = r.State.Time.Start.t
			p.End = r.State.Time.End.t
		}
		if md := r.State.Metadata; md != nil {
			for _, k := range []string{"sessionId", "sessionID"} {
				if s, ok := md[k].(string); ok && s != "" {
					p.ChildSessionID = s
					break
				}
			}
			if b, ok := md["interrupted"].(bool); ok {
				p.Interrupted = b
			}
		}
	}
	if p.Type == "tool" && p.Status == "" {
		return ocPart{}, errors.New("parse part: tool part without state.status")
	}
	return p, nil
}

// Session is a legacy storage/session file.
type legacySession struct {
	ID        string `json:"id"`
	ProjectID string `json:"projectID"`
	ParentID  string `json:"parentID"`
	Directory string `json:"directory"`
	Title     string `json:"title"`
	Version   string `json:"version"`
	Time      struct {
		Created  jsTime `json:"created"`
		Updated  jsTime `json:"updated"`
		Archived jsTime `json:"archived"`
	} `json:"time"`
}

func parseLegacySession(b []byte) (legacySession, error) {
	var s legacySession
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("parse session: %w", err)
	}
	if s.ID == "" {
		return s, errors.New("parse session: no id")
	}
	return s, nil
}

// jsTime is a JavaScript time: milliseconds since the epoch, an integer
// or (rarely) a float. null or absent is the zero time.
type jsTime struct{ t time.Time }

func (j *jsTime) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		j.t = time.Time{}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		got := "string"
		switch b[0] {
		case '{':
			got = "object"
		case '[':
			got = "array"
		case 't', 'f':
			got = "bool"
		}
		return &jsTimeError{got: got, raw: fmt.Sprintf("%.40s", b)}
	}
	j.t = msTime(f)
	return nil
}

// jsTimeError: a time that is not a number of milliseconds.
type jsTimeError struct{ got, raw string }

func (e *jsTimeError) Error() string { return "time: want milliseconds, got " + e.raw }

// msTime converts JavaScript milliseconds; values outside any sane range
// (negative, NaN, beyond year 9999) are the zero time.
func msTime(f float64) time.Time {
	const maxMs = 253402300799999 // 9999-12-31
	if math.IsNaN(f) || f <= 0 || f > maxMs {
		return time.Time{}
	}
	return time.UnixMilli(int64(f))
}

// msInt converts an integer column in milliseconds.
func msInt(v int64) time.Time { return msTime(float64(v)) }
