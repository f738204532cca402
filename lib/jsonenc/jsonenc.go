// Package jsonenc appends JSON values byte for byte as encoding/json's
// Marshal writes them (HTML-safe escaping, invalid UTF-8 as U+FFFD,
// time.Time in strict RFC 3339). The records sessiond stores and serves
// are encoded with it by appenders that jsongen writes from their struct
// tags (session.Record.AppendJSON, api.Session.AppendJSON):
// encoding/json's reflection, and the compaction it runs over every
// time.Time's MarshalJSON, were most of the cost of committing a first
// start's sessions and of encoding the first list after a restart. The
// appenders' tests hold them to json.Marshal.
//
// It also decodes JSON strings as encoding/json does (Unquote), for the
// hand-written scanners that read transcripts and stored records.
package jsonenc

import (
	"encoding/binary"
	"strconv"
	"time"
	"unicode/utf8"
	"unsafe"
)

const hex = "0123456789abcdef"

// String appends s as a JSON string, escaped as encoding/json escapes it
// with HTML escaping on (its default).
func String(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if i = plainUpTo(s, i); i == len(s) {
			break
		}
		if b := s[i]; b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default: // other control bytes, and <, > and &
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// plainUpTo returns the index of the first byte of s from i on that is
// not written as it is (a byte to escape, or one of a multi-byte rune),
// or len(s). It looks at eight bytes at a time while it can: most of
// what sessiond encodes is plain ASCII (paths, titles, ids). A loop of
// its own, with no appends, keeps its values in registers.
func plainUpTo(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		x := load8(s, i)
		// A lane of qa is zero for " or & (0x22, 0x26: one bit apart),
		// of lg for < or > (0x3c, 0x3e), of bs for a backslash.
		qa, lg, bs := (x|lsb*0x04)^(lsb*'&'), (x|lsb*0x02)^(lsb*'>'), x^(lsb*'\\')
		if (x|(x-lsb*0x20)&^x|(qa-lsb)&^qa|(lg-lsb)&^lg|(bs-lsb)&^bs)&msb != 0 {
			break
		}
	}
	for ; i < len(s); i++ {
		if b := s[i]; b >= utf8.RuneSelf || !safe[b] {
			return i
		}
	}
	return i
}

// Word-at-a-time tests on eight bytes (each a byte lane of a uint64), as
// in "Bit Twiddling Hacks": haszero(v) = (v - lsb) &^ v & msb is nonzero
// exactly when some lane of v is zero (a borrow can mark a lane above a
// zero one as well, never a lane when there is none), and v - n*lsb the
// same for lanes below n when no lane has its top bit set.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// load8 is the eight bytes of s from i, the first in the lowest lane.
func load8(s string, i int) uint64 {
	// One bounds check and one load: s's bytes, read in place.
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s), len(s))[i:])
}

// safe holds the ASCII bytes encoding/json writes as they are with HTML
// escaping on.
var safe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		switch b {
		case '"', '\\', '<', '>', '&':
		default:
			t[b] = true
		}
	}
	return t
}()

// Time appends t as time.Time's MarshalJSON writes it. Like MarshalJSON it
// fails for a year outside 0-9999 or an offset beyond ±24 h.
func Time(dst []byte, t time.Time) ([]byte, error) {
	dst = append(dst, '"')
	dst, err := t.AppendText(dst)
	if err != nil {
		return nil, err
	}
	return append(dst, '"'), nil
}

// Int appends n.
func Int(dst []byte, n int) []byte { return strconv.AppendInt(dst, int64(n), 10) }

// Uint appends n.
func Uint(dst []byte, n uint64) []byte { return strconv.AppendUint(dst, n, 10) }

// Bool appends b.
func Bool(dst []byte, b bool) []byte { return strconv.AppendBool(dst, b) }

// Key appends a member's key and colon, with a comma before it unless the
// object's opening brace is the last byte. Keys are the appenders' own
// constants and need no escaping.
func Key(dst []byte, k string) []byte {
	if n := len(dst); n > 0 && dst[n-1] != '{' {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"', ':')
}

// OptString appends the member k: v unless v is empty (omitempty).
func OptString(dst []byte, k, v string) []byte {
	if v == "" {
		return dst
	}
	return String(Key(dst, k), v)
}

// OptTime appends the member k: *t unless t is nil (omitempty).
func OptTime(dst []byte, k string, t *time.Time) ([]byte, error) {
	if t == nil {
		return dst, nil
	}
	return Time(Key(dst, k), *t)
}

// TimePtr appends *t, or null when t is nil.
func TimePtr(dst []byte, t *time.Time) ([]byte, error) {
	if t == nil {
		return append(dst, "null"...), nil
	}
	return Time(dst, *t)
}
