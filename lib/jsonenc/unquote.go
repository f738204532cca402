package jsonenc

import (
	"encoding/binary"
	"math/bits"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The one JSON string decoder of sessiond's hand-written scanners (the
// Claude transcript line scanner, the store's record scanner). Each
// scanner checks a string its own way (what it accepts differs: the line
// scanner takes anything encoding/json takes, the record scanner only
// what session.Record.AppendJSON writes) and then has Unquote decode it.
// FuzzUnquote holds Unquote to encoding/json's decoding of strings.

// EscapeLen is the length of the valid JSON escape at b[i] == '\\' (2, or
// 6 for \uXXXX), 0 if it is not one. The two-byte escapes are decided
// inline in the scanners' loops.
func EscapeLen(b []byte, i int) int {
	if i+1 < len(b) && shortEscape[b[i+1]] {
		return 2
	}
	return uEscapeLen(b, i)
}

// shortEscape holds the bytes that end a two-byte escape.
var shortEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

// uEscapeLen is 6 for a valid \uXXXX at b[i], 0 for anything else.
func uEscapeLen(b []byte, i int) int {
	if i+6 > len(b) || b[i+1] != 'u' {
		return 0
	}
	for _, c := range b[i+2 : i+6] {
		if hexValue(c) < 0 {
			return 0
		}
	}
	return 6
}

// Unquote appends the decoded contents of a JSON string (s: what lies
// between its quotes) to dst, exactly as encoding/json decodes them:
// escapes, surrogate pairs joined and a lone surrogate as U+FFFD, invalid
// UTF-8 as U+FFFD. s must be checked first: every backslash begins an
// escape EscapeLen accepts. What Unquote makes of anything else is not
// specified, but it does not panic.
func Unquote(dst, s []byte) []byte {
	// s[r:j] is the run not yet copied: valid UTF-8 with no backslash. It
	// is looked at eight bytes at a time while they are ASCII, in this
	// loop rather than in calls (bytes.IndexByte and utf8.Valid for each
	// run cost the record scanner, whose strings are short, 15 %).
	r, j := 0, 0
	for j < len(s) {
		if j = asciiRun(s, j); j == len(s) {
			break
		}
		if s[j] != '\\' {
			rr, size := utf8.DecodeRune(s[j:])
			if rr != utf8.RuneError || size != 1 {
				j += size // valid: part of the run
				continue
			}
			dst = append(dst, s[r:j]...)
			dst = append(dst, "\uFFFD"...)
			j++
			r = j
			continue
		}
		dst = append(dst, s[r:j]...)
		if j+1 == len(s) {
			return dst // a lone backslash (not checked)
		}
		// The escape at s[j].
		switch s[j+1] {
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
			rr := getu4(s[j:])
			j += 6
			if utf16.IsSurrogate(rr) {
				if dec := utf16.DecodeRune(rr, getu4(s[j:])); dec != unicode.ReplacementChar {
					j += 6
					rr = dec
				} else {
					rr = unicode.ReplacementChar
				}
			}
			dst = utf8.AppendRune(dst, rr)
			j = min(j, len(s)) // past the end only if not checked
			r = j
			continue
		default: // '"', '\\', '/'
			dst = append(dst, s[j+1])
		}
		j += 2
		r = j
	}
	return append(dst, s[r:j]...)
}

// asciiRun returns the index of the first byte of s from i on that is a
// backslash or not ASCII, or len(s), looking at eight bytes at a time.
func asciiRun(s []byte, i int) int {
	for ; i+8 <= len(s); i += 8 {
		x := binary.LittleEndian.Uint64(s[i:])
		bs := x ^ (lsb * '\\')
		// The lowest lane flagged is the first byte >= 0x80 or backslash:
		// a borrow may flag a lane above a backslash, never one below.
		if m := (x | (bs-lsb)&^bs) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(s); i++ {
		if c := s[i]; c == '\\' || c >= utf8.RuneSelf {
			return i
		}
	}
	return i
}

// getu4 decodes \uXXXX at the start of s, -1 if s does not start so.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		v := hexValue(c)
		if v < 0 {
			return -1
		}
		r = r*16 + v
	}
	return r
}

// hexValue is the value of the hexadecimal digit c, -1 if it is not one.
func hexValue(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}
