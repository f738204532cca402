package claude

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf16"
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
//
// Each line is read once, by a scanner (lineScan) that validates the JSON
// and notes where the few fields sessiond uses lie; only those are then
// decoded. It accepts and reads exactly what encoding/json would decode
// into the shapes sessiond used to use (keys matched case-insensitively,
// the last duplicate winning, a field of the wrong type failing its
// object): ref_line_test.go keeps that decoder, and the differential tests
// hold the scanner to it.
func ParseLine(b []byte) ([]Line, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, nil
	}
	s := getScan(b)
	end, ok := s.record(0)
	if ok && skipWS(b, end) == len(b) {
		l := s.line()
		putScan(s)
		return []Line{l}, nil
	}
	putScan(s)
	if b[0] != '{' {
		return nil, fmt.Errorf("%w: not a JSON object", ErrCorruptLine)
	}
	return parseGlued(b)
}

// parseGlued recovers the records of a line that is not one JSON object:
// it reads one value at a time and, after a value that fails, resumes at
// the next place that looks like the start of a record.
func parseGlued(b []byte) ([]Line, error) {
	var out []Line
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

// The fields read, by object. A key matches a field exactly or, failing
// that, case-insensitively (Unicode simple folding), as encoding/json
// matches struct fields; the index is the field's.
var (
	lineKeys    = [...]string{"type", "uuid", "sessionId", "cwd", "version", "gitBranch", "timestamp", "customTitle", "isSidechain", "isMeta", "isCompactSummary", "message"}
	messageKeys = [...]string{"role", "content", "stop_reason"}
	blockKeys   = [...]string{"type", "id", "name", "tool_use_id", "text", "input"}

	lineKeysFolded    = foldAll(lineKeys[:])
	messageKeysFolded = foldAll(messageKeys[:])
	blockKeysFolded   = foldAll(blockKeys[:])
)

const (
	lkType = iota
	lkUUID
	lkSessionID
	lkCwd
	lkVersion
	lkGitBranch
	lkTimestamp
	lkCustomTitle // the last string field
	lkIsSidechain
	lkIsMeta
	lkIsCompactSummary
	lkMessage
)

const (
	mkRole = iota
	mkContent
	mkStopReason
)

const (
	bkType = iota
	bkID
	bkName
	bkToolUseID
	bkText // the last string field
	bkInput
)

// maxDepth is the deepest nesting encoding/json accepts; a deeper line is
// corrupt.
const maxDepth = 10000

// span is where a JSON string's contents (between its quotes) lie in the
// line. The zero span is an absent (or null) string.
type span struct {
	start, end int
	set        bool
	esc        bool // has escapes
	high       bool // has bytes >= 0x80
}

// lineScan is the one pass over a transcript line: where its fields are.
type lineScan struct {
	b   []byte
	str [lkCustomTitle + 1]span

	sidechain, meta, compactSummary bool

	hasMsg bool
	msg    msgScan
}

// msgScan is what the scan found of a line's message.
type msgScan struct {
	// bad: not an object (nor null), or a field of the wrong type; then
	// nothing of the message is used.
	bad     bool
	content int // contentNone, ...
	text    span
	// blocksBad: a block is not an object, or has a field of the wrong
	// type; then no block is used.
	blocksBad bool
	// blocks are the content blocks sessiond reads (tool_use, tool_result,
	// text and image), in order.
	blocks []blockScan
	stop   span
}

const (
	contentNone = iota
	contentString
	contentBlocks
	contentOther
)

type blockScan struct {
	str   [bkText + 1]span
	input inputScan
}

// inputScan is a tool_use block's input: the raw value, and the last value
// of each of inputKeys when that is a string.
type inputScan struct {
	start, end int // end == 0: no input
	keys       [len(inputKeys)]span
}

// scanPool keeps lineScans (and their block lists) between lines.
var scanPool = sync.Pool{New: func() any { return &lineScan{msg: msgScan{blocks: make([]blockScan, 0, 4)}} }}

func getScan(b []byte) *lineScan {
	s := scanPool.Get().(*lineScan)
	blocks := s.msg.blocks[:0]
	*s = lineScan{b: b}
	s.msg.blocks = blocks
	return s
}

func putScan(s *lineScan) {
	s.b = nil
	if cap(s.msg.blocks) <= 64 {
		scanPool.Put(s)
	}
}

// record reads the value at b[i]: a record's object, or null (an empty
// record, as encoding/json reads it). It returns where the value ends.
func (s *lineScan) record(i int) (int, bool) {
	b := s.b
	if i < len(b) && b[i] == '{' {
		return s.object(i)
	}
	return literal(b, i, "null")
}

// object reads the record's object at b[i] == '{'.
func (s *lineScan) object(i int) (int, bool) {
	b := s.b
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		k, j, ok := objectKey(b, i)
		if !ok {
			return j, false
		}
		i = j
		switch f := matchKey(b, k, lineKeys[:], lineKeysFolded); {
		case f < 0:
			i, ok = skipValue(b, i, 1)
		case f <= lkCustomTitle:
			var bad bool
			i, bad, ok = stringField(b, i, 1, &s.str[f])
			ok = ok && !bad
		case f == lkIsSidechain:
			i, ok = boolField(b, i, &s.sidechain)
		case f == lkIsMeta:
			i, ok = boolField(b, i, &s.meta)
		case f == lkIsCompactSummary:
			i, ok = boolField(b, i, &s.compactSummary)
		default: // lkMessage
			s.hasMsg = true
			i, ok = s.message(i)
		}
		if !ok {
			return i, false
		}
		if i, ok = nextMember(b, i, '}'); !ok || b[i-1] == '}' {
			return i, ok
		}
	}
}

