package proc

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

// probeHelperEnv makes the test binary run as a probe helper instead of the
// tests: "pid:startticks:bootid". TestEPERMIsAlive re-executes the binary
// as another uid with it, so the probe really meets EPERM.
const probeHelperEnv = "SESSIOND_PROC_PROBE_HELPER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(probeHelperEnv); spec != "" {
		os.Exit(runProbeHelper(spec))
	}
	os.Exit(m.Run())
}

func runProbeHelper(spec string) int {
	parts := strings.SplitN(spec, ":", 3)
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "bad %s %q\n", probeHelperEnv, spec)
		return 2
	}
	pid, err1 := strconv.Atoi(parts[0])
	ticks, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		fmt.Fprintf(os.Stderr, "bad %s %q: %v\n", probeHelperEnv, spec, err)
		return 2
	}
	kill := "nil"
	if err := unix.Kill(pid, 0); err != nil {
		kill = unix.ErrnoName(err.(unix.Errno))
	}
	res := NewHost().Probe(Identity{BootID: parts[2], PID: pid, StartTicks: ticks})
	fmt.Printf("uid=%d kill=%s liveness=%s reason=%q\n", os.Getuid(), kill, res.Liveness, res.Reason)
	return 0
}

// startSleep starts a real `sleep 30` and makes sure it is killed and
// reaped when the test ends.
func startSleep(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	if len(args) == 0 {
		args = []string{"sleep", "30"}
	}
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", args, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd
}

func identify(t *testing.T, h *Host, pid int) Identity {
	t.Helper()
	id, err := h.Identify(pid)
	if err != nil {
		t.Fatalf("Identify: %v", err)
	}
	return id
}

func wantProbe(t *testing.T, h *Host, id Identity, want Liveness, reason string) {
	t.Helper()
	res := h.Probe(id)
	if res.Liveness != want || !strings.Contains(res.Reason, reason) {
		t.Fatalf("Probe(%v) = %v %q, want %v containing %q", id, res.Liveness, res.Reason, want, reason)
	}
}

// waitState polls until pid's stat shows state, without reaping it.
func waitState(t *testing.T, h *Host, pid int, state byte) {
	t.Helper()
	testenv.EventuallyOK(t, 5*time.Second, fmt.Sprintf("pid %d in state %c", pid, state), func() (bool, string) {
		st, err := h.readState(pid)
		return err == nil && st.State == state, fmt.Sprintf("%+v, %v", st, err)
	})
}

