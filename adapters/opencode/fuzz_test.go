package opencode

import (
	"testing"
	"time"
)

// FuzzParseLegacySession: no legacy storage session file (OpenCode up to
// 1.1.x, storage/session/<project>/<id>.json) makes the parser panic; an
// accepted one always has an id and sane times.
func FuzzParseLegacySession(f *testing.F) {
	for _, s := range []string{
		`{"id":"ses_5d1f0a9b2ffeAbCdEfGhIjKlMn","projectID":"4b0ea68d7af9a6031a7ffda7ad66e0cb83315750","directory":"/home/u/src/api","title":"Fix the flaky test","version":"1.1.8","time":{"created":1750000000123,"updated":1750000456789}}`,
		`{"id":"ses_child","parentID":"ses_parent","directory":"/w","title":"subagent","time":{"created":1.75e12,"updated":null,"archived":1750000999000}}`,
		`{"id":"ses_x","time":{"created":"yesterday"}}`,
		`{"id":"","directory":"/w"}`,
		`{"id":"ses_trunc","projectID":"4b0e`,
		`{"id":"ses_a"}{"id":"ses_b"}`,
		"\x00\x01\xff{\"id\":",
		`{"id":"ses_y","time":{"created":1e300,"updated":-5}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseLegacySession(b)
		if err != nil {
			return
		}
		if s.ID == "" {
			t.Fatal("accepted a session without an id")
		}
		for _, tm := range []time.Time{s.Time.Created.t, s.Time.Updated.t, s.Time.Archived.t} {
			if !tm.IsZero() && (tm.Year() < 1970 || tm.Year() > 9999) {
				t.Fatalf("time out of range: %v", tm)
			}
		}
	})
}
