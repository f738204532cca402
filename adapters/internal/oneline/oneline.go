// Package oneline makes an agent's words fit a field of sessiond's: one
// line, a bounded number of runes, a cut marked.
package oneline

import (
	"strings"
	"unicode/utf8"
)

// Cut makes s one line (runs of whitespace become one space) of at most
// n runes; a cut ends in "…", which counts as one of them.
func Cut(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
