// Package daemontest runs the built sessiond and sessionctl binaries the way
// a user does — real processes, a real Unix socket, a real store — for the
// test tiers that drive the daemon from outside: e2e, the real agents, the
// crash-consistency loop, load and bad input.
//
// Each test gets an Env: its own HOME, state dir and a short socket path
// (macOS caps socket paths at 104 bytes, so everything lives under a short
// directory in /tmp).
package daemontest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// Bins are the binaries a test run builds once.
type Bins struct {
	Dir        string
	Sessiond   string
	Sessionctl string
	// FakeClaude and FakeOpenCode are the scripted fake agents of
	// internal/testkit/fakeagents. The fake OpenCode is named opencode
	// (in its own directory): the adapter knows its processes by name.
	FakeClaude   string
	FakeOpenCode string
}

var (
	buildOnce sync.Once
	bins      Bins
	buildErr  error
)

// moduleRoot returns the directory of sessiond's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the sessiond module")
	}
	return filepath.Dir(gomod), nil
}

// Binaries builds sessiond, sessionctl and the fake agents once per test
// process. Call Cleanup from TestMain to remove them.
func Binaries(t testing.TB) Bins {
	t.Helper()
	buildOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "sessiond-bin")
		if err != nil {
			buildErr = err
			return
		}
		bins = Bins{
			Dir:          dir,
			Sessiond:     filepath.Join(dir, "sessiond"),
			Sessionctl:   filepath.Join(dir, "sessionctl"),
			FakeClaude:   filepath.Join(dir, "fakeclaude"),
			FakeOpenCode: filepath.Join(dir, "oc", "opencode"),
		}
		build := func(out string, pkgs ...string) error {
			cmd := exec.Command("go", append([]string{"build", "-o", out}, pkgs...)...)
			cmd.Dir = root
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build %v: %v\n%s", pkgs, err, b)
			}
			return nil
		}
		if buildErr = build(dir, "./cmd/sessiond", "./cmd/sessionctl", "./internal/testkit/fakeagents/fakeclaude"); buildErr != nil {
			return
		}
		buildErr = build(bins.FakeOpenCode, "./internal/testkit/fakeagents/fakeopencode")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins
}

// Cleanup removes the built binaries; call it from TestMain after m.Run.
func Cleanup() {
	if bins.Dir != "" {
		os.RemoveAll(bins.Dir)
	}
}

// Env is one test's world: its own HOME, state dir and a short socket path.
type Env struct {
	T        testing.TB
	Dir      string
	Home     string
	StateDir string
	Socket   string
	Bins
	// Extra is added to the environment of every process the Env starts.
	Extra []string
}

// NewEnv makes a fresh world under a short directory in /tmp, removed when
// the test ends.
func NewEnv(t testing.TB) *Env {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sde")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	e := &Env{T: t, Dir: d, Home: filepath.Join(d, "home"), StateDir: filepath.Join(d, "state"), Socket: filepath.Join(d, "run", "s.sock")}
	e.Bins = Binaries(t)
	if err := os.MkdirAll(e.Home, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// Environ is the test process's environment with everything that would
// point sessiond or an agent at the real user's files replaced, plus Extra.
func (e *Env) Environ() []string {
	return append(testenv.Isolated(e.Home, e.Socket, e.StateDir), e.Extra...)
}

// Daemon is a running sessiond process. Done is closed when it exits, with
// its Wait error in Err.
type Daemon struct {
	Cmd    *exec.Cmd
	Stderr *Buffer
	Done   chan struct{}
	Err    error
}

// Kill sends SIGKILL and waits for the process to be gone.
func (d *Daemon) Kill() {
	d.Cmd.Process.Kill()
	<-d.Done
}

// StartDaemon starts sessiond with a fast reconcile interval and debug logs
// and waits until it answers; extra args follow the defaults, so they win.
func (e *Env) StartDaemon(args ...string) *Daemon {
	e.T.Helper()
	d, err := e.StartDaemonNoWait(args...)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := api.NewClient(e.Socket).WaitReady(context.Background(), 10*time.Second); err != nil {
		e.T.Fatalf("sessiond not ready: %v\n%s", err, d.Stderr.String())
	}
	return d
}

// StartDaemonNoWait starts sessiond without waiting for it to answer.
func (e *Env) StartDaemonNoWait(args ...string) (*Daemon, error) {
	// Other test packages run fake agents at the same time: learning their
	// config roots would mix their sessions into this daemon's.
	cmd := exec.Command(e.Sessiond, append([]string{"--reconcile-interval", "200ms", "--log-level", "debug", "--claude-learn-roots=false", "--codex-learn-roots=false"}, args...)...)
	cmd.Env = e.Environ()
	stderr := &Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d := &Daemon{Cmd: cmd, Stderr: stderr, Done: make(chan struct{})}
	go func() { d.Err = cmd.Wait(); close(d.Done) }()
	t := e.T
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.Done
		if t.Failed() {
			t.Logf("sessiond stderr:\n%s", stderr.String())
		}
	})
	return d, nil
}

