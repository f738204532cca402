package opencode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Bad data read around is named as a warning, never an error: an empty
// database left lying around (a fresh one is OpenCode creating it: not
// named), an unparseable legacy session file beside a good one.
func TestWarningsNameBadData(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "opencode.db")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sess := filepath.Join(dir, "storage", "session", "prj_1")
	if err := os.MkdirAll(sess, 0o700); err != nil {
		t.Fatal(err)
	}
	good := `{"id":"ses_good","directory":"/w","title":"t","time":{"created":1750000000000,"updated":1750000000000}}`
	os.WriteFile(filepath.Join(sess, "ses_good.json"), []byte(good), 0o600)
	bad := filepath.Join(sess, "ses_bad.json")
	os.WriteFile(bad, []byte(`{"id":"ses_bad","time":{"created":"yesterday"}}`), 0o600)

	a := newTestAdapter(t, dir, nil)
	obs := discover(t, a)
	if len(obs.Errors) != 0 || obs.Len() != 1 || obs.All()[0].UpstreamID != "ses_good" {
		t.Fatalf("errors %v, sessions %+v", obs.Errors, obs.All())
	}
	if len(obs.Warnings) != 1 || obs.Warnings[0].Input != bad || !strings.Contains(obs.Warnings[0].Err.Error(), "legacy session skipped") {
		t.Fatalf("warnings with a fresh empty database: %v", obs.Warnings)
	}

	old := time.Now().Add(-time.Hour)
	os.Chtimes(empty, old, old)
	os.Remove(bad)
	obs = discover(t, a)
	if len(obs.Errors) != 0 || len(obs.Warnings) != 1 || obs.Warnings[0].Input != empty || !strings.Contains(obs.Warnings[0].Err.Error(), "no tables") {
		t.Fatalf("an old empty database: errors %v, warnings %v", obs.Errors, obs.Warnings)
	}
}
