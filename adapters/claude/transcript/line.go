package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/adapters/internal/hookjson"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Kind is what a transcript line means for the conversation's state.
type Kind int

// Kind values. Everything Claude Code writes that is not a conversation turn
// (queue-operation, attachment, atis-latch, api-request-*, tools-used,
// last-prompt, cost-state, summary, system, file-history-snapshot, and any
// type not known yet) is KindOther: read for its metadata, never for state.
const (
	KindOther Kind = iota
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
	Kind      Kind
	// Prompt is the text of a kindPrompt line.
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
	// BadField names a field read in the line's message that came with
	// another JSON type than Claude Code writes ("message.content:
	// number"); the message was not used. "" for nearly every line.
	BadField string
	// unknownType: Type is none of lineTypes (a type of a newer version).
	unknownType bool
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

// errCorruptLine is wrapped by parseLine's errors: the line (or a part of
// it) is not a JSON object.
var errCorruptLine = errors.New("corrupt transcript line")

// maxGlued bounds how many records parseLine recovers from one line, and so
// the work a hostile line can cause.
const maxGlued = 8

// parseLine parses one transcript line (without its newline). A line is
// normally one JSON object. Two records glued together (a write torn by a
// crash, then the next record) are split and both returned, with an error
// wrapping errCorruptLine when some bytes could not be recovered. Unknown
// types come back as kindOther. parseLine never panics on any input.
//
// Each line is read once, by a scanner (lineScan) that validates the JSON
// and notes where the few fields sessiond uses lie; only those are then
// decoded. It accepts and reads exactly what encoding/json would decode
// into the shapes sessiond used to use (keys matched case-insensitively,
// the last duplicate winning, a field of the wrong type failing its
// object): ref_line_test.go keeps that decoder, and the differential tests
// hold the scanner to it.
func parseLine(b []byte) ([]Line, error) {
	return parseLineAppend(nil, b)
}

// parseLineAppend is parseLine appending the records to dst (see
// lineArena).
func parseLineAppend(dst []Line, b []byte) ([]Line, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return dst, nil
	}
	s := getScan(b)
	end, ok := s.record(0)
	if ok && skipWS(b, end) == len(b) {
		dst = append(dst, s.line())
		putScan(s)
		return dst, nil
	}
	putScan(s)
	if b[0] != '{' {
		return dst, fmt.Errorf("%w: not a JSON object", errCorruptLine)
	}
	return parseGlued(dst, b)
}

