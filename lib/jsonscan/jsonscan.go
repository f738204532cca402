// Package jsonscan checks JSON text exactly as encoding/json does, at
// memory speed: strings are looked at eight bytes at a time, and nothing
// is decoded. Parsers built on it (Claude's transcript line scanner) read
// the few fields they need where the scan finds them; Prune hands
// encoding/json a line without the members nobody reads (tool outputs),
// so the agents' folds decode kilobytes, not megabytes.
//
// Valid, and every function here, accepts what json.Valid accepts and
// nothing else: the grammar of RFC 8259, strings without control
// characters and with valid escapes (invalid UTF-8 is accepted, as
// encoding/json decodes it to U+FFFD), and nesting up to MaxDepth.
package jsonscan

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf8"

	"github.com/sessiond/sessiond/lib/jsonenc"
)

// MaxDepth is the deepest nesting encoding/json accepts; a deeper value
// is invalid.
const MaxDepth = 10000

// Str is where a JSON string's contents (between its quotes) lie in the
// text, and what a decoder needs to know of them.
type Str struct {
	Start, End int
	// Esc: the contents have escapes; High: bytes >= 0x80.
	Esc, High bool
}

// Valid reports whether b is one JSON value, with space around it, as
// json.Valid does.
func Valid(b []byte) bool {
	i := SkipSpace(b, 0)
	end, ok := Value(b, i, 0)
	return ok && SkipSpace(b, end) == len(b)
}

// Space reports whether c is JSON white space.
func Space(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// SkipSpace returns where the white space at b[i] ends.
func SkipSpace(b []byte, i int) int {
	for i < len(b) && Space(b[i]) {
		i++
	}
	return i
}

// Literal checks that b[i:] starts with lit (true, false, null) and
// returns where it ends.
func Literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return i, false
}

// Value checks the value at b[i] and returns where it ends. depth is how
// many objects and arrays enclose it.
func Value(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		_, end, ok := String(b, i)
		return end, ok
	case '{', '[':
		return nested(b, i, depth)
	case 't':
		return Literal(b, i, "true")
	case 'f':
		return Literal(b, i, "false")
	case 'n':
		return Literal(b, i, "null")
	}
	return Number(b, i)
}

// nested checks the object or array at b[i] and returns where it ends,
// without recursion: stack holds the open brackets.
func nested(b []byte, i, depth int) (int, bool) {
	var arr [32]byte
	stack := arr[:0]
	// open pushes the bracket at b[i] and moves to the first member or the
	// close; it reports whether a member follows.
	open := func() bool {
		stack = append(stack, b[i])
		i = SkipSpace(b, i+1)
		return i < len(b) && b[i] != stack[len(stack)-1]+2 // '{'+2 == '}', '['+2 == ']'
	}
	if depth+1 > MaxDepth {
		return i, false
	}
	member := open()
	for {
		if member {
			if stack[len(stack)-1] == '{' {
				_, j, ok := Key(b, i)
				if !ok {
					return j, false
				}
				i = j
			}
			if c := b[i]; c == '{' || c == '[' {
				if depth+len(stack)+1 > MaxDepth {
					return i, false
				}
				member = open()
				continue
			}
			var ok bool
			if i, ok = Value(b, i, depth+len(stack)); !ok {
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
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
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

// Key reads `"key" :` at b[i] and the space after it, and returns the
// key and where its value starts.
func Key(b []byte, i int) (Str, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return Str{}, i, false
	}
	k, i, ok := String(b, i)
	if !ok {
		return k, i, false
	}
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return k, i, false
	}
	i = SkipSpace(b, i+1)
	return k, i, i < len(b)
}

// NextMember reads what follows a member of an object or array: a comma
// (then it returns where the next member starts) or the closing byte
// (then it returns just past it, so b[i-1] is the closing byte).
func NextMember(b []byte, i int, closing byte) (int, bool) {
	i = SkipSpace(b, i)
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case ',':
		i = SkipSpace(b, i+1)
		return i, i < len(b) && b[i] != closing
	case closing:
		return i + 1, true
	}
	return i, false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// Number checks the JSON number at b[i] and returns where it ends.
func Number(b []byte, i int) (int, bool) {
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

// String checks the string at b[i] == '"' and returns its contents and
// where it ends. It looks at eight bytes at a time while none of them is
// a quote, a backslash or a control character.
func String(b []byte, i int) (Str, int, bool) {
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
				return Str{Start: start, End: i, Esc: esc, High: acc&highs != 0}, i + 1, true
			case '\\':
				n := jsonenc.EscapeLen(b, i)
				if n == 0 {
					return Str{}, i, false
				}
				esc = true
				i += n
				continue
			}
			return Str{}, i, false // a control character
		}
		for i < len(b) {
			c := b[i]
			switch {
			case c == '"':
				return Str{Start: start, End: i, Esc: esc, High: acc&highs != 0}, i + 1, true
			case c == '\\':
				n := jsonenc.EscapeLen(b, i)
				if n == 0 {
					return Str{}, i, false
				}
				esc = true
				i += n
				continue outer
			case c < 0x20:
				return Str{}, i, false
			}
			acc |= uint64(c)
			i++
		}
		return Str{}, i, false
	}
}

// Text decodes the string s of b as encoding/json does (invalid UTF-8
// becomes U+FFFD).
func Text(b []byte, s Str) string {
	raw := b[s.Start:s.End]
	if !s.Esc && (!s.High || utf8.Valid(raw)) {
		return string(raw)
	}
	return string(jsonenc.Unquote(make([]byte, 0, len(raw)+8), raw))
}

// KeyIs reports whether the key k of b decodes to name.
func KeyIs(b []byte, k Str, name string) bool {
	if !k.Esc && !k.High {
		return string(b[k.Start:k.End]) == name
	}
	return Text(b, k) == name
}