func TestIdentifyMatchesStat(t *testing.T) {
	h := NewHost()
	id := identify(t, h, os.Getpid())
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if got := strconv.FormatUint(id.StartTicks, 10); got != fields[19] {
		t.Fatalf("StartTicks = %s, field 22 = %s", got, fields[19])
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if id.BootID != strings.TrimSpace(string(boot)) || id.PID != os.Getpid() {
		t.Fatalf("Identify = %+v", id)
	}
	if _, err := h.Identify(0); err == nil {
		t.Fatal("Identify(0) succeeded")
	}
}

func TestProbeLiveChild(t *testing.T) {
	h := NewHost()
	cmd := startSleep(t)
	wantProbe(t, h, identify(t, h, cmd.Process.Pid), Alive, "running")
}

func TestProbeExitedAndReaped(t *testing.T) {
	h := NewHost()
	cmd := startSleep(t)
	id := identify(t, h, cmd.Process.Pid)
	cmd.Process.Kill()
	cmd.Wait()
	wantProbe(t, h, id, Dead, "does not exist")
}

func TestProbeZombie(t *testing.T) {
	h := NewHost()
	cmd := startSleep(t, "sleep", "0")
	id := identify(t, h, cmd.Process.Pid) // a zombie still has its stat
	waitState(t, h, id.PID, 'Z')          // exited, deliberately not reaped
	wantProbe(t, h, id, Dead, "zombie")
}

func TestProbeReusedPID(t *testing.T) {
	h := NewHost()
	id := identify(t, h, os.Getpid())
	id.StartTicks++ // same pid, another process's start time
	wantProbe(t, h, id, Dead, fmt.Sprintf("pid %d reused: start ticks %d, want %d", id.PID, id.StartTicks-1, id.StartTicks))
}

func TestProbeOtherBoot(t *testing.T) {
	h := NewHost()
	id := identify(t, h, os.Getpid())
	id.BootID = "00000000-0000-0000-0000-000000000000"
	wantProbe(t, h, id, Dead, "rebooted")
}

func TestProbeInvalidPID(t *testing.T) {
	h := NewHost()
	boot, _ := h.BootID()
	for _, pid := range []int{0, -1} {
		wantProbe(t, h, Identity{BootID: boot, PID: pid}, Unknown, "invalid pid")
	}
}

// TestOtherUIDIsAlive: a process of another uid, probed by root, is alive
// (root's kill(pid, 0) returns nil), and its snapshot row has its uid.
func TestOtherUIDIsAlive(t *testing.T) {
	setpriv := needRootAndSetpriv(t)
	h := NewHost()
	cmd := startSleep(t, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "30")
	id := identify(t, h, cmd.Process.Pid)
	var p *Process
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("pid %d running sleep as uid 65534", id.PID), func() bool {
		s, err := h.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		p = s.Procs[id.PID]
		return p != nil && p.UID == 65534 && len(p.Argv) > 0 && p.Argv[0] == "sleep"
	})
	if p.Identity != id {
		t.Fatalf("snapshot identity %v, want %v (exec keeps the start time)", p.Identity, id)
	}
	wantProbe(t, h, id, Alive, "running")
}

// TestEPERMIsAlive probes a root-owned sleep from a helper running as
// nobody, where kill(pid, 0) fails with EPERM: the process is alive.
func TestEPERMIsAlive(t *testing.T) {
	setpriv := needRootAndSetpriv(t)
	h := NewHost()
	cmd := startSleep(t)
	id := identify(t, h, cmd.Process.Pid)

	// The go test build directory is private (0700): copy the binary where
	// nobody can execute it.
	dir, err := os.MkdirTemp("", "proc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "proc.test")
	copyFile(t, bin)

	helper := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run=^$")
	helper.Env = append(os.Environ(), fmt.Sprintf("%s=%d:%d:%s", probeHelperEnv, id.PID, id.StartTicks, id.BootID))
	out, err := helper.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	t.Logf("helper: %s", out)
	for _, want := range []string{"uid=65534", "kill=EPERM", "liveness=alive"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("helper output %q lacks %q", out, want)
		}
	}
}

func needRootAndSetpriv(t *testing.T) string {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skipf("needs root to run a process as another uid (running as uid %d)", os.Getuid())
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skipf("needs setpriv (util-linux) to run a process as another uid: %v", err)
	}
	return setpriv
}