// parseGlued recovers the records of a line that is not one JSON object:
// it reads one value at a time and, after a value that fails, resumes at
// the next place that looks like the start of a record. It appends them
// to out.
func parseGlued(out []Line, b []byte) ([]Line, error) {
	first := len(out)
	lost := 0
	p := 0
	for attempts := 0; p < len(b) && attempts < maxGlued; attempts++ {
		s := getScan(b)
		end, ok := s.record(p)
		if ok {
			out = append(out, s.line())
		}
		putScan(s)
		if ok {
			p = end
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
		return out, fmt.Errorf("%w: %d of %d bytes unreadable, %d records recovered", errCorruptLine, lost, len(b), len(out)-first)
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

// lineTypes are the record types, returned without allocating: those
// seen in transcripts, then the session metadata lines Claude Code
// appends again on a resume or a title change (the same list in 2.1.328
// and 2.1.332, read from the binary; 2.1.332's resume was seen writing
// "mode"). None of the metadata says anything of the turn.
var lineTypes = [...]string{"user", "assistant", "queue-operation", "attachment", "atis-latch", "api-request-shape", "api-request-blob", "api-request", "tools-used", "last-prompt", "cost-state", "summary", "system", "file-history-snapshot", "custom-title",
	"ai-title", "tag", "agent-name", "agent-color", "agent-setting", "mode", "permission-mode", "memory-mode", "repl-mode", "isolation-latch", "dev-mods", "hybrid-organization", "relocated", "session-owner", "pr-link", "worktree-state", "bridge-session", "frame-link", "derived-from", "data-flow-records"}

// line turns the scan into a line.
func (s *lineScan) line() Line {
	b := s.b
	l := Line{
		UUID:      s.field(lkUUID),
		SessionID: s.field(lkSessionID),
		Cwd:       s.field(lkCwd),
		Version:   s.field(lkVersion),
		GitBranch: s.field(lkGitBranch),
		Sidechain: s.sidechain,
	}
	if t := s.str[lkType]; t.set && t.end > t.start {
		if !t.esc && !t.high {
			for _, known := range lineTypes {
				if string(b[t.start:t.end]) == known {
					l.Type = known
					break
				}
			}
		}
		if l.Type == "" {
			l.Type = str(b, t)
			l.unknownType = !slices.Contains(lineTypes[:], l.Type) // escaped, or not known
		}
	}
	l.BadField = s.badField
	if ts := s.str[lkTimestamp]; ts.set && ts.end > ts.start {
		if t, err := time.Parse(time.RFC3339Nano, transient(b, ts)); err == nil {
			l.Time = t
		}
	}
	switch l.Type {
	case "custom-title":
		l.Title = Shorten(s.field(lkCustomTitle), TitleMax)
	case "user":
		s.user(&l)
	case "assistant":
		s.assistant(&l)
	}
	return l
}

func (s *lineScan) field(f int) string {
	sp := s.str[f]
	if !sp.set || sp.end <= sp.start {
		return ""
	}
	if !sp.esc && string(s.b[sp.start:sp.end]) == s.last[f] {
		return s.last[f]
	}
	v := str(s.b, sp)
	s.last[f] = v
	return v
}

// blocks are the message's content blocks, nil when there are none or
// one is malformed.
func (m *msgScan) usable() []blockScan {
	if m.content != contentBlocks || m.blocksBad {
		return nil
	}
	return m.blocks
}

func (s *lineScan) user(l *Line) {
	l.Kind = KindUserOther
	m := &s.msg
	if !s.hasMsg || m.bad {
		return
	}
	b := s.b
	blocks := m.usable()
	images := false
	for i := range blocks {
		bl := &blocks[i]
		switch t := bl.str[bkType]; {
		case eqString(b, t, "tool_result"):
			if id := bl.str[bkToolUseID]; id.end > id.start {
				l.ToolResults = append(l.ToolResults, str(b, id))
			}
		case eqString(b, t, "image"):
			images = true
		}
	}
	switch {
	case len(l.ToolResults) > 0:
		l.Kind = KindToolResult
		return
	case s.meta || s.compactSummary:
		return
	}
	var text string
	if m.content == contentString && m.text.end > m.text.start {
		text = str(b, m.text)
	}
	for i := range blocks {
		bl := &blocks[i]
		if !eqString(b, bl.str[bkType], "text") {
			continue
		}
		var t string
		if sp := bl.str[bkText]; sp.end > sp.start {
			t = str(b, sp)
		}
		if text == "" {
			text = t
		} else {
			text += "\n" + t
		}
	}
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

func (s *lineScan) assistant(l *Line) {
	l.Kind = KindAssistant
	m := &s.msg
	if !s.hasMsg || m.bad {
		return
	}
	b := s.b
	if m.stop.set {
		l.StopReason = str(b, m.stop)
	}
	blocks := m.usable()
	for i := range blocks {
		bl := &blocks[i]
		id := bl.str[bkID]
		if id.end == id.start || !eqString(b, bl.str[bkType], "tool_use") {
			continue
		}
		tc := ToolCall{ID: str(b, id), Input: summarizeInput(b, &bl.input), At: l.Time}
		if n := bl.str[bkName]; n.end > n.start {
			tc.Name = str(b, n)
		}
		if tc.Name == AskUserQuestion {
			if q := hookjson.QuestionText(b[bl.input.start:bl.input.end]); q != "" {
				tc.Input = Shorten(q, InputMax)
			}
		}
		l.ToolUses = append(l.ToolUses, tc)
	}
}

// AskUserQuestion is Claude Code's tool that puts questions to the user
// and waits for the answers. Its input (2.1.328) is {"questions":
// [{"question", "header", "options", "multiSelect"}]}.
const AskUserQuestion = "AskUserQuestion"

// inputKeys are the input fields that say best what a tool call does, in
// order of preference.
var inputKeys = [...]string{"command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "notebook_path"}

const InputMax = 120

// summarizeInput makes a one-line summary of a tool call's input: the
// first of inputKeys that is a non-empty string, else the input's JSON
// without its spaces.
func summarizeInput(b []byte, in *inputScan) string {
	if in.end == 0 {
		return ""
	}
	for _, sp := range in.keys {
		if sp.end > sp.start {
			return Shorten(str(b, sp), InputMax)
		}
	}
	return shortenCompact(b[in.start:in.end], InputMax)
}

const TitleMax = 80

// Shorten makes s one line of at most max runes: whitespace runs become a
// space, control characters are dropped, and a cut is marked with "…".
func Shorten(s string, max int) string {
	if max <= 0 {
		return ""
	}
	sh := shortener{max: max, out: make([]rune, 0, min(len(s), max+1))}
	for _, r := range s {
		if sh.add(r) {
			break
		}
	}
	return sh.String()
}

// shortenCompact is Shorten of checked JSON with the spaces between its
// tokens removed (json.Compact), without making that copy.
func shortenCompact(raw []byte, max int) string {
	if max <= 0 {
		return ""
	}
	sh := shortener{max: max, out: make([]rune, 0, min(len(raw), max+1))}
	inStr, esc := false, false
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(raw[i:])
			i += n
			if sh.add(r) {
				break
			}
			continue
		}
		i++
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && isSpace(c):
			continue
		}
		if sh.add(rune(c)) {
			break
		}
	}
	return sh.String()
}

// shortener collects the runes of Shorten's result.
type shortener struct {
	out   []rune
	max   int
	space bool
}

// add takes the next rune and reports whether the result is complete.
func (sh *shortener) add(r rune) bool {
	switch {
	case unicode.IsSpace(r):
		sh.space = len(sh.out) > 0
		return false
	case unicode.IsControl(r), r == utf8.RuneError:
		return false
	}
	if sh.space {
		sh.out = append(sh.out, ' ')
		sh.space = false
	}
	sh.out = append(sh.out, r)
	return len(sh.out) > sh.max
}

func (sh *shortener) String() string {
	out := sh.out
	if len(out) > sh.max {
		out = append(out[:sh.max-1], '…')
	}
	return string(out)
}
