// Package e2e drives the built sessiond and sessionctl binaries as a user
// would: real processes, a real socket, a real store, kill -9 included.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds sessiond and sessionctl once per test run.
func binaries(t *testing.T) (sessiond, sessionctl string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "sessiond-e2e-bin")
		if buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir, "../../cmd/sessiond", "../../cmd/sessionctl", "../testkit/fakeagents/fakeclaude")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		// The fake OpenCode must be named opencode: the adapter knows its
		// processes by name.
		cmd = exec.Command("go", "build", "-o", filepath.Join(binDir, "oc", "opencode"), "../testkit/fakeagents/fakeopencode")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build fakeopencode: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "sessiond"), filepath.Join(binDir, "sessionctl")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// env is one test's world: its own HOME, state dir and a short socket path.
type env struct {
	t          *testing.T
	dir        string
	home       string
	stateDir   string
	socket     string
	sessiond   string
	sessionctl string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sde")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	e := &env{t: t, dir: d, home: filepath.Join(d, "home"), stateDir: filepath.Join(d, "state"), socket: filepath.Join(d, "run", "s.sock")}
	e.sessiond, e.sessionctl = binaries(t)
	if err := os.MkdirAll(e.home, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) environ() []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "XDG_RUNTIME_DIR", "XDG_STATE_HOME", "XDG_DATA_HOME", "CLAUDE_CONFIG_DIR", "SESSIOND_STATE_DIR", "SESSIOND_SOCKET", "NOTIFY_SOCKET", "WATCHDOG_USEC":
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+e.home, "SESSIOND_STATE_DIR="+e.stateDir, "SESSIOND_SOCKET="+e.socket)
}

// daemon is a running sessiond process. done is closed when it exits,
// with its Wait error in err.
type daemon struct {
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	done   chan struct{}
	err    error
}

func (e *env) startDaemon(args ...string) *daemon {
	e.t.Helper()
	// Other test packages run fake agents at the same time: learning their
	// config roots would mix their sessions into this daemon's.
	cmd := exec.Command(e.sessiond, append([]string{"--reconcile-interval", "200ms", "--log-level", "debug", "--claude-learn-roots=false"}, args...)...)
	cmd.Env = e.environ()
	var stderr bytes.Buffer
	cmd.Stderr = &lockedWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	d := &daemon{cmd: cmd, stderr: &stderr, done: make(chan struct{})}
	go func() { d.err = cmd.Wait(); close(d.done) }()
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.done
		if e.t.Failed() {
			e.t.Logf("sessiond stderr:\n%s", stderr.String())
		}
	})
	if err := api.NewClient(e.socket).WaitReady(context.Background(), 10*time.Second); err != nil {
		e.t.Fatalf("sessiond not ready: %v\n%s", err, stderr.String())
	}
	return d
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// ctl runs sessionctl and returns stdout, stderr and the exit code.
func (e *env) ctl(args ...string) (string, string, int) {
	e.t.Helper()
	return e.ctlAs(nil, args...)
}

func (e *env) ctlAs(prefix []string, args ...string) (string, string, int) {
	e.t.Helper()
	argv := append(append([]string{}, prefix...), e.sessionctl)
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = e.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run sessionctl: %v", err)
	}
	return out.String(), errb.String(), code
}

func (e *env) show(id string) api.Session {
	e.t.Helper()
	out, errs, code := e.ctl("show", id, "--json")
	if code != 0 {
		e.t.Fatalf("sessionctl show %s: exit %d: %s", id, code, errs)
	}
	var s api.Session
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		e.t.Fatalf("show --json: %v\n%s", err, out)
	}
	return s
}

// startOwner starts a real process to own a session.
func startOwner(t *testing.T) (*exec.Cmd, proc.Identity) {
	t.Helper()
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, err := proc.NewHost().Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, id
}