// Buffer is a bytes.Buffer safe to write from a process's output copier
// while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Ctl runs sessionctl and returns stdout, stderr and the exit code.
func (e *Env) Ctl(args ...string) (string, string, int) {
	e.T.Helper()
	return e.CtlAs(nil, args...)
}

// CtlAs runs sessionctl under a prefix command (for example setpriv).
func (e *Env) CtlAs(prefix []string, args ...string) (string, string, int) {
	e.T.Helper()
	argv := append(append([]string{}, prefix...), e.Sessionctl)
	argv = append(argv, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = e.Environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		e.T.Fatalf("run sessionctl: %v", err)
	}
	return out.String(), errb.String(), code
}

// CtlJSON runs `sessionctl --json args...`, fails the test on a non-zero
// exit, and decodes stdout into v.
func (e *Env) CtlJSON(v any, args ...string) {
	e.T.Helper()
	out, errs, code := e.Ctl(append([]string{"--json"}, args...)...)
	if code != 0 {
		e.T.Fatalf("sessionctl %v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		e.T.Fatalf("sessionctl %v: %v\n%s", args, err, out)
	}
}

// Show returns `sessionctl show ID --json`.
func (e *Env) Show(id string) api.Session {
	e.T.Helper()
	var s api.Session
	e.CtlJSON(&s, "show", id)
	return s
}

// StartOwner starts a real process to own a session; it is killed when the
// test ends.
func StartOwner(t testing.TB) (*exec.Cmd, proc.Identity) {
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

// KillOwner kills an owner StartOwner started (SIGKILL) and returns once
// a probe no longer finds it alive: the daemon has not noticed yet, so a
// test can act on a session whose owner died a moment before.
func KillOwner(t testing.TB, id proc.Identity) {
	t.Helper()
	if err := syscall.Kill(id.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h := proc.NewHost(); h.Probe(id).Liveness == proc.Alive; {
		if time.Now().After(deadline) {
			t.Fatalf("pid %d outlived SIGKILL by 5s", id.PID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Seed writes records straight into the store (the daemon must not be
// running: it holds the store's lock).
func (e *Env) Seed(recs ...*session.Record) {
	e.T.Helper()
	st, err := state.Open(filepath.Join(e.StateDir, "sessiond.db"), state.Options{})
	if err != nil {
		e.T.Fatal(err)
	}
	defer st.Close()
	for _, r := range recs {
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
			e.T.Fatal(err)
		}
	}
}

// KillByEnv SIGKILLs every process (and the process group it leads) whose
// environment holds key=value, until none is left, and returns how many it
// killed. Tests mark what they start with such a variable, so cleanup also
// finds what they lost track of: a launch cut off before its record, a
// tool reparented away. It reads /proc, so elsewhere it finds nothing.
func KillByEnv(key, value string) int {
	want := key + "=" + value + "\x00"
	killed := map[int]bool{}
	for round := 0; round < 50; round++ {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			break
		}
		found := 0
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil || !strings.Contains("\x00"+string(b), "\x00"+want) {
				continue
			}
			found++
			syscall.Kill(-pid, syscall.SIGKILL) // no such group unless it leads one
			syscall.Kill(pid, syscall.SIGKILL)
			killed[pid] = true
		}
		if found == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return len(killed)
}
