package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/internal/testkit/mounttest"
	"github.com/sessiond/sessiond/session"
)

// codex exec with its CODEX_HOME on an overlayfs whose layers are on two
// different tmpfs: stat gives the writer lock file the overlay's device,
// the kernel's lock table the upper tmpfs's.
func TestCodexExecHomeOnOverlay(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	dir, err := mounttest.Overlay(t)
	if err != nil {
		skipLoudly(t, "CODEX ON OVERLAYFS NOT TESTED: %v", err)
	}
	codexOnMount(t, bin, dir)
}

// codex exec with its CODEX_HOME in a btrfs subvolume: stat gives the
// subvolume's device, the lock table the file system's.
func TestCodexExecHomeOnBtrfs(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	dir, err := mounttest.Btrfs(t)
	if err != nil {
		skipLoudly(t, "CODEX ON BTRFS NOT TESTED: %v", err)
	}
	codexOnMount(t, bin, dir)
}

// codexOnMount runs codex exec, its home under dir, its tool a shell that
// forks a long python3: while the tool runs, past the grace an owner-less
// session gets, the session is running and busy, owned by the native
// codex that holds the writer lock, and its tool is no orphan; kill -9 of
// that codex makes it interrupted, the python3 then an orphan. The mount
// was made before the world, so it is unmounted after every process the
// world started is dead and the daemon stopped.
func codexOnMount(t *testing.T, bin, dir string) {
	w := newWorld(t)
	w.writeCodexConfig()
	home := filepath.Join(dir, "codex-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(w.codexHome(), "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	w.model.Enqueue(fakemodel.RunCommand(longTool+"; echo done", "Run the long job", 10*time.Minute))
	const grace = 2 * time.Second
	w.startDaemon("--codex-dir", home, "--grace", grace.String(), "--reconcile-interval", "500ms")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.startEnv("codex exec", w.proj(), []string{"CODEX_HOME=" + home}, bin, "exec", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox", "Run the long job")
	diag := func() string { return tail(out.String(), 2000) }
	var up string
	w.waitFor(60*time.Second, "codex's python3 tool running", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return p.Env["CODEX_THREAD_ID"] != "" && isPython(p) })
		if len(ps) == 0 {
			return false, diag()
		}
		up = ps[0].Env["CODEX_THREAD_ID"]
		return true, ""
	})
	w.step("tool running")
	var native int
	for _, p := range procs(func(p procInfo) bool { return p.PPID == cmd.Process.Pid }) {
		if filepath.Base(p.Exe) == "codex" {
			native = p.PID
		}
	}
	if native == 0 {
		t.Fatalf("no native codex below the wrapper %d", cmd.Process.Pid)
	}
	lw.claim("codex", up, native)
	logLockDevices(t, filepath.Join(home, "thread-writer-locks", up+".lock"), native)

	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	if s.PID != native || s.Agent != "codex" {
		t.Fatalf("session %+v: want owner %d (the native codex that holds the writer lock)", s, native)
	}
	w.step("running/busy")
	// The rollout is still while the tool runs: an owner-less session
	// would be called dead once it has been still for the grace.
	time.Sleep(2*grace + time.Second)
	s = w.Show(s.ID)
	if s.Status != session.StatusRunning || s.PID != native || s.Problem(session.ProblemOrphanProcesses) != nil {
		t.Fatalf("%s past the grace, tool still running: %s, owner %d, problems %v; want running, owned by %d, no orphans",
			s.ID, s.Status, s.PID, problemKinds(s), native)
	}
	w.step("still running past the grace")

	killed := time.Now()
	if err := syscall.Kill(native, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	w.step("interrupted after " + took.Round(time.Millisecond).String())
	orphans := codexTools(up)
	if len(orphans) != 1 || !isPython(orphans[0]) {
		t.Fatalf("left behind: %+v, want the one python3", orphans)
	}
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(orphans[0].PID)+" ") {
		t.Errorf("orphan_processes %q does not name the python3 %d", d, orphans[0].PID)
	}
}

// logLockDevices logs the writer lock file's device and inode as stat
// gives them and as the lock table names them, and says so loudly when
// they agree: the run then does not show the case it is for.
func logLockDevices(t *testing.T, lock string, pid int) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(lock, &st); err != nil {
		t.Fatalf("stat the writer lock: %v", err)
	}
	statName := fmt.Sprintf("%02x:%02x:%d", unix.Major(uint64(st.Dev)), unix.Minor(uint64(st.Dev)), st.Ino)
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Fatal(err)
	}
	var table string
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 5 && f[1] == "FLOCK" && f[4] == itoa(pid) && strings.HasSuffix(f[5], fmt.Sprintf(":%d", st.Ino)) {
			table = f[5]
		}
	}
	t.Logf("writer lock %s: stat %s, lock table %s (pid %d)", lock, statName, table, pid)
	if table == statName {
		recordTiming("NOTE " + t.Name() + ": stat and the lock table agree on " + statName + ": the device mismatch not shown here")
		t.Logf("NOTE: stat and the lock table agree here: this run does not show the device mismatch")
	}
}