func (e *env) seed(recs ...*session.Record) {
	e.t.Helper()
	st, err := state.Open(filepath.Join(e.stateDir, "sessiond.db"), state.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	defer st.Close()
	for _, r := range recs {
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// The daemon's whole life as a user sees it: sessions survive its kill -9,
// a stale socket is replaced, a second daemon is refused with its own exit
// code, and SIGTERM stops it cleanly within a second.
func TestDaemonLifecycle(t *testing.T) {
	e := newEnv(t)
	owner, id := startOwner(t)
	e.seed(&session.Record{ID: "5e55000000aa", Agent: "claude", UpstreamID: "11111111-2222-4333-8444-555555555555",
		Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &id, Cwd: filepath.Join(e.home, "proj"), CreatedAt: time.Now()})

	d := e.startDaemon()
	s := e.show("5e55")
	if s.Status != session.StatusRunning || s.PID != id.PID {
		t.Fatalf("before the crash: %s pid %d", s.Status, s.PID)
	}
	out, _, code := e.ctl("ls")
	if code != 0 || !strings.Contains(out, "5e55000000aa") || !strings.Contains(out, "~/proj") || !strings.HasPrefix(out, "ID") {
		t.Fatalf("ls (exit %d):\n%s", code, out)
	}

	// kill -9: the socket file stays behind.
	d.cmd.Process.Signal(syscall.SIGKILL)
	<-d.done
	if _, err := os.Stat(e.socket); err != nil {
		t.Fatalf("expected a stale socket after kill -9: %v", err)
	}
	_, errs, code := e.ctl("ls")
	if code != 3 || !strings.Contains(errs, "not reachable") || !strings.Contains(errs, "start it") {
		t.Fatalf("ls with the daemon dead: exit %d: %s", code, errs)
	}

	d = e.startDaemon()
	s = e.show("11111111-2222")
	if s.ID != "5e55000000aa" || s.Status != session.StatusRunning {
		t.Fatalf("after restart: %+v", s)
	}

	// A second daemon on the same state dir exits at once with code 17.
	second := exec.Command(e.sessiond)
	second.Env = e.environ()
	outb, err := second.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 17 || !strings.Contains(string(outb), "another sessiond is already running") {
		t.Fatalf("second daemon: %v\n%s", err, outb)
	}

	// The owner dies: the daemon notices by its exit event.
	owner.Process.Kill()
	owner.Wait()
	deadline := time.Now().Add(3 * time.Second)
	for e.show("5e55").Status != session.StatusStopped {
		if time.Now().After(deadline) {
			t.Fatalf("owner killed, still %s", e.show("5e55").Status)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Usage and not-found exit codes.
	if _, _, code := e.ctl("show"); code != 2 {
		t.Errorf("show without id: exit %d, want 2", code)
	}
	if _, _, code := e.ctl("show", "nope"); code != 4 {
		t.Errorf("show unknown: exit %d, want 4", code)
	}
	if _, _, code := e.ctl("ls", "--bogus"); code != 2 {
		t.Errorf("unknown flag: exit %d, want 2", code)
	}

	// SIGTERM: exit 0 within a second, store closed.
	start := time.Now()
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
		if d.err != nil {
			t.Fatalf("SIGTERM exit: %v\n%s", d.err, d.stderr.String())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("sessiond still running 3s after SIGTERM")
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("SIGTERM took %s, want under 1s", took)
	}
	st, err := state.Open(filepath.Join(e.stateDir, "sessiond.db"), state.Options{Timeout: 100 * time.Millisecond})
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
	e.startDaemon()
	for _, p := range []string{e.dir, filepath.Dir(e.socket), filepath.Dir(e.sessionctl)} {
		os.Chmod(p, 0o755)
	}
	os.Chmod(e.socket, 0o666)
	_, errs, code := e.ctlAs([]string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"}, "ls")
	if code == 0 || !strings.Contains(errs, "serves only its own user") {
		t.Fatalf("client as nobody: exit %d: %s", code, errs)
	}
	if _, _, code := e.ctl("ls"); code != 0 {
		t.Fatalf("own user refused: exit %d", code)
	}
}

// sessionctl events --follow prints events as they are committed.
func TestEventsFollow(t *testing.T) {
	e := newEnv(t)
	owner, id := startOwner(t)
	e.seed(&session.Record{ID: "f011000000aa", Agent: "claude", UpstreamID: "u-follow", Status: session.StatusRunning, Owner: &id, CreatedAt: time.Now()})
	e.startDaemon()
	cmd := exec.Command(e.sessionctl, "events", "--follow", "--json")
	cmd.Env = e.environ()
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
	root := claudetest.NewRoot(t, filepath.Join(e.home, ".claude"))
	cwd := filepath.Join(e.home, "proj")
	os.MkdirAll(cwd, 0o755)
	id := claudetest.NewSessionID()
	owner, _ := startOwner(t)
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

	e.startDaemon()
	s := e.show(id[:8])
	if s.Status != session.StatusRunning || s.Activity != session.ActivityBusy || s.PID != owner.Process.Pid || s.Cwd != cwd {
		t.Fatalf("live: %s/%s pid %d cwd %s (%s)", s.Status, s.Activity, s.PID, s.Cwd, s.StatusReason)
	}
	killed := time.Now()
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	for {
		s = e.show(id)
		if s.Status == session.StatusInterrupted {
			break
		}
		if time.Since(killed) > 3*time.Second {
			t.Fatalf("3s after kill -9: %s (%s)", s.Status, s.StatusReason)
		}
		time.Sleep(20 * time.Millisecond)
	}
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
	deadline := time.Now().Add(3 * time.Second)
	for !strings.Contains(kinds[session.ProblemOrphanProcesses], fmt.Sprint(tool.Process.Pid)) {
		if time.Now().After(deadline) {
			t.Fatalf("orphan_processes missing pid %d: %+v", tool.Process.Pid, s.Problems)
		}
		time.Sleep(100 * time.Millisecond)
		s = e.show(id)
		kinds = map[session.ProblemKind]string{}
		for _, p := range s.Problems {
			kinds[p.Kind] += p.Key + " "
		}
	}
	out, _, _ := e.ctl("ls")
	if !strings.Contains(out, "interrupted") || !strings.Contains(out, "orphaned_tool_call") {
		t.Errorf("ls:\n%s", out)
	}
}
