// Package oneline makes an agent's words fit a field of sessiond's: one
// line, a bounded number of runes, a cut marked.
package oneline

import (
	"path/filepath"
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

// Argv is a command line on one short line for a problem's detail: the
// program's base name, then its arguments, at most 100 runes; "?" for
// none.
func Argv(argv []string) string {
	if len(argv) == 0 {
		return "?"
	}
	s := filepath.Base(argv[0])
	if len(argv) > 1 {
		s += " " + strings.Join(argv[1:], " ")
	}
	return Cut(s, 100)
}

// OrUnknown is s, or "?" when s is empty (a field not known).
func OrUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