// message reads the value of "message" at b[i] (depth 2 when an object).
func (s *lineScan) message(i int) (int, bool) {
	b := s.b
	m := &s.msg
	*m = msgScan{blocks: m.blocks[:0]}
	switch b[i] {
	case '{':
	case 'n':
		return literal(b, i, "null")
	default:
		m.bad = true
		return skipValue(b, i, 1)
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		k, j, ok := objectKey(b, i)
		if !ok {
			return j, false
		}
		i = j
		switch matchKey(b, k, messageKeys[:], messageKeysFolded) {
		case mkRole:
			var role span
			var bad bool
			i, bad, ok = stringField(b, i, 2, &role)
			m.bad = m.bad || bad
		case mkContent:
			i, ok = s.content(i)
		case mkStopReason:
			// A *string: null makes it nil again.
			if b[i] == '"' {
				m.stop, i, ok = scanString(b, i)
			} else if b[i] == 'n' {
				m.stop = span{}
				i, ok = literal(b, i, "null")
			} else {
				m.bad = true
				i, ok = skipValue(b, i, 2)
			}
		default:
			i, ok = skipValue(b, i, 2)
		}
		if !ok {
			return i, false
		}
		if i, ok = nextMember(b, i, '}'); !ok || b[i-1] == '}' {
			return i, ok
		}
	}
}

// content reads message.content at b[i]: a string, or a list of blocks
// (depth 3).
func (s *lineScan) content(i int) (int, bool) {
	b := s.b
	m := &s.msg
	m.content, m.text, m.blocks, m.blocksBad = contentOther, span{}, m.blocks[:0], false
	switch b[i] {
	case '"':
		m.content = contentString
		var ok bool
		m.text, i, ok = scanString(b, i)
		return i, ok
	case '[':
		m.content = contentBlocks
	default:
		return skipValue(b, i, 2)
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case '{':
			i, ok = s.block(i)
		case 'n':
			i, ok = literal(b, i, "null")
		default:
			m.blocksBad = true
			i, ok = skipValue(b, i, 3)
		}
		if !ok {
			return i, false
		}
		if i, ok = nextMember(b, i, ']'); !ok || b[i-1] == ']' {
			return i, ok
		}
	}
}

// block reads a content block at b[i] == '{' (depth 4).
func (s *lineScan) block(i int) (int, bool) {
	b := s.b
	m := &s.msg
	var bl blockScan
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		k, j, ok := objectKey(b, i)
		if !ok {
			return j, false
		}
		i = j
		switch f := matchKey(b, k, blockKeys[:], blockKeysFolded); {
		case f < 0:
			i, ok = skipValue(b, i, 4)
		case f <= bkText:
			var bad bool
			i, bad, ok = stringField(b, i, 4, &bl.str[f])
			m.blocksBad = m.blocksBad || bad
		default: // bkInput
			i, ok = input(b, i, &bl.input)
		}
		if !ok {
			return i, false
		}
		if i, ok = nextMember(b, i, '}'); !ok {
			return i, false
		}
		if b[i-1] == '}' {
			break
		}
	}
	t := bl.str[bkType]
	if eqString(b, t, "tool_use") || eqString(b, t, "tool_result") || eqString(b, t, "text") || eqString(b, t, "image") {
		m.blocks = append(m.blocks, bl)
	}
	return i, true
}