func copyFile(t *testing.T, dst string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

const fixtureBoot = "5c3a1f0e-7d2b-4c8e-9a61-0f2d3b4c5e6f"

// fixtureRoot writes a small proc tree: init, a tmux server with an
// awkward comm and markers in its environment (next to a secret), a child
// without a readable environment, and entries a snapshot must skip.
func fixtureRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/kernel/random/boot_id", fixtureBoot+"\n")
	write("1/stat", statLine(1, "systemd", 'S', 0, 4))
	write("1/cmdline", "/sbin/init\x00splash\x00")
	write("4242/stat", statLine(4242, "tmux: server) (x", 'S', 1, 123456))
	write("4242/cmdline", "tmux\x00new-session\x00-s\x00a b\x00")
	write("4242/environ", "PATH=/usr/bin\x00ANTHROPIC_API_KEY=sk-ant-api03-SECRET\x00CLAUDECODE=1\x00"+
		"CLAUDE_CONFIG_DIR=/home/u/.claude\x00OPENCODE_PID=77\x00")
	if err := os.Symlink("/home/u/project", filepath.Join(root, "4242/cwd")); err != nil {
		t.Fatal(err)
	}
	// A kernel thread: nothing beside its stat is read (a marker in an
	// environ file, which no kernel thread has, would show it was).
	write("2/stat", "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 3\n")
	write("2/cmdline", "kthreadd\x00")
	write("2/environ", "CLAUDECODE=1\x00")
	write("4243/stat", statLine(4243, "claude", 'R', 4242, 123999))
	write("4243/cmdline", "claude\x00")
	write("4244/stat", statLine(4244, "defunct", 'Z', 4243, 124000))
	write("4244/cmdline", "")                             // a zombie has an empty cmdline and no cwd
	write("4245/stat", statLine(4245, "gone", 'S', 1, 1)) // exited before its cmdline was read
	write("77/stat", "garbage")                           // torn or foreign: skipped
	write("99/status", "Name:\tgone\n")                   // vanished before its stat was read
	write("self/stat", statLine(4242, "tmux", 'S', 1, 123456))
	write("0042/stat", statLine(42, "zeropad", 'S', 1, 1))
	return root
}

func TestSnapshotFixture(t *testing.T) {
	root := fixtureRoot(t)
	h := &Host{Root: root}
	before := time.Now()
	s, err := h.Snapshot()
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if s.BootID != fixtureBoot || s.Taken.Before(before) {
		t.Fatalf("Snapshot BootID %q Taken %v", s.BootID, s.Taken)
	}
	if got, want := slices.Sorted(maps.Keys(s.Procs)), []int{1, 2, 4242, 4243, 4244}; !slices.Equal(got, want) {
		t.Fatalf("pids = %v, want %v", got, want)
	}
	if k := s.Procs[2]; k.Identity != (Identity{BootID: fixtureBoot, PID: 2, StartTicks: 3}) || k.State != 'S' || k.UID != 0 ||
		k.Argv != nil || k.Env != nil || k.Cwd != "" {
		t.Fatalf("kernel thread row = %+v, want its stat alone", *k)
	}
	tmux := s.Procs[4242]
	want := Process{
		Identity: Identity{BootID: fixtureBoot, PID: 4242, StartTicks: 123456},
		PPID:     1,
		State:    'S',
		UID:      os.Getuid(),
		Cwd:      "/home/u/project",
		Argv:     []string{"tmux", "new-session", "-s", "a b"},
		Env:      map[string]string{"CLAUDECODE": "1", "CLAUDE_CONFIG_DIR": "/home/u/.claude", "OPENCODE_PID": "77"},
	}
	if tmux.Identity != want.Identity || tmux.PPID != want.PPID || tmux.State != want.State ||
		tmux.UID != want.UID || tmux.Cwd != want.Cwd || !slices.Equal(tmux.Argv, want.Argv) || !maps.Equal(tmux.Env, want.Env) {
		t.Fatalf("tmux row = %+v\nwant %+v", *tmux, want)
	}
	if dump := fmt.Sprintf("%+v", *tmux); strings.Contains(dump, "sk-ant") || strings.Contains(dump, "ANTHROPIC") {
		t.Fatalf("secret leaked into the snapshot: %s", dump)
	}
	claude := s.Procs[4243]
	if claude.Env != nil || claude.Cwd != "" || !slices.Equal(claude.Argv, []string{"claude"}) || claude.State != 'R' {
		t.Fatalf("claude row = %+v, want no env, no cwd", *claude)
	}
	if z := s.Procs[4244]; z.State != 'Z' || z.Argv != nil {
		t.Fatalf("zombie row = %+v", *z)
	}
	got := s.Descendants(4242)
	if len(got) != 2 {
		t.Fatalf("Descendants(4242) = %d rows, want 2", len(got))
	}
}

