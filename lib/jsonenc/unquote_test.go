package jsonenc

import (
	"bytes"
	"encoding/json"
	"testing"
)

var unquoteSeeds = []string{
	"", "plain", `\"\\\/\b\f\n\r\t`, `\u0000\u001f\u0041\u00e9\u2028\uFFFF`,
	`\ud83d\ude00`, `\uD83D\uDE00`, `\ud83d`, `\ude00`, `\ude00\ud83d`, `\ud83dx`, `\ud83d\u0041`,
	`\ud83d\ud83d\ude00`, "é日本😀", "\xff", "a\xc0\xafb", "\xed\xa0\x80", "\xe2\x80",
	"x\xff\\ny\xe2\x80", `\u12`, `\x`, `\`, `a\`, `\u`, `\uzzzz`, "\x00", `"`,
}

// validContents reports whether s may stand between the quotes of a JSON
// string: no control byte, no bare quote, every backslash an escape
// EscapeLen accepts (what the scanners check before they call Unquote).
func validContents(s []byte) bool {
	for i := 0; i < len(s); {
		switch c := s[i]; {
		case c == '\\':
			n := EscapeLen(s, i)
			if n == 0 {
				return false
			}
			i += n
		case c == '"' || c < 0x20:
			return false
		default:
			i++
		}
	}
	return true
}

// checkUnquote holds Unquote to json.Unmarshal on the string "s", and
// EscapeLen to what encoding/json takes for a string.
func checkUnquote(t *testing.T, s []byte) {
	t.Helper()
	quoted := append(append([]byte{'"'}, s...), '"')
	var want string
	err := json.Unmarshal(quoted, &want)
	if valid := validContents(s); valid != (err == nil) {
		t.Fatalf("%q: checked as valid %v, json.Unmarshal: %v", s, valid, err)
	}
	got := Unquote([]byte("x"), s) // anything at all: it must not panic
	if err != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("x")) {
		t.Fatalf("%q: Unquote did not append to dst: %q", s, got)
	}
	if string(got[1:]) != want {
		t.Fatalf("%q: Unquote %q, json.Unmarshal %q", s, got[1:], want)
	}
}

// TestUnquoteIsUnmarshal: the seeds, and every byte after a backslash
// and in a \u escape's digits.
func TestUnquoteIsUnmarshal(t *testing.T) {
	for _, s := range unquoteSeeds {
		checkUnquote(t, []byte(s))
	}
	for b := range 256 {
		checkUnquote(t, []byte{'a', '\\', byte(b), 'z'})
		checkUnquote(t, []byte{'\\', byte(b)})
		for at := range 4 {
			u := []byte(`\u0041`)
			u[2+at] = byte(b)
			checkUnquote(t, u)
		}
	}
}

// TestUnquoteEveryLane: an escape, a multi-byte rune or an invalid byte
// at every position of strings long enough for the eight-byte path, among
// plain bytes, so that a lane test that misses one, or takes a plain byte
// for one, fails.
func TestUnquoteEveryLane(t *testing.T) {
	specials := []string{`\n`, `\"`, `\\`, `\u00e9`, `\ud83d\ude00`, `\ud83d`, "é", "日", "😀", "\xff", "\xe2\x80", "\x7f"}
	const n = 17
	for _, sp := range specials {
		for at := 0; at <= n; at++ {
			for _, fill := range []byte{'a', ' ', '[', ']', '\'', '~'} {
				s := bytes.Repeat([]byte{fill}, at)
				s = append(s, sp...)
				s = append(s, bytes.Repeat([]byte{fill}, n-at)...)
				checkUnquote(t, s)
			}
		}
	}
}

// FuzzUnquote holds Unquote to encoding/json's decoding of strings, and
// EscapeLen to the escapes encoding/json takes:
//
//	go test -run='^$' -fuzz=FuzzUnquote ./lib/jsonenc/
func FuzzUnquote(f *testing.F) {
	for _, s := range unquoteSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkUnquote)
}
