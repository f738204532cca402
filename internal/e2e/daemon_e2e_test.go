// Package e2e drives the built sessiond and sessionctl binaries as a user
// would: real processes, a real socket, a real store, kill -9 included.
package e2e

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
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
	"github.com/sessiond/sessiond/state"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.Cleanup()
	os.Exit(code)
}

// env is one test's world (see daemontest.Env) with this package's helpers.
type env struct{ *daemontest.Env }

func newEnv(t *testing.T) *env { return &env{daemontest.NewEnv(t)} }

// The daemon's whole life as a user sees it: sessions survive its kill -9,
// a stale socket is replaced, a second daemon is refused with its own exit
// code, and SIGTERM stops it cleanly within a second.
func TestDaemonLifecycle(t *testing.T) {
	e := newEnv(t)
	owner, id := daemontest.StartOwner(t)
	e.Seed(&session.Record{ID: "5e55000000aa", Agent: "claude", UpstreamID: "11111111-2222-4333-8444-555555555555",
		Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &id, Cwd: filepath.Join(e.Home, "proj"), CreatedAt: time.Now()})

	d := e.StartDaemon()
	s := e.Show("5e55")
	if s.Status != session.StatusRunning || s.PID != id.PID {
		t.Fatalf("before the crash: %s pid %d", s.Status, s.PID)
	}
	out, _, code := e.Ctl("ls")
	if code != 0 || !strings.Contains(out, "5e55000000aa") || !strings.Contains(out, "~/proj") || !strings.HasPrefix(out, "ID") {
		t.Fatalf("ls (exit %d):\n%s", code, out)
	}

	// kill -9: the socket file stays behind.
	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.Done
	if _, err := os.Stat(e.Socket); err != nil {
		t.Fatalf("expected a stale socket after kill -9: %v", err)
	}
	_, errs, code := e.Ctl("ls")
	if code != 3 || !strings.Contains(errs, "not reachable") || !strings.Contains(errs, "start it") {
		t.Fatalf("ls with the daemon dead: exit %d: %s", code, errs)
	}

	d = e.StartDaemon()
	s = e.Show("11111111-2222")
	if s.ID != "5e55000000aa" || s.Status != session.StatusRunning {
		t.Fatalf("after restart: %+v", s)
	}

	// A second daemon on the same state dir exits at once with code 17.
	second := exec.Command(e.Sessiond)
	second.Env = e.Environ()
	outb, err := second.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 17 || !strings.Contains(string(outb), "another sessiond is already running") {
		t.Fatalf("second daemon: %v\n%s", err, outb)
	}

	// The owner dies: the daemon notices by its exit event.
	owner.Process.Kill()
	owner.Wait()
	testenv.EventuallyOK(t, 3*time.Second, "session 5e55 stopped once its owner was killed", func() (bool, string) {
		s := e.Show("5e55")
		return s.Status == session.StatusStopped, string(s.Status)
	})

	// Usage and not-found exit codes.
	if _, _, code := e.Ctl("show"); code != 2 {
		t.Errorf("show without id: exit %d, want 2", code)
	}
	if _, _, code := e.Ctl("show", "nope"); code != 4 {
		t.Errorf("show unknown: exit %d, want 4", code)
	}
	if _, _, code := e.Ctl("ls", "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}

	// SIGTERM: exit 0 within a second, store closed.
	start := time.Now()
	d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.Done:
		if d.Err != nil {
			t.Fatalf("SIGTERM exit: %v\n%s", d.Err, d.Stderr.String())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("sessiond still running 3s after SIGTERM")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("SIGTERM took %s, want under 1s", took)
	}
	st, err := state.Open(filepath.Join(e.StateDir, "sessiond.db"), state.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("store still locked after SIGTERM: %v", err)
	}
	st.Close()
}

// A client of another uid is refused by the peer-credential check itself:
// the test opens the socket's permissions so that only the uid check stands.
func TestOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a client as another user (nobody); run the tests as root to cover SO_PEERCRED")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv (util-linux) not installed: cannot run a client as nobody")
	}
	e := newEnv(t)
	e.StartDaemon()
	for _, p := range []string{e.Dir, filepath.Dir(e.Socket), filepath.Dir(e.Sessionctl)} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(e.Socket, 0o666)
	_, errs, code := e.CtlAs([]string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, "ls")
	if code == 0 || !strings.Contains(errs, "serves only its own user") {
		t.Fatalf("client as nobody: exit %d: %s", code, errs)
	}
	if _, _, code := e.Ctl("ls"); code != 0 {
		t.Fatalf("own user refused: exit %d", code)
	}
}