func TestSnapshotErrors(t *testing.T) {
	h := &Host{Root: filepath.Join(t.TempDir(), "missing")}
	if _, err := h.Snapshot(); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("Snapshot of missing root: %v, want an error naming it", err)
	}
	root := t.TempDir()
	h = &Host{Root: root}
	os.MkdirAll(filepath.Join(root, "sys/kernel/random"), 0o755)
	os.WriteFile(filepath.Join(root, "sys/kernel/random/boot_id"), []byte("b\n"), 0o644)
	s, err := h.Snapshot()
	if err != nil || len(s.Procs) != 0 {
		t.Fatalf("Snapshot of empty root = %v, %v", s, err)
	}
}

func TestSnapshotReal(t *testing.T) {
	h := NewHost()
	cmd := startSleep(t)
	s, err := h.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	me := s.Procs[os.Getpid()]
	if me == nil || me.Identity != identify(t, h, os.Getpid()) || me.Cwd == "" || len(me.Argv) == 0 || me.Env == nil {
		t.Fatalf("own row = %+v", me)
	}
	kids := s.Children(os.Getpid())
	if !slices.ContainsFunc(kids, func(p *Process) bool { return p.Identity.PID == cmd.Process.Pid }) {
		t.Fatalf("sleep %d not among children of %d", cmd.Process.Pid, os.Getpid())
	}
	if sid, err := unix.Getsid(0); err != nil || me.SID != sid || me.PGID != unix.Getpgrp() {
		t.Fatalf("own session %d, group %d; getsid %d (%v), getpgrp %d", me.SID, me.PGID, sid, err, unix.Getpgrp())
	}
	// kthreadd, where the pid namespace shows it: a kernel thread's row
	// is its stat alone.
	if st, err := h.Stat(2); err == nil && st.Kernel {
		if k := s.Procs[2]; k == nil || k.Argv != nil || k.Env != nil || k.Cwd != "" || k.PPID != st.PPID {
			t.Fatalf("kthreadd's row = %+v", k)
		}
	}
}

// TestSnapshotSession: a child that called setsid() leads its own session
// and group, and what it forks stays in them.
func TestSnapshotSession(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	var kid int
	if _, err := fmt.Fscan(out, &kid); err != nil {
		t.Fatal(err)
	}
	s, err := NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sh, sleep := s.Procs[cmd.Process.Pid], s.Procs[kid]
	if sh == nil || sleep == nil {
		t.Fatalf("rows %+v %+v", sh, sleep)
	}
	if sh.SID != sh.Identity.PID || sh.PGID != sh.Identity.PID || sleep.SID != sh.Identity.PID || sleep.PGID != sh.Identity.PID {
		t.Fatalf("sh %d: sid %d pgid %d; its sleep %d: sid %d pgid %d", sh.Identity.PID, sh.SID, sh.PGID, kid, sleep.SID, sleep.PGID)
	}
}

func TestProbeFixture(t *testing.T) {
	root := fixtureRoot(t)
	// A stat that cannot be read (a directory): a failed check, not a death.
	os.MkdirAll(filepath.Join(root, "5000/stat"), 0o755)
	id := func(pid int, ticks uint64) Identity {
		return Identity{BootID: fixtureBoot, PID: pid, StartTicks: ticks}
	}
	tests := []struct {
		name   string
		id     Identity
		sig    error
		want   Liveness
		reason string
	}{
		{"alive", id(4242, 123456), nil, Alive, "running"},
		{"EPERM is alive", id(4242, 123456), unix.EPERM, Alive, "running"},
		{"ESRCH", id(4242, 123456), unix.ESRCH, Dead, "does not exist"},
		{"signal failed", id(4242, 123456), unix.EINVAL, Unknown, "signal 0"},
		{"reused", id(4242, 1), nil, Dead, "pid 4242 reused: start ticks 123456, want 1"},
		{"zombie", id(4244, 124000), nil, Dead, "zombie"},
		{"exited between checks", id(4999, 5), nil, Dead, "exited between checks"},
		{"stat unreadable", id(5000, 5), nil, Unknown, "cannot read state"},
		{"stat garbage", id(77, 5), nil, Unknown, "cannot read state"},
		{"other boot", Identity{BootID: "old", PID: 4242, StartTicks: 123456}, nil, Dead, "rebooted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var signalled []int
			h := &Host{Root: root, Signal0: func(pid int) error {
				signalled = append(signalled, pid)
				return tt.sig
			}}
			wantProbe(t, h, tt.id, tt.want, tt.reason)
			if tt.name == "other boot" && len(signalled) != 0 {
				t.Fatalf("signalled %v for an identity of another boot", signalled)
			}
		})
	}
}

