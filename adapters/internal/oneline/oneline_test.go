package oneline

import "testing"

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
