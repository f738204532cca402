package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
}

func fileLines(path string) []string {
	b, _ := os.ReadFile(path)
	s := strings.TrimSpace(string(b))
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestHooksDirAndNotify: with --notify and executables in the default
// hooks directory, a real sessiond runs each hook on each status or
// activity change of a Claude session, with the change on stdin and in
// SESSIOND_* variables and its own socket, so a hook's sessionctl reaches
// it; a hook that hangs is killed at --hook-timeout and named in health
// while the daemon goes on; notify-send is run when the session starts
// waiting and when it is interrupted.
func TestHooksDirAndNotify(t *testing.T) {
	e := newEnv(t)
	out := filepath.Join(e.Dir, "out")
	os.MkdirAll(out, 0o700)
	hooks := filepath.Join(e.Home, ".config", "sessiond", "hooks.d")
	writeScript(t, filepath.Join(hooks, "10-record"), fmt.Sprintf(`cat > %[1]s/last.json
%[2]s show "$SESSIOND_ID" --json > %[1]s/show.json 2>&1 || echo "sessionctl failed: $?" >> %[1]s/changes
echo "$SESSIOND_EVENT $SESSIOND_STATUS $SESSIOND_ACTIVITY $SESSIOND_WAITING_FOR" >> %[1]s/changes
`, out, e.Sessionctl))
	writeScript(t, filepath.Join(hooks, "20-hang"), "cat >/dev/null\nsleep 300\n")
	bin := filepath.Join(e.Dir, "bin")
	writeScript(t, filepath.Join(bin, "notify-send"), fmt.Sprintf(`shift 2; echo "$1 | $2" >> %s/notified`+"\n", out))
	e.Extra = append(e.Extra, "PATH="+bin+":"+os.Getenv("PATH"))

	root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
	cwd := filepath.Join(e.Home, "proj")
	os.MkdirAll(cwd, 0o755)
	id := claudetest.NewSessionID()
	owner, _ := daemontest.StartOwner(t)
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
	tr.CrashMidTool("run the tests", "make test")
	root.WriteTranscript(t, tr)
	entry := claudetest.LiveEntry(t, owner.Process.Pid, id, cwd, "busy")
	root.WriteRegistry(t, entry)

	d := e.StartDaemon("--notify", "--hook-timeout", "400ms")
	s := e.Show(id[:8])
	if s.Status != session.StatusRunning || s.Activity != session.ActivityBusy {
		t.Fatalf("start: %s/%s (%s)", s.Status, s.Activity, s.StatusReason)
	}
	// Claude asks for a permission: its registry says so.
	entry.Status, entry.WaitingFor = "waiting", "permission prompt"
	entry.StatusUpdatedAt = time.Now().UnixMilli()
	root.WriteRegistry(t, entry)
	testenv.EventuallyOK(t, 5*time.Second, "the waiting change reaches 10-record", func() (bool, string) {
		l := fileLines(filepath.Join(out, "changes"))
		return len(l) >= 1 && strings.HasPrefix(l[len(l)-1], "activity running waiting"), strings.Join(l, "; ")
	})
	// The hook's sessionctl reached this sessiond through SESSIOND_SOCKET.
	var shown api.Session
	b, _ := os.ReadFile(filepath.Join(out, "show.json"))
	if err := json.Unmarshal(b, &shown); err != nil || shown.ID != s.ID {
		t.Errorf("the hook's sessionctl show: %v: %s", err, b)
	}

	killed := time.Now()
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	testenv.EventuallyOK(t, 5*time.Second, "the interrupted change reaches 10-record", func() (bool, string) {
		l := fileLines(filepath.Join(out, "changes"))
		return len(l) >= 2 && strings.HasPrefix(l[len(l)-1], "status interrupted"), strings.Join(l, "; ")
	})
	t.Logf("hook ran %s after kill -9", time.Since(killed).Round(time.Millisecond))
	var c struct {
		Kind      string `json:"kind"`
		SessionID string `json:"session_id"`
		Status    string `json:"status"`
		Previous  *struct{ Status, Activity string }
		Session   *api.Session `json:"session"`
	}
	b, _ = os.ReadFile(filepath.Join(out, "last.json"))
	if err := json.Unmarshal(b, &c); err != nil || c.Kind != "status" || c.SessionID != s.ID || c.Status != "interrupted" ||
		c.Previous == nil || c.Previous.Status != "running" || c.Session == nil || c.Session.Cwd != cwd {
		t.Errorf("the change on stdin: %v: %s", err, b)
	}

	// 20-hang ran for both changes, each killed at 400 ms; health names it.
	var h api.Health
	testenv.EventuallyOK(t, 10*time.Second, "20-hang failed twice", func() (bool, string) {
		e.CtlJSON(&h, "health")
		for _, hk := range h.Reactions.Hooks {
			if hk.Name == "20-hang" {
				return hk.Failures >= 2, fmt.Sprintf("%+v", hk)
			}
		}
		return false, fmt.Sprintf("%+v", h.Reactions)
	})
	text, _, code := e.Ctl("health")
	t.Logf("sessionctl health:\n%s", text)
	if code != 0 || !strings.Contains(text, "hook 20-hang:") || !strings.Contains(text, "FAILING: killed at its limit of 400ms") ||
		!strings.Contains(text, "notify:") || !strings.Contains(text, "notify-send") {
		t.Errorf("health (exit %d):\n%s", code, text)
	}
	select {
	case <-d.Done:
		t.Fatalf("sessiond exited: %v", d.Err)
	default:
	}

	notes := fileLines(filepath.Join(out, "notified"))
	want := []string{"needs you | Permission to use a tool", "was interrupted | owner pid"}
	if len(notes) != 2 || !strings.Contains(notes[0], want[0]) || !strings.Contains(notes[1], want[1]) {
		t.Errorf("notifications:\n%s\nwant lines containing %q", strings.Join(notes, "\n"), want)
	}
}
