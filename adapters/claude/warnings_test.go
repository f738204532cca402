package claude

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

func warning(obs adapters.Observation, path string) string {
	for _, w := range obs.Warnings {
		if w.Input == path {
			return w.Err.Error()
		}
	}
	return ""
}

// Bad data that was read around is named as a warning, never an error, and
// the warning goes when the data is fixed: corrupt lines (also arriving in
// an append), a registry entry that stays unparseable past the racy
// window, a symlink in projects/.
func TestWarningsNameBadData(t *testing.T) {
	dir := t.TempDir()
	root := claudetest.NewRoot(t, filepath.Join(dir, ".claude"))
	a := newTestAdapter(t, &testFS{}, root.Dir)
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/w", time.Now().Add(-time.Hour))
	tr.Turn("hello", "ls", "a", "done")
	path := root.WriteTranscript(t, tr)
	reg := filepath.Join(root.SessionsDir(), "777.json")
	if err := os.WriteFile(reg, []byte(`{"pid":777,"sessionId":`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root.Dir, "projects", "-elsewhere")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}

	obs := discover(t, a, nil)
	if len(obs.Errors) != 0 {
		t.Fatalf("errors: %v", obs.Errors)
	}
	if w := warning(obs, path); w != "" {
		t.Fatalf("good transcript warned: %s", w)
	}
	if w := warning(obs, reg); w != "" {
		t.Fatalf("a registry entry written just now (maybe mid-write) warned: %s", w)
	}
	if w := warning(obs, link); !strings.Contains(w, "symbolic link, not followed") {
		t.Fatalf("symlink: %q", w)
	}

	// A torn line and a good one appended; the registry entry stays bad.
	next := claudetest.NewTranscript(tr.SessionID, "/w", time.Now())
	next.User("again")
	line := next.Lines()[0]
	claudetest.Append(t, path, line[:len(line)/2], line)
	old := time.Now().Add(-time.Minute)
	os.Chtimes(reg, old, old)
	obs = discover(t, a, nil)
	if w := warning(obs, path); w != "transcript: 1 corrupt line skipped" {
		t.Fatalf("after a torn append: %q", w)
	}
	if w := warning(obs, reg); !strings.Contains(w, "registry entry skipped") {
		t.Fatalf("bad registry entry: %q", w)
	}
	if len(obs.Errors) != 0 || mustFind(t, obs, tr.SessionID) == nil {
		t.Fatalf("errors %v", obs.Errors)
	}

	// Fixed: rewritten whole, the entry replaced, the link gone.
	root.WriteTranscript(t, tr)
	root.WriteRegistry(t, claudetest.NewEntry(777, "1", "", tr.SessionID, "/w", "idle", time.Now()))
	os.Remove(link)
	obs = discover(t, a, nil)
	if len(obs.Warnings) != 0 {
		t.Fatalf("warnings after the fix: %v", obs.Warnings)
	}
}
