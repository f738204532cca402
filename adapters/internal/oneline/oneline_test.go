package oneline

import (
	"strings"
	"testing"
)

func TestCut(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"deploy  to\nstaging", 40, "deploy to staging"},
		{"héllo wörld", 5, "héll…"},
		{"exact", 5, "exact"},
		{"anything", 0, ""},
	} {
		if got := Cut(c.in, c.n); got != c.want {
			t.Errorf("Cut(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestArgv(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{nil, "?"},
		{[]string{"/usr/bin/make"}, "make"},
		{[]string{"/bin/bash", "-c", "sleep  100\necho"}, "bash -c sleep 100 echo"},
		{[]string{"x", strings.Repeat("a", 200)}, "x " + strings.Repeat("a", 97) + "…"},
	} {
		if got := Argv(c.argv); got != c.want {
			t.Errorf("Argv(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
	if OrUnknown("") != "?" || OrUnknown("/w") != "/w" {
		t.Errorf("OrUnknown: %q, %q", OrUnknown(""), OrUnknown("/w"))
	}
}