// input reads a tool call's input at b[i] (depth 5 when an object) and
// notes, as a map of it would hold them, the last value of each of
// inputKeys (keys match exactly there).
func input(b []byte, i int, in *inputScan) (int, bool) {
	*in = inputScan{start: i}
	if b[i] != '{' {
		end, ok := skipValue(b, i, 4)
		in.end = end
		return end, ok
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		in.end = i + 1
		return i + 1, true
	}
	for {
		k, j, ok := objectKey(b, i)
		if !ok {
			return j, false
		}
		i = j
		f := -1
		for n, name := range inputKeys {
			if eqString(b, k, name) {
				f = n
				break
			}
		}
		switch {
		case f < 0:
			i, ok = skipValue(b, i, 5)
		case b[i] == '"':
			in.keys[f], i, ok = scanString(b, i)
		default:
			in.keys[f] = span{}
			i, ok = skipValue(b, i, 5)
		}
		if !ok {
			return i, false
		}
		if i, ok = nextMember(b, i, '}'); !ok {
			return i, false
		}
		if b[i-1] == '}' {
			in.end = i
			return i, true
		}
	}
}

// objectKey reads `"key" :` at b[i] and the space after it, and returns
// the key and where its value starts.
func objectKey(b []byte, i int) (span, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return span{}, i, false
	}
	k, i, ok := scanString(b, i)
	if !ok {
		return k, i, false
	}
	i = skipWS(b, i)
	if i >= len(b) || b[i] != ':' {
		return k, i, false
	}
	i = skipWS(b, i+1)
	return k, i, i < len(b)
}

// nextMember reads what follows a member of an object or array: a comma
// (then it returns where the next member starts) or the closing byte (then
// it returns just past it, so b[i-1] is the closing byte).
func nextMember(b []byte, i int, closing byte) (int, bool) {
	i = skipWS(b, i)
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case ',':
		i = skipWS(b, i+1)
		return i, i < len(b) && b[i] != closing
	case closing:
		return i + 1, true
	}
	return i, false
}

// stringField reads a value bound for a string field: a string sets *s,
// null leaves it as it is, and anything else is of the wrong type (bad,
// the value skipped).
func stringField(b []byte, i, depth int, s *span) (end int, bad, ok bool) {
	switch b[i] {
	case '"':
		*s, end, ok = scanString(b, i)
		return end, false, ok
	case 'n':
		end, ok = literal(b, i, "null")
		return end, false, ok
	}
	end, ok = skipValue(b, i, depth)
	return end, true, ok
}

// boolField reads a value bound for a bool field of the record; anything
// but true, false or null is of the wrong type and fails the record.
func boolField(b []byte, i int, v *bool) (int, bool) {
	switch b[i] {
	case 't':
		*v = true
		return literal(b, i, "true")
	case 'f':
		*v = false
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	}
	return i, false
}

func skipWS(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// skipValue checks the value at b[i] and returns where it ends. depth is
// how many objects and arrays enclose it.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		_, end, ok := scanString(b, i)
		return end, ok
	case '{', '[':
		return skipNested(b, i, depth)
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	}
	return skipNumber(b, i)
}

