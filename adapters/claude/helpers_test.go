package claude

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// testFS wraps the OS file system: it counts the bytes read through every
// opened file (an instrumented reader independent of the adapter's own
// counter), records what was opened, and fails paths on demand.
type testFS struct {
	osFS
	read atomic.Int64

	mu     sync.Mutex
	opened []string
	fail   map[string]error
}

func (f *testFS) failPath(p string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = map[string]error{}
	}
	f.fail[p] = err
}

func (f *testFS) failed(p string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fail[p]
}

func (f *testFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.failed(name); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f.osFS.ReadDir(name)
}

func (f *testFS) Open(name string) (File, error) {
	f.mu.Lock()
	f.opened = append(f.opened, name)
	f.mu.Unlock()
	if err := f.failed(name); err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	file, err := f.osFS.Open(name)
	if err != nil {
		return nil, err
	}
	return countingFile{file, &f.read}, nil
}

func (f *testFS) openedPaths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.opened...)
}

// newTestAdapter returns an adapter over the given roots that never looks
// at the real ~/.claude: the default root is the first test root and roots
// of live processes are not learned.
func newTestAdapter(t testing.TB, fsys FS, roots ...string) *Adapter {
	t.Helper()
	cfg := Config{Roots: roots, DefaultRoot: roots[0], NoLearnedRoots: true, FS: fsys}
	if tt, ok := t.(*testing.T); ok {
		cfg.Logger = zaptest.NewLogger(tt)
	}
	return New(cfg)
}

func snapshot(t testing.TB) *proc.Snapshot {
	t.Helper()
	s, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

func discover(t testing.TB, a *Adapter, snap *proc.Snapshot) adapters.Observation {
	t.Helper()
	obs, err := a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return obs
}

func find(obs adapters.Observation, id string) *adapters.Observed {
	all := obs.All()
	for i := range all {
		if all[i].UpstreamID == id {
			return &all[i]
		}
	}
	return nil
}

func mustFind(t testing.TB, obs adapters.Observation, id string) *adapters.Observed {
	t.Helper()
	o := find(obs, id)
	if o == nil {
		t.Fatalf("session %s not observed; got %d sessions", id, obs.Len())
	}
	return o
}

func issue(list []adapters.Issue, kind session.ProblemKind, key string) *adapters.Issue {
	for i := range list {
		if list[i].Kind == kind && (key == "" || list[i].Key == key) {
			return &list[i]
		}
	}
	return nil
}

// started is a real process started by a test, in its own process group so
// the whole tree (also orphans reparented away from it) is killed at the end.
type started struct {
	cmd  *exec.Cmd
	pid  int
	done chan struct{}
}

// start runs argv (argv[0] may differ from the program: exec -a through
// bash) in dir with extra environment, and kills its process group when
// the test ends.
func start(t testing.TB, dir string, env []string, name string, args ...string) *started {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	s := &started{cmd: cmd, pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-s.pid, syscall.SIGKILL) // the group: this process and its tree
		s.kill()
	})
	return s
}

// startAs runs a long-lived process whose argv[0] is argv0 (a fake
// "claude"): bash execs another bash under that name, keeping the extra
// args in its argv (python3 may be a shim that re-execs and loses argv[0]).
func startAs(t testing.TB, dir string, env []string, argv0 string, extra ...string) *started {
	t.Helper()
	script := `exec -a "$0" bash -c 'sleep 120; true' "$@"`
	return start(t, dir, env, "bash", append([]string{"-c", script, argv0}, extra...)...)
}

// kill sends SIGKILL to the process alone and waits until it is reaped.
func (s *started) kill() {
	_ = syscall.Kill(s.pid, syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}

// waitArgv waits until pid's argv[0] is argv0 (after bash's exec).
func waitArgv(t testing.TB, pid int, argv0 string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "exec of "+argv0, func() bool {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		return err == nil && strings.HasPrefix(string(b), argv0+"\x00")
	})
}

// probe answers liveness the way the tracker will.
func probe(id proc.Identity) proc.Liveness { return proc.NewHost().Probe(id).Liveness }

var errInjected = errors.New("injected: permission denied")

// newRoot makes a config root in a fresh temp dir and a project cwd.
func newRoot(t testing.TB) (*claudetest.Root, string) {
	t.Helper()
	base := t.TempDir()
	r := claudetest.NewRoot(t, filepath.Join(base, "claude"))
	cwd := filepath.Join(base, "proj")
	if err := os.MkdirAll(cwd, 0o700); err != nil {
		t.Fatal(err)
	}
	return r, cwd
}

// syscallKillGroup kills a process group this test started.
// syscallKillGroup kills what is left of a process group; a group already
// gone (its last member exited on its own) is not an error.
func syscallKillGroup(pgid int) error {
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return err
	}
	return nil
}

// python returns the real python3 binary (not a version-manager shim that
// re-execs through helper processes), or skips the test.
func python(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Skipf("no python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// toolTree starts a fake claude owner (bash) that runs a tool the way
// Claude does (bash -c -> python3 sleeping), with env set in the tool's
// environment, and waits until the python3 runs. It returns the owner and
// the tool processes.
func toolTree(t testing.TB, cwd, env string) (*started, []*proc.Process) {
	t.Helper()
	py := python(t)
	script := env + ` bash -c "'` + py + `' -c 'import time; time.sleep(120)'; true" & wait`
	owner := start(t, cwd, nil, "bash", "-c", script)
	var tools []*proc.Process
	testenv.Eventually(t, 10*time.Second, "the tool processes", func() bool {
		tools = snapshot(t).Descendants(owner.pid)
		for _, p := range tools {
			if len(p.Argv) > 0 && p.Argv[0] == py {
				return len(tools) == 2
			}
		}
		return false
	})
	return owner, tools
}
