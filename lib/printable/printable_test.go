package printable

import (
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLineAndText(t *testing.T) {
	tests := []struct{ in, line, text string }{
		{"plain title", "plain title", "plain title"},
		{"", "", ""},
		{"a\x00b", "ab", "ab"},
		{"fix\tthe bug", "fix the bug", "fix the bug"},
		{"two\nlines", "two lines", "two\nlines"},
		{"crlf\r\nline", "crlf line", "crlf\nline"},
		{"lone\rcr", "lone cr", "lone\ncr"},
		{"esc\x1b[201~ends a paste", "esc[201~ends a paste", "esc[201~ends a paste"},
		{"bell\x07 del\x7f ^C\x03", "bell del ^C", "bell del ^C"},
		{"c1 \u0085next \u009bcsi", "c1 next csi", "c1 next csi"},
		{"ünïcödé ✓ \u00a0nbsp", "ünïcödé ✓ \u00a0nbsp", "ünïcödé ✓ \u00a0nbsp"},
		{"bad \xff\xfe utf8", "bad \xff\xfe utf8", "bad \xff\xfe utf8"},
		{"\xc2", "\xc2", "\xc2"},
	}
	for _, tt := range tests {
		if got := Line(tt.in); got != tt.line {
			t.Errorf("Line(%q) = %q, want %q", tt.in, got, tt.line)
		}
		if got := Text(tt.in); got != tt.text {
			t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.text)
		}
	}
}

// No output of either holds a control character but Text's newlines,
// whatever the input: every byte value at every place.
func TestNoControlSurvives(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, in := range []string{string(rune(c)), string([]byte{byte(c)}), "a" + string([]byte{byte(c)}) + "b", "\xc2" + string([]byte{byte(c)})} {
			for _, out := range []string{Line(in), Text(in)} {
				for _, r := range out {
					if r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r <= 0x9f {
						t.Fatalf("input %q gave %q, which holds %U", in, out, r)
					}
				}
			}
			if strings.Contains(Line(in), "\n") {
				t.Fatalf("Line(%q) kept a newline", in)
			}
			if utf8.ValidString(in) && !utf8.ValidString(Line(in)) {
				t.Fatalf("Line(%q) broke valid UTF-8", in)
			}
		}
	}
}

// What comes out can go into a child's environment: exec refuses a NUL.
func TestLineGoesIntoAnEnvironment(t *testing.T) {
	title := "a title\x00with NUL\nand a newline"
	cmd := exec.Command("sh", "-c", `printf %s "$T"`)
	cmd.Env = []string{"T=" + title}
	if err := cmd.Run(); err == nil {
		t.Fatal("exec took an environment with a NUL: the test is moot")
	}
	cmd = exec.Command("sh", "-c", `printf %s "$T"`)
	cmd.Env = []string{"T=" + Line(title)}
	out, err := cmd.Output()
	if err != nil || string(out) != "a titlewith NUL and a newline" {
		t.Fatalf("run with Line's value: %q, %v", out, err)
	}
}

func BenchmarkLinePlain(b *testing.B) {
	s := strings.Repeat("a plain session title ", 4)
	for i := 0; i < b.N; i++ {
		_ = Line(s)
	}
}