// sessionctl events --follow prints events as they are committed.
func TestEventsFollow(t *testing.T) {
	e := newEnv(t)
	owner, id := daemontest.StartOwner(t)
	e.Seed(&session.Record{ID: "f011000000aa", Agent: "claude", UpstreamID: "u-follow", Status: session.StatusRunning, Owner: &id, CreatedAt: time.Now()})
	e.StartDaemon()
	cmd := exec.Command(e.Sessionctl, "events", "--follow", "--json")
	cmd.Env = e.Environ()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		var buf strings.Builder
		for sc.Scan() {
			buf.WriteString(sc.Text())
			if sc.Text() == "}" {
				lines <- buf.String()
				buf.Reset()
			}
		}
		close(lines)
	}()
	owner.Process.Kill()
	owner.Wait()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("events stream ended")
			}
			var ev api.Event
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("event line: %v: %s", err, l)
			}
			if ev.SessionID == "f011000000aa" && ev.To == session.StatusStopped {
				return
			}
		case <-timeout:
			t.Fatal("no stopped event within 5s of the kill")
		}
	}
}

// A Claude Code session started outside sessiond is discovered from its
// registry entry and transcript, is running and busy while its owner lives,
// and within a second of the owner's kill -9 is interrupted with the
// orphaned tool call, the stale busy marker and the orphaned tool process.
func TestClaudeSessionKilledMidTool(t *testing.T) {
	e := newEnv(t)
	root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
	cwd := filepath.Join(e.Home, "proj")
	os.MkdirAll(cwd, 0o755)
	id := claudetest.NewSessionID()
	owner, _ := daemontest.StartOwner(t)
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
	toolID := tr.CrashMidTool("run the tests", "python3 -c 'import time; time.sleep(300)'")
	root.WriteTranscript(t, tr)
	root.WriteRegistry(t, claudetest.LiveEntry(t, owner.Process.Pid, id, cwd, "busy"))
	// The tool's process: a child that names its owner and session, as
	// Claude Code 2.1.328 sets in its tools' environment.
	tool := exec.Command("sleep", "300")
	tool.Env = append(os.Environ(), "CLAUDECODE=1", fmt.Sprintf("CLAUDE_PID=%d", owner.Process.Pid), "CLAUDE_CODE_SESSION_ID="+id)
	if err := tool.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tool.Process.Kill(); tool.Wait() })

	e.StartDaemon()
	s := e.Show(id[:8])
	if s.Status != session.StatusRunning || s.Activity != session.ActivityBusy || s.PID != owner.Process.Pid || s.Cwd != cwd {
		t.Fatalf("live: %s/%s pid %d cwd %s (%s)", s.Status, s.Activity, s.PID, s.Cwd, s.StatusReason)
	}
	killed := time.Now()
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	testenv.EventuallyOK(t, 3*time.Second, "interrupted after kill -9", func() (bool, string) {
		s = e.Show(id)
		return s.Status == session.StatusInterrupted, fmt.Sprintf("%s (%s)", s.Status, s.StatusReason)
	})
	t.Logf("interrupted %s after kill -9", time.Since(killed).Round(time.Millisecond))
	kinds := map[session.ProblemKind]string{}
	for _, p := range s.Problems {
		kinds[p.Kind] += p.Key + " "
	}
	if !strings.Contains(kinds[session.ProblemOrphanedToolCall], toolID) {
		t.Errorf("orphaned_tool_call missing %s: %+v", toolID, s.Problems)
	}
	if _, ok := kinds[session.ProblemStaleBusyMarker]; !ok {
		t.Errorf("stale_busy_marker missing: %+v", s.Problems)
	}
	// Orphans are found on the next pass's snapshot.
	testenv.EventuallyOK(t, 3*time.Second, fmt.Sprintf("orphan_processes naming pid %d", tool.Process.Pid), func() (bool, string) {
		s = e.Show(id)
		orphans := ""
		for _, p := range s.Problems {
			if p.Kind == session.ProblemOrphanProcesses {
				orphans += p.Key + " "
			}
		}
		return strings.Contains(orphans, fmt.Sprint(tool.Process.Pid)), fmt.Sprintf("%+v", s.Problems)
	})
	out, _, _ := e.Ctl("ls")
	if !strings.Contains(out, "interrupted") || !strings.Contains(out, "orphaned_tool_call") {
		t.Errorf("ls:\n%s", out)
	}
}