// skipNested checks the object or array at b[i] and returns where it
// ends, without recursion: stack holds the open brackets.
func skipNested(b []byte, i, depth int) (int, bool) {
	var arr [32]byte
	stack := arr[:0]
	// open pushes the bracket at b[i] and moves to the first member or the
	// close; it reports whether a member follows.
	open := func() bool {
		stack = append(stack, b[i])
		i = skipWS(b, i+1)
		return i < len(b) && b[i] != stack[len(stack)-1]+2 // '{'+2 == '}', '['+2 == ']'
	}
	if depth+1 > maxDepth {
		return i, false
	}
	member := open()
	for {
		if member {
			if stack[len(stack)-1] == '{' {
				_, j, ok := objectKey(b, i)
				if !ok {
					return j, false
				}
				i = j
			}
			if c := b[i]; c == '{' || c == '[' {
				if depth+len(stack)+1 > maxDepth {
					return i, false
				}
				member = open()
				continue
			}
			var ok bool
			if i, ok = skipValue(b, i, depth+len(stack)); !ok {
				return i, false
			}
		} else {
			if i >= len(b) {
				return i, false
			}
			i++ // the closing bracket
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return i, true
			}
		}
		// After a member: a comma and the next member, or the close.
		i = skipWS(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
			if i >= len(b) {
				return i, false
			}
			member = true
		case stack[len(stack)-1] + 2:
			member = false
		default:
			return i, false
		}
	}
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// skipNumber checks the JSON number at b[i].
func skipNumber(b []byte, i int) (int, bool) {
	n := len(b)
	if i < n && b[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		return i, false
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i++; i < n && isDigit(b[i]); i++ {
		}
	default:
		return i, false
	}
	if i < n && b[i] == '.' {
		i++
		if i >= n || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < n && isDigit(b[i]); i++ {
		}
	}
	if i < n && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < n && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= n || !isDigit(b[i]) {
			return i, false
		}
		for i++; i < n && isDigit(b[i]); i++ {
		}
	}
	return i, true
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// scanString checks the string at b[i] == '"' and returns its span and
// where it ends. It looks at eight bytes at a time while none of them is
// a quote, a backslash or a control character.
func scanString(b []byte, i int) (span, int, bool) {
	start := i + 1
	i = start
	var acc uint64
	esc := false
outer:
	for {
		for i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			q := x ^ (ones * '"')
			bs := x ^ (ones * '\\')
			m := ((q-ones)&^q | (bs-ones)&^bs | (x-ones*0x20)&^x) & highs
			if m == 0 {
				acc |= x
				i += 8
				continue
			}
			// The lowest flagged byte is the first special one (the
			// borrows that may flag wrong bytes only run upwards).
			k := bits.TrailingZeros64(m) >> 3
			acc |= x & (1<<(8*k) - 1)
			i += k
			switch b[i] {
			case '"':
				return span{start: start, end: i, set: true, esc: esc, high: acc&highs != 0}, i + 1, true
			case '\\':
				n := escapeLen(b, i)
				if n == 0 {
					return span{}, i, false
				}
				esc = true
				i += n
				continue
			}
			return span{}, i, false // a control character
		}
		for i < len(b) {
			c := b[i]
			switch {
			case c == '"':
				return span{start: start, end: i, set: true, esc: esc, high: acc&highs != 0}, i + 1, true
			case c == '\\':
				n := escapeLen(b, i)
				if n == 0 {
					return span{}, i, false
				}
				esc = true
				i += n
				continue outer
			case c < 0x20:
				return span{}, i, false
			}
			acc |= uint64(c)
			i++
		}
		return span{}, i, false
	}
}

// escapeLen is the length of the valid escape at b[i] == '\\', 0 if it
// is not one.
func escapeLen(b []byte, i int) int {
	if i+1 >= len(b) {
		return 0
	}
	switch b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2
	case 'u':
		if i+6 > len(b) {
			return 0
		}
		for _, c := range b[i+2 : i+6] {
			if !isDigit(c) && !('a' <= c && c <= 'f') && !('A' <= c && c <= 'F') {
				return 0
			}
		}
		return 6
	}
	return 0
}

// str decodes a string span as encoding/json does (invalid UTF-8 becomes
// U+FFFD).
func str(b []byte, s span) string {
	raw := b[s.start:s.end]
	if !s.esc && (!s.high || utf8.Valid(raw)) {
		return string(raw)
	}
	return string(unquote(make([]byte, 0, len(raw)+8), raw))
}

// eqString reports whether a string span decodes to lit.
func eqString(b []byte, s span, lit string) bool {
	if !s.set {
		return lit == "" // an absent string is ""
	}
	raw := b[s.start:s.end]
	if !s.esc && !s.high {
		return string(raw) == lit
	}
	return string(unquote(nil, raw)) == lit
}

