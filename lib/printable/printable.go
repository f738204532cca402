// Package printable strips from a text what a terminal, a process's
// environment or a notification daemon would act on rather than show: NUL
// (an environment variable cannot hold one, and exec refuses the whole
// environment), the other C0 controls (a carriage return submits a
// prompt, ESC starts a key sequence or ends a bracketed paste, ^C
// interrupts), DEL and the C1 controls.
//
// sessiond puts text it did not write into such places: session titles,
// folders and waiting texts from agents' files go into hooks.d
// environments and notification arguments; a user's prompt goes into a
// tmux buffer and is pasted into an agent's pane.
package printable

import (
	"strings"
	"unicode/utf8"
)

// Line returns s as one line: every control character is dropped, except
// that tabs and line breaks become one space each (words stay apart).
func Line(s string) string { return clean(s, false) }

// Text returns s with its line breaks kept as "\n" ("\r\n" and a lone
// "\r" become "\n") and every other control character dropped, a tab
// becoming a space. It is for a prompt that goes into a bracketed paste,
// which carries newlines as text.
func Text(s string) string { return clean(s, true) }

func clean(s string, keepNewlines bool) string {
	if plain(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\r' || c == '\n':
			if c == '\r' && i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
			if keepNewlines {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
			i++
		case c == '\t':
			b.WriteByte(' ')
			i++
		case c < 0x20 || c == 0x7f:
			i++
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r < 0x80 || r > 0x9f || n == 1 {
				// Not a C1 control (an invalid byte is kept as it is:
				// it is not a control, and changing it is not ours).
				b.WriteString(s[i : i+n])
			}
			i += n
		}
	}
	return b.String()
}

// plain reports whether s holds no control character at all, the common
// case, so that it is returned without a copy.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || c == 0xc2 && i+1 < len(s) && s[i+1] >= 0x80 && s[i+1] <= 0x9f {
			return false
		}
	}
	return true
}
