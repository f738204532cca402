package opencode

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// Resume and fork run in the session's own directory; a fork into another
// one is refused, as OpenCode would run it in the old directory anyway and
// its `run` would never exit.
func TestResumeCommandDirectory(t *testing.T) {
	dir := t.TempDir()
	proj, other := filepath.Join(dir, "proj"), filepath.Join(dir, "other")
	os.Mkdir(proj, 0o755)
	os.Mkdir(other, 0o755)
	os.Symlink(proj, filepath.Join(dir, "link"))
	a := New(Config{DataDir: filepath.Join(dir, "opencode"), Binary: "/bin/opencode"})
	cur := session.ResumeCursor{SchemaVersion: 1, Agent: "opencode", UpstreamID: "ses_abc", Cwd: proj, Root: a.cfg.DataDir}

	for _, tc := range []struct {
		name     string
		cwd      string
		fork     bool
		wantArgs []string
	}{
		{"continue", "", false, []string{"/bin/opencode", "run", "--format", "json", "-s", "ses_abc", "again"}},
		{"continue same dir", proj, false, []string{"/bin/opencode", "run", "--format", "json", "-s", "ses_abc", "again"}},
		{"fork via symlink", filepath.Join(dir, "link"), true, []string{"/bin/opencode", "run", "--format", "json", "-s", "ses_abc", "--fork", "again"}},
	} {
		cmd, err := a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: tc.cwd, Prompt: "again"}, tc.fork)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if cmd.Cwd != proj || !slices.Equal(cmd.Argv, tc.wantArgs) {
			t.Errorf("%s: cwd %s argv %q", tc.name, cmd.Cwd, cmd.Argv)
		}
		if tc.fork != (cmd.UpstreamID == "") {
			t.Errorf("%s: upstream id %q (a fork learns its id from the output)", tc.name, cmd.UpstreamID)
		}
	}
	_, err := a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: other, Prompt: "x"}, true)
	if err == nil || !strings.Contains(err.Error(), "cannot move session ses_abc") || !strings.Contains(err.Error(), proj) {
		t.Fatalf("fork into another directory: %v", err)
	}
}