// unquote appends the decoded contents of a checked JSON string to dst,
// exactly as encoding/json decodes them (invalid UTF-8 becomes U+FFFD).
func unquote(dst, s []byte) []byte {
	for r := 0; r < len(s); {
		// The run up to the next escape: copied as it is when valid UTF-8.
		j := bytes.IndexByte(s[r:], '\\')
		if j < 0 {
			j = len(s) - r
		}
		if run := s[r : r+j]; utf8.Valid(run) {
			dst = append(dst, run...)
		} else {
			for k := 0; k < len(run); {
				rr, size := utf8.DecodeRune(run[k:])
				k += size
				dst = utf8.AppendRune(dst, rr)
			}
		}
		r += j
		if r == len(s) {
			break
		}
		// The escape at s[r] (checked by scanString).
		switch s[r+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			rr := getu4(s[r:])
			r += 6
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
					r += 6
					dst = utf8.AppendRune(dst, dec)
					continue
				}
				rr = unicode.ReplacementChar
			}
			dst = utf8.AppendRune(dst, rr)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[r+1])
		}
		r += 2
	}
	return dst
}

// getu4 decodes \uXXXX at the start of s, -1 if s does not start so.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c = c - '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// matchKey returns the index in names of the field a key sets, -1 for
// none: an exact match first, then a case-insensitive one.
func matchKey(b []byte, k span, names []string, folded []string) int {
	key := b[k.start:k.end]
	if !k.esc && !k.high {
		for n, name := range names {
			if string(key) == name {
				return n
			}
		}
		for n, name := range names {
			if asciiEqualFold(key, name) {
				return n
			}
		}
		return -1
	}
	key = unquote(nil, key)
	for n, name := range names {
		if string(key) == name {
			return n
		}
	}
	f := appendFoldedName(nil, key)
	for n, name := range folded {
		if string(f) == name {
			return n
		}
	}
	return -1
}

// asciiEqualFold compares ASCII a and b, letters case-insensitively.
func asciiEqualFold(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if x == y {
			continue
		}
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

func foldAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(appendFoldedName(nil, []byte(n)))
	}
	return out
}

// appendFoldedName folds a name the way encoding/json does to match keys
// to fields (equal folds iff bytes.EqualFold).
func appendFoldedName(out, in []byte) []byte {
	for i := 0; i < len(in); {
		if c := in[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(in[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

// foldRune returns the smallest rune of r's fold set.
func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// lineTypes are the record types, returned without allocating.
var lineTypes = [...]string{"user", "assistant", "queue-operation", "attachment", "atis-latch", "api-request-shape", "api-request-blob", "api-request", "tools-used", "last-prompt", "cost-state", "summary", "system", "file-history-snapshot", "custom-title"}

// line turns the scan into a Line.
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
		l.Type = str(b, t)
		if !t.esc && !t.high {
			for _, known := range lineTypes {
				if string(b[t.start:t.end]) == known {
					l.Type = known
					break
				}
			}
		}
	}
	if ts := s.str[lkTimestamp]; ts.set && ts.end > ts.start {
		if t, err := time.Parse(time.RFC3339Nano, str(b, ts)); err == nil {
			l.Time = t
		}
	}
	switch l.Type {
	case "custom-title":
		l.Title = Shorten(s.field(lkCustomTitle), titleMax)
	case "user":
		s.user(&l)
	case "assistant":
		s.assistant(&l)
	}
	return l
}

func (s *lineScan) field(f int) string {
	if sp := s.str[f]; sp.set && sp.end > sp.start {
		return str(s.b, sp)
	}
	return ""
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
		l.ToolUses = append(l.ToolUses, tc)
	}
}

// inputKeys are the input fields that say best what a tool call does, in
// order of preference.
var inputKeys = [...]string{"command", "file_path", "path", "pattern", "url", "query", "description", "prompt", "notebook_path"}

const inputMax = 120

// summarizeInput makes a one-line summary of a tool call's input: the
// first of inputKeys that is a non-empty string, else the input's JSON
// without its spaces.
func summarizeInput(b []byte, in *inputScan) string {
	if in.end == 0 {
		return ""
	}
	for _, sp := range in.keys {
		if sp.end > sp.start {
			return Shorten(str(b, sp), inputMax)
		}
	}
	return shortenCompact(b[in.start:in.end], inputMax)
}

const titleMax = 80

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
