package shell

import (
	"os/exec"
	"testing"
)

// What sh reads back from a quoted word is the word.
func TestQuoteRoundTrip(t *testing.T) {
	for _, s := range []string{"plain/path-1.2", "", "with space", "it's", `a"b`, "$HOME", "a\nb", "*", "~x", "a;b&c|d"} {
		out, err := exec.Command("sh", "-c", "printf %s "+Quote(s)).Output()
		if err != nil {
			t.Fatal(err)
		}
		if string(out) != s {
			t.Errorf("Quote(%q) = %s: sh read %q", s, Quote(s), out)
		}
	}
	if Quote("/usr/bin/x") != "/usr/bin/x" {
		t.Errorf("a plain path is quoted: %s", Quote("/usr/bin/x"))
	}
}
