package gemini

import (
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/lib/jsonscan"
)

// The quick decoder reads a message record (a chat's usual line) into a
// rawMsg without encoding/json, in one pass that checks it as JSON and
// skips what is not read (a tool's result) at memory speed. It reads
// only plain lines, as Gemini CLI writes them: every key of record
// written as its field's name, once, no "$" operation nor header field
// beside the message's, each value of its field's type (no null), and
// numbers in a call's args that a float64 holds. Any other line goes to
// the pruned encoding/json decode, so a line folds the same either way
// (FuzzFoldIsApply).

var (
	// recordFields are record's fields, in their JSON names.
	recordFields = jsonscan.Fields{"$rewindTo", "id", "$set", "sessionId", "projectHash", "startTime", "lastUpdated", "kind", "summary", "messages",
		"type", "timestamp", "content", "toolCalls"}
	callFields = jsonscan.Fields{"id", "name", "status", "timestamp", "args"} // the strings first
)

// quickMessage decodes the message record b into m (a new rawMsg) as
// encoding/json and fold would, and reports whether it could.
func quickMessage(b []byte, m *rawMsg) bool {
	hasID := false
	end, ok := recordFields.Object(b, jsonscan.SkipSpace(b, 0), 0, func(f, v int) (int, bool) {
		switch recordFields[f] {
		case "id":
			hasID = true
			return jsonscan.StringInto(&m.ID, b, v)
		case "type":
			return jsonscan.StringInto(&m.Type, b, v)
		case "timestamp":
			return jsonscan.StringInto(&m.Timestamp, b, v)
		case "content":
			if b[v] == 'n' {
				return v, false // null: left to encoding/json
			}
			var sb strings.Builder
			end, ok := appendPartText(&sb, b, v, 1)
			m.Content = partText(sb.String())
			return end, ok
		case "toolCalls":
			m.ToolCalls = []toolCall{}
			return jsonscan.Array(b, v, 1, func(e int) (int, bool) {
				m.ToolCalls = append(m.ToolCalls, toolCall{})
				return quickCall(b, e, &m.ToolCalls[len(m.ToolCalls)-1])
			})
		}
		return v, false // an operation or a header field
	})
	return ok && hasID && jsonscan.SkipSpace(b, end) == len(b)
}

// quickCall decodes a tool call at b[i] (an element of toolCalls); of its
// args it keeps what argsText would say of their map.
func quickCall(b []byte, i int, tc *toolCall) (int, bool) {
	strs := [...]*string{&tc.ID, &tc.Name, &tc.Status, &tc.Timestamp}
	return callFields.Object(b, i, 2, func(f, v int) (int, bool) {
		if f < len(strs) {
			return jsonscan.StringInto(strs[f], b, v)
		}
		end, shown, ok := quickArgs(b, v) // args
		tc.shown = &shown
		return end, ok
	})
}

// quickArgs reads a call's args object at b[i] as a map[string]any (each
// key's last value counts) and returns what argsText says of it. A
// number a float64 cannot hold fails it (encoding/json's error).
func quickArgs(b []byte, i int) (int, string, bool) {
	var last [len(argKeys)]struct {
		s     jsonscan.Str
		isStr bool
	}
	end, ok := jsonscan.Object(b, i, 3, func(k jsonscan.Str, v int) (int, bool) {
		end, ok := anyValue(b, v, 4)
		if !ok {
			return end, false
		}
		key := jsonscan.Text(b, k)
		for j, name := range argKeys {
			if key == name {
				last[j].isStr = b[v] == '"'
				if last[j].isStr {
					last[j].s, _, _ = jsonscan.String(b, v)
				}
			}
		}
		return end, true
	})
	if !ok {
		return end, "", false
	}
	for _, l := range last {
		if l.isStr && l.s.End > l.s.Start {
			return end, oneline.Cut(jsonscan.Text(b, l.s), 200), true
		}
	}
	return end, "", true
}

// anyValue checks the value at b[i] as encoding/json decodes it into an
// interface: JSON whose numbers a float64 holds.
func anyValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '{':
		return jsonscan.Object(b, i, depth, func(_ jsonscan.Str, v int) (int, bool) { return anyValue(b, v, depth+1) })
	case '[':
		return jsonscan.Array(b, i, depth, func(v int) (int, bool) { return anyValue(b, v, depth+1) })
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		end, ok := jsonscan.Number(b, i)
		if !ok {
			return end, false
		}
		_, err := strconv.ParseFloat(string(b[i:end]), 64)
		return end, err == nil
	}
	return jsonscan.Value(b, i, depth)
}
