package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// LineKind is what a transcript line means for the conversation's state.
type LineKind int

// Line kinds. Everything Claude Code writes that is not a conversation turn
// (queue-operation, attachment, atis-latch, api-request-*, tools-used,
// last-prompt, cost-state, summary, system, file-history-snapshot, and any
// type not known yet) is KindOther: read for its metadata, never for state.
const (
	KindOther LineKind = iota
	// KindPrompt is a real user prompt: it starts a turn and expects a reply.
	KindPrompt
	// KindToolResult is a user line carrying tool_result blocks.
	KindToolResult
	// KindUserOther is a user line that expects no reply (meta lines, local
	// slash-command echoes, shell-mode input, compaction summaries).
	KindUserOther
	// KindInterrupt is the "[Request interrupted by user]" marker: the turn
	// ended on the user's request.
	KindInterrupt
	// KindAssistant is an assistant line (text, thinking or tool_use blocks).
	KindAssistant
)

// Line is what sessiond keeps of one transcript line. The big parts (tool
// outputs, file contents, thinking) are skipped by the decoder and never
// copied.
type Line struct {
	Type      string
	UUID      string
	SessionID string
	Cwd       string
	Version   string
	GitBranch string
	Time      time.Time
	Sidechain bool
	Kind      LineKind
	// Prompt is the text of a KindPrompt line.
	Prompt string
	// ToolUses are the tool calls an assistant line starts.
	ToolUses []ToolCall
	// ToolResults are the tool_use ids a user line answers.
	ToolResults []string
	// StopReason of an assistant message, "" when the line has none (Claude
	// writes one line per content block, most with a null stop reason).
	StopReason string
	// Title is set by custom-title lines (a title the user chose).
	Title string
}

// ToolCall is a tool call started by an assistant line.
type ToolCall struct {
	ID   string
	Name string
	// Input is a short, one-line summary of the call's input (the command
	// of a Bash call, the path of a file tool), never the whole input.
	Input string
	At    time.Time
}

// rawLine is the decoding shape of a transcript line. Fields not listed are
// skipped by encoding/json without being copied.
type rawLine struct {
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

type rawMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	StopReason *string         `json:"stop_reason"`
}

type rawBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Text      string          `json:"text"`
}

// ErrCorruptLine is wrapped by ParseLine's errors: the line (or a part of
// it) is not a JSON object.
var ErrCorruptLine = errors.New("corrupt transcript line")

// maxGlued bounds how many records ParseLine recovers from one line, and so
// the work a hostile line can cause.
const maxGlued = 8

// ParseLine parses one transcript line (without its newline). A line is
// normally one JSON object. Two records glued together (a write torn by a
// crash, then the next record) are split and both returned, with an error
// wrapping ErrCorruptLine when some bytes could not be recovered. Unknown
// types come back as KindOther. ParseLine never panics on any input.
func ParseLine(b []byte) ([]Line, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	var r rawLine
	if err := json.Unmarshal(b, &r); err == nil {
		return []Line{digest(&r)}, nil
	} else if b[0] != '{' {
		return nil, fmt.Errorf("%w: %v", ErrCorruptLine, err)
	}
	return parseGlued(b)
}

// parseGlued recovers the records of a line that is not one JSON object:
// it decodes one value at a time and, after a value that fails, resumes at
// the next place that looks like the start of a record.
func parseGlued(b []byte) ([]Line, error) {
	var out []Line
	lost := 0
	p := 0
	for attempts := 0; p < len(b) && attempts < maxGlued; attempts++ {
		dec := json.NewDecoder(bytes.NewReader(b[p:]))
		var r rawLine
		if err := dec.Decode(&r); err == nil {
			out = append(out, digest(&r))
			p += int(dec.InputOffset())
			for p < len(b) && isSpace(b[p]) {
				p++
			}
			continue
		}
		next := nextRecordStart(b, p+1)
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
		return out, fmt.Errorf("%w: %d of %d bytes unreadable, %d records recovered", ErrCorruptLine, lost, len(b), len(out))
	}
	return out, nil
}

// recordStarts are the ways a transcript record's JSON starts: Claude Code
// writes parentUuid first on conversation lines and type first on others.
var recordStarts = [][]byte{[]byte(`{"parentUuid"`), []byte(`{"type"`), []byte(`{"uuid"`), []byte(`{"sessionId"`), []byte(`{"leafUuid"`)}

// nextRecordStart returns the index at or after from where a record seems
// to start: a '{' right after a '}' (two records glued), or one of the
// usual record openings. -1 when there is none.
func nextRecordStart(b []byte, from int) int {
	for i := from; i < len(b); i++ {
		j := bytes.IndexByte(b[i:], '{')
		if j < 0 {
			return -1
		}
		i += j
		if i > 0 && b[i-1] == '}' {
			return i
		}
		for _, s := range recordStarts {
			if bytes.HasPrefix(b[i:], s) {
				return i
			}
		}
	}
	return -1
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// digest turns a decoded line into a Line.
func digest(r *rawLine) Line {
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
		l.Title = Shorten(r.CustomTitle, titleMax)
	case "user":
		digestUser(&l, r)
	case "assistant":
		digestAssistant(&l, r)
	}
	return l
}

func digestUser(l *Line, r *rawLine) {
	l.Kind = KindUserOther
	var m rawMessage
	if len(r.Message) == 0 || json.Unmarshal(r.Message, &m) != nil {
		return
	}
	text, blocks := content(m.Content)
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
		case t == "" || noReplyExpected(t):
			l.Kind = KindUserOther
		default:
			l.Kind = KindPrompt
			l.Prompt = t
		}
	}
}

// noReplyPrefixes open user lines that Claude Code writes for local slash
// commands and shell-mode input: the model is not asked to reply to them.
var noReplyPrefixes = []string{"<command-name>", "<command-message>", "<command-args>", "<local-command-", "<bash-input>", "<bash-stdout>", "<bash-stderr>", "Caveat: "}

func noReplyExpected(t string) bool {
	for _, p := range noReplyPrefixes {
		if strings.HasPrefix(t, p) {
			return true
		}
	}
	return false
}

func digestAssistant(l *Line, r *rawLine) {
	l.Kind = KindAssistant
	var m rawMessage
	if len(r.Message) == 0 || json.Unmarshal(r.Message, &m) != nil {
		return
	}
	if m.StopReason != nil {
		l.StopReason = *m.StopReason
	}
	_, blocks := content(m.Content)
	for _, b := range blocks {
		if b.Type == "tool_use" && b.ID != "" {
			l.ToolUses = append(l.ToolUses, ToolCall{ID: b.ID, Name: b.Name, Input: summarizeInput(b.Input), At: l.Time})
		}
	}
}

// content decodes message.content, which is a string or a list of blocks.
func content(raw json.RawMessage) (string, []rawBlock) {
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
		var bs []rawBlock
		if json.Unmarshal(raw, &bs) == nil {
			return "", bs
		}
	}
	return "", nil
}

// inputKeys are the input fields that say best what a tool call does, in
// order of preference.
var inputKeys = []string{"command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "notebook_path"}

const inputMax = 120

// summarizeInput makes a one-line summary of a tool call's input.
func summarizeInput(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range inputKeys {
			v, ok := m[k]
			if !ok {
				continue
			}
			var s string
			if json.Unmarshal(v, &s) == nil && s != "" {
				return Shorten(s, inputMax)
			}
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return Shorten(buf.String(), inputMax)
	}
	return ""
}

const titleMax = 80

// Shorten makes s one line of at most max runes: whitespace runs become a
// space, control characters are dropped, and a cut is marked with "…".
func Shorten(s string, max int) string {
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
