package transcript

// The line scanner: one forward pass over a transcript line that checks it
// is JSON exactly as encoding/json would, and notes where the few fields
// the adapter reads lie (see the key lists below), so that only those are
// decoded. It matches encoding/json's rules where they change a result:
// exact then case-insensitive (Unicode simple folding) key matching, the
// last duplicate key winning, null leaving a field alone, a wrongly typed
// field failing its level, escapes and invalid UTF-8 decoded the same way,
// and the nesting limit. line_diff_test.go holds it to the old decoder.

import (
	"sync"
	"unicode"
	"unicode/utf8"
	"unsafe"

	"github.com/sessiond/sessiond/lib/jsonenc"
	"github.com/sessiond/sessiond/lib/jsonscan"
)

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
const maxDepth = jsonscan.MaxDepth

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
	// badField names the first field of the message found of another
	// JSON type than sessiond reads ("message.role: number"): drift.
	badField string

	// last holds what field returned for each string field the last time
	// this scan (pooled, so mostly the same reader's previous line) read
	// one. Every line of a transcript repeats its sessionId, cwd, version
	// and gitBranch: a field whose bytes are last's is last, without a new
	// string. last always holds a decoded value, so equal raw bytes are
	// plain, valid text that decodes to itself.
	last [lkCustomTitle + 1]string
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
	blocks, last := s.msg.blocks[:0], s.last
	*s = lineScan{b: b, last: last}
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
		s.wrongType("message", b[i])
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
			if bad {
				s.wrongType("message.role", b[j])
			}
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
				s.wrongType("message.stop_reason", b[i])
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
	case 'n':
		return skipValue(b, i, 2)
	default:
		s.wrongType("message.content", b[i])
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
			s.wrongType("message.content[]", b[i])
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
			at := i
			i, bad, ok = stringField(b, i, 4, &bl.str[f])
			m.blocksBad = m.blocksBad || bad
			if bad {
				s.wrongType("message.content[]."+blockKeys[f], b[at])
			}
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

// wrongType notes the first field found of another JSON type than
// sessiond reads, the value starting with c.
func (s *lineScan) wrongType(field string, c byte) {
	if s.badField != "" {
		return
	}
	t := "number"
	switch c {
	case '"':
		t = "string"
	case '{':
		t = "object"
	case '[':
		t = "array"
	case 't', 'f':
		t = "bool"
	case 'n':
		t = "null"
	}
	s.badField = field + ": " + t
}

// objectKey reads `"key" :` at b[i] and the space after it, and returns
// the key and where its value starts (jsonscan.Key).
func objectKey(b []byte, i int) (span, int, bool) {
	k, i, ok := jsonscan.Key(b, i)
	return span{start: k.Start, end: k.End, set: ok, esc: k.Esc, high: k.High}, i, ok
}

// nextMember reads what follows a member of an object or array: a comma
// (then it returns where the next member starts) or the closing byte (then
// it returns just past it, so b[i-1] is the closing byte).
func nextMember(b []byte, i int, closing byte) (int, bool) {
	return jsonscan.NextMember(b, i, closing)
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

func skipWS(b []byte, i int) int { return jsonscan.SkipSpace(b, i) }

func literal(b []byte, i int, lit string) (int, bool) { return jsonscan.Literal(b, i, lit) }

// skipValue checks the value at b[i] and returns where it ends. depth is
// how many objects and arrays enclose it.
func skipValue(b []byte, i, depth int) (int, bool) { return jsonscan.Value(b, i, depth) }

// scanString checks the string at b[i] == '"' and returns its span and
// where it ends (jsonscan.String: eight bytes at a time).
func scanString(b []byte, i int) (span, int, bool) {
	s, end, ok := jsonscan.String(b, i)
	return span{start: s.Start, end: s.End, set: ok, esc: s.Esc, high: s.High}, end, ok
}

// str decodes a string span as encoding/json does (invalid UTF-8 becomes
// U+FFFD).
func str(b []byte, s span) string {
	return jsonscan.Text(b, jsonscan.Str{Start: s.start, End: s.end, Esc: s.esc, High: s.high})
}

// transient is str for a string used only until the next change of b, and
// kept by nobody: a plain span is b's own bytes, not a copy (every line's
// timestamp was an allocation only for time.Parse to read it, which keeps
// nothing of a value it parses, error aside).
func transient(b []byte, s span) string {
	if s.esc || s.high || s.end <= s.start {
		return str(b, s)
	}
	return unsafe.String(&b[s.start], s.end-s.start)
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
	return string(jsonenc.Unquote(nil, raw)) == lit
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
	key = jsonenc.Unquote(nil, key)
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
