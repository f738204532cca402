package paths

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSameDir(t *testing.T) {
	d := t.TempDir()
	real := filepath.Join(d, "real")
	other := filepath.Join(d, "other")
	link := filepath.Join(d, "link")
	for _, p := range []string{real, other} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{real, real + "/", true},
		{real, link, true},
		{real, other, false},
		{"/nonexistent/x", "/nonexistent/x/.", true},
		{"/nonexistent/x", "/nonexistent/y", false},
	} {
		if got := SameDir(c.a, c.b); got != c.want {
			t.Errorf("SameDir(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
