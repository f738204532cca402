package opencode

import (
	"strings"
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

// FuzzCommandLine: no command line of another process makes the opencode
// argv readers panic; a parsed port is a valid port.
func FuzzCommandLine(f *testing.F) {
	for _, argv := range []string{
		"opencode\x00run\x00--session\x00ses_5d1f0a9b2ffeAbCdEfGhIjKlMn\x00fix the test\x00",
		"/usr/local/bin/opencode\x00serve\x00--port=4096\x00--hostname\x00127.0.0.1\x00",
		"node\x00/home/u/.npm/bin/opencode\x00/home/u/src/api\x00-c\x00",
		"bun\x00opencode.js\x00run\x00--dir\x00/w\x00--fork\x00-s\x00ses_x\x00",
		"opencode\x00--port\x0099999\x00",
		"opencode\x00attach\x00http://localhost:4096\x00",
		"opencode\x00--\x00--port\x001\x00",
		"\x00\xff",
	} {
		f.Add([]byte(argv))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		args, _, ok := commandLine(argv)
		if !ok {
			args = argv
		}
		a := parseArgs(args)
		if a.Port < 0 || a.Port > 65535 || (a.Port != 0 && !a.PortSet) {
			t.Fatalf("port %d (set %v) from %q", a.Port, a.PortSet, argv)
		}
	})
}

// FuzzMaybeInFlight: the Go filter of the whole-table scan says what
// inFlightFilter's two instr() calls say, for any data.
func FuzzMaybeInFlight(f *testing.F) {
	for _, s := range []string{
		`{"type":"tool","state":{"status":"running","input":{}}}`,
		`{"type":"tool","state":{"status":"pending"}}`,
		`{"type":"tool","state":{"status":"completed","output":"\"status\":\"running\""}}`,
		`{"xstatus":"running"}`,
		`status":"running"`,
		`"status":"status":"pending"`,
		`"status":"runnin`,
		`{"text":"ünïcødé","status":"pending"}`,
		``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := strings.Contains(s, `"status":"running"`) || strings.Contains(s, `"status":"pending"`)
		if got := maybeInFlight(s); got != want {
			t.Fatalf("maybeInFlight(%q) = %v, instr says %v", s, got, want)
		}
	})
}