func TestBootIDMissing(t *testing.T) {
	h := &Host{Root: t.TempDir(), Signal0: func(int) error { return nil }}
	if _, err := h.BootID(); err == nil || !strings.Contains(err.Error(), "boot_id") {
		t.Fatalf("BootID: %v, want an error naming boot_id", err)
	}
	wantProbe(t, h, Identity{BootID: "x", PID: 1}, Unknown, "boot id")
}

func TestUIDOfOwnProcess(t *testing.T) {
	uid, err := NewHost().UID(os.Getpid())
	if err != nil || uid != os.Getuid() {
		t.Fatalf("UID of self = %d, %v; want %d", uid, err, os.Getuid())
	}
	if _, err := NewHost().UID(1 << 30); err == nil {
		t.Fatal("UID of a pid that cannot exist: no error")
	}
}

// Ancestors of a grandchild: itself, its shell, this test process, in
// that order, each with the identity Identify gives.
func TestAncestors(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 30 & wait")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	h := NewHost()
	var sleeper int
	for i := 0; i < 200 && sleeper == 0; i++ {
		snap, err := h.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range snap.Procs {
			if p.PPID == cmd.Process.Pid && len(p.Argv) > 0 && p.Argv[0] == "sleep" {
				sleeper = p.Identity.PID
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if sleeper == 0 {
		t.Fatal("no sleep below the shell")
	}
	defer syscall.Kill(sleeper, syscall.SIGKILL)
	got, err := h.Ancestors(sleeper, 3)
	if err != nil {
		t.Fatal(err)
	}
	var want []Identity
	for _, pid := range []int{sleeper, cmd.Process.Pid, os.Getpid()} {
		id, err := h.Identify(pid)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ancestors %+v, want %+v", got, want)
	}
	if all, _ := h.Ancestors(sleeper, 64); len(all) < 3 || all[len(all)-1].PID == 1 {
		t.Fatalf("a walk to the top %+v: want at least 3, and never init", all)
	}
	if _, err := h.Ancestors(1<<22+7, 4); err == nil {
		t.Fatal("ancestors of a pid that does not exist: no error")
	}
}

// MarkerEnv reads a live process's marker variables now, and nothing
// else of its environment.
func TestMarkerEnv(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	cmd.Env = []string{"CODEX_THREAD_ID=019a-thread", "SECRET_TOKEN=s3cr3t", "PATH=/usr/bin:/bin"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// Start returns once the exec is past its point of no return, a
	// moment before the kernel has set up the new image's environment:
	// until then /proc/<pid>/environ reads empty.
	var env map[string]string
	for deadline := time.Now().Add(5 * time.Second); len(env) == 0 && time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var err error
		if env, err = NewHost().MarkerEnv(cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
	}
	if len(env) != 1 || env["CODEX_THREAD_ID"] != "019a-thread" {
		t.Fatalf("MarkerEnv = %v, want only CODEX_THREAD_ID", env)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if _, err := NewHost().MarkerEnv(cmd.Process.Pid); err == nil {
		t.Fatal("MarkerEnv of an exited process: no error")
	}
}
