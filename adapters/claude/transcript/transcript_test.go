package transcript

import (
	"bufio"
	"bytes"
	"regexp"
	"testing"
)

// readLine survives lines far past bufio.Scanner's 64 KB default.
func TestReadLineCap(t *testing.T) {
	long := bytes.Repeat([]byte("y"), 1<<20)
	in := append(append([]byte("short\n"), long...), []byte("\nafter\npartial")...)
	br := bufio.NewReaderSize(bytes.NewReader(in), 4096)
	type got struct {
		s        string
		tooLong  bool
		complete bool
	}
	var out []got
	for {
		l, _, tl, c, err := readLine(br, 1000, nil)
		out = append(out, got{string(l), tl, c})
		if err != nil {
			break
		}
	}
	want := []got{{"short", false, true}, {"", true, true}, {"after", false, true}, {"partial", false, false}}
	if len(out) != len(want) {
		t.Fatalf("got %+v", out)
	}
	for i := range want {
		if out[i] != want[i] {
			t.Fatalf("line %d: got %+v want %+v", i, out[i], want[i])
		}
	}
}

// transcriptName is what IsName checks by hand: <uuid>.jsonl.
var transcriptName = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.jsonl$`)

// IsName is a hand-written transcriptName: they agree.
func FuzzIsTranscriptName(f *testing.F) {
	for _, s := range []string{"3f2a9c1e-1234-4abc-8def-0123456789ab.jsonl", "3F2A9C1E-1234-4ABC-8DEF-0123456789AB.jsonl",
		"agent-3f2a9c1e.jsonl", "3f2a9c1e-1234-4abc-8def-0123456789ab.json", "3f2a9c1e_1234-4abc-8def-0123456789ab.jsonl",
		"3f2a9c1e-1234-4abc-8def-0123456789ag.jsonl", "", ".jsonl"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := IsName(name), transcriptName.MatchString(name); got != want {
			t.Fatalf("IsName(%q) = %v, the pattern says %v", name, got, want)
		}
	})
}
