package tailbuf

import "testing"

func TestKeepsTheEnd(t *testing.T) {
	b := &Buffer{Max: 5}
	for _, s := range []string{"abc", "defg", "h"} {
		if n, err := b.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write(%q) = %d, %v", s, n, err)
		}
	}
	if got := b.String(); got != "defgh" {
		t.Errorf("kept %q, want %q", got, "defgh")
	}
}

func TestLastLine(t *testing.T) {
	b := &Buffer{Max: 64}
	b.Write([]byte("first\nConnection closed by remote host.\n\n  "))
	if got := b.LastLine(); got != "Connection closed by remote host." {
		t.Errorf("LastLine = %q", got)
	}
	b.Write([]byte("no newline yet"))
	if got := b.LastLine(); got != "no newline yet" {
		t.Errorf("LastLine = %q", got)
	}
	if got := (&Buffer{Max: 8}).LastLine(); got != "" {
		t.Errorf("empty: %q", got)
	}
}
