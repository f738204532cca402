package e2e

import (
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/session"
)

func fakeOpenCode(t *testing.T) string {
	t.Helper()
	return daemontest.Binaries(t).FakeOpenCode
}

func (e *env) opencodeDB() string {
	return filepath.Join(e.Home, ".local", "share", "opencode", "opencode.db")
}

func countMessages(t *testing.T, db, sessionID string) int {
	t.Helper()
	h, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	var n int
	if err := h.QueryRow(`SELECT count(*) FROM message WHERE session_id = ?`, sessionID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// OpenCode picks its session id itself: the launch answers before it is
// known, the record is linked to the ses_ id from the agent's output, the
// cursor is written once the database shows the session, and a resume
// continues the same ses_ id with new messages.
func TestLaunchAndResumeOpenCode(t *testing.T) {
	e, proj := launchEnv(t)
	argvPath := filepath.Join(e.Dir, "argv.log")
	os.Setenv("FAKE_AGENT_ARGV_LOG", argvPath)
	defer os.Unsetenv("FAKE_AGENT_ARGV_LOG")
	e.StartDaemon("--opencode-bin", fakeOpenCode(t))

	r, errs, code := e.launchJSON("launch", "--agent", "opencode", "--cwd", proj, "--prompt", "list the files")
	if code != 0 {
		t.Fatalf("launch: exit %d: %s", code, errs)
	}
	if r.Session.UpstreamID != "" {
		t.Fatalf("the launch answer made up an upstream id: %q", r.Session.UpstreamID)
	}
	s := e.waitCursor(r.Session.ID)
	if !strings.HasPrefix(s.UpstreamID, "ses_") || s.Resume.UpstreamID != s.UpstreamID || s.Resume.Root != filepath.Dir(e.opencodeDB()) {
		t.Fatalf("linked %q, cursor %+v", s.UpstreamID, s.Resume)
	}
	e.waitStatus(s.ID, session.StatusStopped, 5*time.Second)
	// One record for the session: linking never duplicates it.
	out, _, _ := e.Ctl("ls", "--all", "--json")
	var list api.SessionList
	json.Unmarshal([]byte(out), &list)
	if len(list.Sessions) != 1 {
		t.Fatalf("%d records for one launched session:\n%s", len(list.Sessions), out)
	}
	before := countMessages(t, e.opencodeDB(), s.UpstreamID)

	r2, errs, code := e.launchJSON("resume", s.ID, "--prompt", "and the tests")
	if code != 0 || r2.Session.ID != s.ID || r2.Session.UpstreamID != s.UpstreamID || r2.Fresh {
		t.Fatalf("resume: exit %d %s %+v", code, errs, r2)
	}
	e.waitStatus(s.ID, session.StatusStopped, 5*time.Second)
	if after := countMessages(t, e.opencodeDB(), s.UpstreamID); after <= before {
		t.Fatalf("the same session got no new messages: %d -> %d", before, after)
	}
	argvs := argvLog(t, argvPath)
	if len(argvs) != 2 || !strings.Contains(strings.Join(argvs[1], " "), "run --format json -s "+s.UpstreamID) {
		t.Fatalf("argv of the resume: %v", argvs)
	}

	// A fork gets its own ses_ id, in the session's own directory.
	f, errs, code := e.launchJSON("resume", s.ID, "--fork", "--prompt", "try another way")
	if code != 0 || !f.Forked || f.Session.ID == s.ID || f.Session.Cwd != proj {
		t.Fatalf("fork: exit %d %s %+v", code, errs, f)
	}
	fs := e.waitCursor(f.Session.ID)
	if fs.UpstreamID == s.UpstreamID || !strings.HasPrefix(fs.UpstreamID, "ses_") {
		t.Fatalf("the fork's upstream id %q (original %q)", fs.UpstreamID, s.UpstreamID)
	}
	e.waitStatus(f.Session.ID, session.StatusStopped, 5*time.Second)
	// OpenCode cannot move a session: a fork elsewhere is refused, nothing runs.
	other := filepath.Join(e.Home, "other")
	os.MkdirAll(other, 0o755)
	if _, errs, code := e.Ctl("resume", s.ID, "--cwd", other, "--prompt", "x"); code != 1 || !strings.Contains(errs, "cannot move session") {
		t.Fatalf("fork into another directory: exit %d: %s", code, errs)
	}
	if n := len(argvLog(t, argvPath)); n != 3 {
		t.Fatalf("%d agent runs, want 3 (launch, resume, fork)", n)
	}

	// The row is gone (deleted in OpenCode): confirmed missing, fresh start.
	h, _ := sql.Open("sqlite", "file:"+e.opencodeDB()+"?_pragma=busy_timeout(5000)")
	if _, err := h.Exec(`DELETE FROM session WHERE id = ?`, s.UpstreamID); err != nil {
		t.Fatal(err)
	}
	h.Close()
	fr, errs, code := e.launchJSON("resume", s.ID, "--prompt", "start over")
	if code != 0 || !fr.Fresh || fr.Session.ID != s.ID {
		t.Fatalf("resume of a deleted session: exit %d %s %+v", code, errs, fr)
	}
}

// A launched opencode run killed mid tool is interrupted with the
// incomplete message and the orphaned tool call.
func TestOpenCodeKilledMidTool(t *testing.T) {
	e, proj := launchEnv(t)
	e.StartDaemon("--opencode-bin", fakeOpenCode(t), "--grace", "2s")
	r, errs, code := e.launchJSON("launch", "--agent", "opencode", "--cwd", proj, "--prompt", "run the tests", "--env", "FAKE_OPENCODE_TOOL_SLEEP=300")
	if code != 0 {
		t.Fatalf("launch: %d %s", code, errs)
	}
	t.Cleanup(func() { syscall.Kill(-r.Session.PID, syscall.SIGKILL) })
	s := e.waitCursor(r.Session.ID)
	s = e.waitStatus(s.ID, session.StatusRunning, 5*time.Second)
	if s.Activity != session.ActivityBusy {
		t.Errorf("activity %s while the tool runs", s.Activity)
	}
	killed := time.Now()
	syscall.Kill(r.Session.PID, syscall.SIGKILL)
	s = e.waitStatus(s.ID, session.StatusInterrupted, 3*time.Second)
	t.Logf("interrupted %s after kill -9", time.Since(killed).Round(time.Millisecond))
	if s.Problem(session.ProblemIncompleteMessage) == nil || s.Problem(session.ProblemOrphanedToolCall) == nil {
		t.Fatalf("problems %+v", s.Problems)
	}
}
