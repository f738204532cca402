package transcript

// This file keeps the transcript line parser as it was before the one-pass
// scanner (line.go): encoding/json decoding the line, then the message, then
// its content, each from the start. It is the reference the differential
// test and fuzz target (line_diff_test.go) hold the scanner to, and the
// baseline of BenchmarkParseLine. Do not "improve" it: its behaviour is the
// specification.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// refRawLine is the decoding shape of a transcript line. Fields not listed are
// skipped by encoding/json without being copied.
type refRawLine struct {
	Type             string          `json:"type"`
	UUID             string          `json:"uuid"`
	SessionID        string          `json:"sessionId"`
	Cwd              string          `json:"cwd"`
	Version          string          `json:"version"`
	GitBranch        string          `json:"gitBranch"`
	Timestamp        string          `json:"timestamp"`
	IsSidechain      bool            `json:"isSidechain"`
	IsMeta           bool            `json:"isMeta"`
	IsCompactSummary bool            `json:"isCompactSummary"`
	Message          json.RawMessage `json:"message"`
	CustomTitle      string          `json:"customTitle"`
}

type refRawMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	StopReason *string         `json:"stop_reason"`
}

type refRawBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Text      string          `json:"text"`
}

// refParseLine parses one transcript line (without its newline). A line is
// normally one JSON object. Two records glued together (a write torn by a
// crash, then the next record) are split and both returned, with an error
// wrapping errCorruptLine when some bytes could not be recovered. Unknown
// types come back as kindOther. refParseLine never panics on any input.
func refParseLine(b []byte) ([]Line, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	var r refRawLine
	if err := json.Unmarshal(b, &r); err == nil {
		return []Line{refDigest(&r)}, nil
	} else if b[0] != '{' {
		return nil, fmt.Errorf("%w: %v", errCorruptLine, err)
	}
	return refParseGlued(b)
}

// refParseGlued recovers the records of a line that is not one JSON object:
// it decodes one value at a time and, after a value that fails, resumes at
// the next place that looks like the start of a record.
func refParseGlued(b []byte) ([]Line, error) {
	var out []Line
	lost := 0
	p := 0
	for attempts := 0; p < len(b) && attempts < maxGlued; attempts++ {
		dec := json.NewDecoder(bytes.NewReader(b[p:]))
		var r refRawLine
		if err := dec.Decode(&r); err == nil {
			out = append(out, refDigest(&r))
			p += int(dec.InputOffset())
			for p < len(b) && isSpace(b[p]) {
				p++
			}
			continue
		}
		next := refNextRecordStart(b, p+1)
		if next < 0 {
			lost += len(b) - p
			p = len(b)
			break
		}
		lost += next - p
		p = next
	}
	if p < len(b) {
		lost += len(b) - p
	}
	if lost > 0 {
		return out, fmt.Errorf("%w: %d of %d bytes unreadable, %d records recovered", errCorruptLine, lost, len(b), len(out))
	}
	return out, nil
}

// refRecordStarts are the ways a transcript record's JSON starts: Claude Code
// writes parentUuid first on conversation lines and type first on others.
var refRecordStarts = [][]byte{[]byte(`{"parentUuid"`), []byte(`{"type"`), []byte(`{"uuid"`), []byte(`{"sessionId"`), []byte(`{"leafUuid"`)}

// refNextRecordStart returns the index at or after from where a record seems
// to start: a '{' right after a '}' (two records glued), or one of the
// usual record openings. -1 when there is none.
func refNextRecordStart(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '{')
		if j < 0 {
			return -1
		}
		i += j
		if i > 0 && b[i-1] == '}' {
			return i
		}
		for _, s := range refRecordStarts {
			if bytes.HasPrefix(b[i:], s) {
				return i
			}
		}
	}
	return -1
}

