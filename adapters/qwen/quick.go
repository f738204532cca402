package qwen

import (
	"encoding/json"

	"github.com/sessiond/sessiond/lib/jsonscan"
)

// The quick decoder reads a chat line into a record without
// encoding/json, in one pass that checks it as JSON and skips what the
// record does not hold (a tool's output) at memory speed. It reads only
// plain lines, as Qwen Code writes them: every key the record reads
// written as its field's name, once, with a value of the field's type
// (no null). Any other line (a key in another case or escaped, a
// duplicate, a null, a wrong type, not JSON) it leaves to encoding/json,
// so a line decodes to the same record either way (FuzzApplyIsWhole).

// The fields of record and of what it holds, in their JSON names.
var (
	recordFields   = jsonscan.Fields{"sessionId", "timestamp", "type", "subtype", "cwd", "version", "message", "toolCallResult"}
	messageFields  = jsonscan.Fields{"role", "parts"}
	partFields     = jsonscan.Fields{"text", "thought", "functionCall", "functionResponse"}
	callFields     = jsonscan.Fields{"id", "name", "args"}
	responseFields = jsonscan.Fields{"id", "name"}
	resultFields   = jsonscan.Fields{"callId", "status"}
)

// quickRecord decodes b into r (a new record) as encoding/json would,
// and reports whether it could; if not, r is to be dropped.
func quickRecord(b []byte, r *record) bool {
	end, ok := recordFields.Object(b, jsonscan.SkipSpace(b, 0), 0, func(f, v int) (int, bool) {
		switch recordFields[f] {
		case "message":
			r.Message = new(message)
			return quickMessage(b, v, r.Message)
		case "toolCallResult":
			r.ToolCallResult = new(toolCallResult)
			return quickStrings(b, v, 1, resultFields, &r.ToolCallResult.CallID, &r.ToolCallResult.Status)
		}
		dst := [...]*string{&r.SessionID, &r.Timestamp, &r.Type, &r.Subtype, &r.Cwd, &r.Version}[f]
		return jsonscan.StringInto(dst, b, v)
	})
	return ok && jsonscan.SkipSpace(b, end) == len(b)
}

// quickStrings decodes the object at b[i], depth containers down, whose
// fields are all strings, into dst (in the order of fields).
func quickStrings(b []byte, i, depth int, fields jsonscan.Fields, dst ...*string) (int, bool) {
	return fields.Object(b, i, depth, func(f, v int) (int, bool) {
		return jsonscan.StringInto(dst[f], b, v)
	})
}

// quickMessage decodes the message at b[i] (a member of the record).
func quickMessage(b []byte, i int, m *message) (int, bool) {
	return messageFields.Object(b, i, 1, func(f, v int) (int, bool) {
		if messageFields[f] == "role" {
			return jsonscan.StringInto(&m.Role, b, v)
		}
		m.Parts = []part{}
		return jsonscan.Array(b, v, 2, func(e int) (int, bool) {
			m.Parts = append(m.Parts, part{})
			return quickPart(b, e, &m.Parts[len(m.Parts)-1])
		})
	})
}

// quickPart decodes a part at b[i] (an element of a message's parts).
func quickPart(b []byte, i int, p *part) (int, bool) {
	return partFields.Object(b, i, 3, func(f, v int) (int, bool) {
		switch partFields[f] {
		case "text":
			return jsonscan.StringInto(&p.Text, b, v)
		case "thought":
			if end, ok := jsonscan.Literal(b, v, "true"); ok {
				p.Thought = true
				return end, true
			}
			return jsonscan.Literal(b, v, "false")
		case "functionCall":
			p.FunctionCall = new(functionCall)
			return quickCall(b, v, p.FunctionCall)
		}
		p.FunctionResponse = new(functionResponse)
		return quickStrings(b, v, 4, responseFields, &p.FunctionResponse.ID, &p.FunctionResponse.Name)
	})
}

// quickCall decodes a function call at b[i] (a member of a part); its
// args are kept raw, as written.
func quickCall(b []byte, i int, c *functionCall) (int, bool) {
	return callFields.Object(b, i, 4, func(f, v int) (int, bool) {
		switch callFields[f] {
		case "id":
			return jsonscan.StringInto(&c.ID, b, v)
		case "name":
			return jsonscan.StringInto(&c.Name, b, v)
		}
		if b[v] == 'n' {
			return v, false // null: left to encoding/json
		}
		end, ok := jsonscan.Value(b, v, 5)
		c.Args = append(json.RawMessage(nil), b[v:end]...)
		return end, ok
	})
}
