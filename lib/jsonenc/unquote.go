package jsonenc

import (
	"bytes"
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
// 6 for \uXXXX), 0 if it is not one.
func EscapeLen(b []byte, i int) int {
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
			if hexValue(c) < 0 {
				return 0
			}
		}
		return 6
	}
	return 0
}

// Unquote appends the decoded contents of a JSON string (s: what lies
// between its quotes) to dst, exactly as encoding/json decodes them:
// escapes, surrogate pairs joined and a lone surrogate as U+FFFD, invalid
// UTF-8 as U+FFFD. s must be checked first: every backslash begins an
// escape EscapeLen accepts. What Unquote makes of anything else is not
// specified, but it does not panic.
func Unquote(dst, s []byte) []byte {
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
		if r+1 >= len(s) {
			break // the end, or a lone backslash (not checked)
		}
		// The escape at s[r].
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