// refDigest turns a decoded line into a line.
func refDigest(r *refRawLine) Line {
	l := Line{
		Type:      r.Type,
		UUID:      r.UUID,
		SessionID: r.SessionID,
		Cwd:       r.Cwd,
		Version:   r.Version,
		GitBranch: r.GitBranch,
		Sidechain: r.IsSidechain,
	}
	if r.Timestamp != "" {
		if t, err := time.Parse(time.RFC3339Nano, r.Timestamp); err == nil {
			l.Time = t
		}
	}
	switch r.Type {
	case "custom-title":
		l.Title = refShorten(r.CustomTitle, TitleMax)
	case "user":
		refDigestUser(&l, r)
	case "assistant":
		refDigestAssistant(&l, r)
	}
	return l
}

func refDigestUser(l *Line, r *refRawLine) {
	l.Kind = KindUserOther
	var m refRawMessage
	if len(r.Message) == 0 || json.Unmarshal(r.Message, &m) != nil {
		return
	}
	text, blocks := refContent(m.Content)
	images := false
	for _, b := range blocks {
		switch b.Type {
		case "tool_result":
			if b.ToolUseID != "" {
				l.ToolResults = append(l.ToolResults, b.ToolUseID)
			}
		case "text":
			if text == "" {
				text = b.Text
			} else {
				text += "\n" + b.Text
			}
		case "image":
			images = true
		}
	}
	switch {
	case len(l.ToolResults) > 0:
		l.Kind = KindToolResult
	case r.IsMeta || r.IsCompactSummary:
		l.Kind = KindUserOther
	default:
		t := strings.TrimSpace(text)
		switch {
		case strings.HasPrefix(t, "[Request interrupted by user"):
			l.Kind = KindInterrupt
		case t == "" && images:
			l.Kind = KindPrompt
			l.Prompt = "[image]"
		case t == "" || refNoReplyExpected(t):
			l.Kind = KindUserOther
		default:
			l.Kind = KindPrompt
			l.Prompt = t
		}
	}
}

// refNoReplyPrefixes open user lines that Claude Code writes for local slash
// commands and shell-mode input: the model is not asked to reply to them.
var refNoReplyPrefixes = []string{"<command-name>", "<command-message>", "<command-args>", "<local-command-", "<bash-input>", "<bash-stdout>", "<bash-stderr>", "Caveat: "}

func refNoReplyExpected(t string) bool {
	for _, p := range refNoReplyPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func refDigestAssistant(l *Line, r *refRawLine) {
	l.Kind = KindAssistant
	var m refRawMessage
	if len(r.Message) == 0 || json.Unmarshal(r.Message, &m) != nil {
		return
	}
	if m.StopReason != nil {
		l.StopReason = *m.StopReason
	}
	_, blocks := refContent(m.Content)
	for _, b := range blocks {
		if b.Type == "tool_use" && b.ID != "" {
			l.ToolUses = append(l.ToolUses, ToolCall{ID: b.ID, Name: b.Name, Input: refSummarizeInput(b.Input), At: l.Time})
		}
	}
}

// refContent decodes message.content, which is a string or a list of blocks.
func refContent(raw json.RawMessage) (string, []refRawBlock) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s, nil
		}
	case '[':
		var bs []refRawBlock
		if json.Unmarshal(raw, &bs) == nil {
			return "", bs
		}
	}
	return "", nil
}

// refInputKeys are the input fields that say best what a tool call does, in
// order of preference.
var refInputKeys = []string{"command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "notebook_path"}

// refSummarizeInput makes a one-line summary of a tool call's input.
func refSummarizeInput(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range refInputKeys {
			v, ok := m[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(v, &s) == nil && s != "" {
				return refShorten(s, InputMax)
			}
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return refShorten(buf.String(), InputMax)
	}
	return ""
}

// refShorten makes s one line of at most max runes: whitespace runs become a
// space, control characters are dropped, and a cut is marked with "…".
func refShorten(s string, max int) string {
	if max <= 0 {
		return ""
	}
	out := make([]rune, 0, min(len(s), max+1))
	space := false
	for _, r := range s {
		switch {
		case unicode.IsSpace(r):
			space = len(out) > 0
			continue
		case unicode.IsControl(r), r == utf8.RuneError:
			continue
		}
		if space {
			out = append(out, ' ')
			space = false
		}
		out = append(out, r)
		if len(out) > max {
			break
		}
	}
	if len(out) > max {
		out = append(out[:max-1], '…')
	}
	return string(out)
}
