//go:build linux

package codex

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/codextest/fakecodex"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// TestFakeCodexHelper is the fake Codex's process (fakecodex.StartCodex).
func TestFakeCodexHelper(t *testing.T) { fakecodex.Helper(t) }

// orphanWorld is a Codex home with the killed rollout, its lock path and
// a fifo its tools wait on.
type orphanWorld struct {
	root, id, lock, fifo string
	a                    *Adapter
}

func newOrphanWorld(t *testing.T) *orphanWorld {
	t.Helper()
	// The killed rollout under an id of its own: another test binary
	// running at the same time (the e2e tests, a second run) starts
	// processes that carry the fixture's id.
	w := &orphanWorld{root: home(t), id: newThreadID(t)}
	day := filepath.Join(w.root, "sessions", "2026", "11", "25")
	writeRollout(t, day, w.id, bytes.ReplaceAll(readFixture(t, "killed.jsonl"), []byte(fixtures[1].id), []byte(w.id)))
	w.lock = filepath.Join(w.root, "thread-writer-locks", w.id+".lock")
	w.fifo = filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(w.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w.a = New(Config{Roots: []string{w.root}, NoLearnedRoots: true})
	return w
}

// newThreadID is a random session id in Codex's form.
func newThreadID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// release lets the tools waiting on the fifo go on.
func (w *orphanWorld) release(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(w.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// childOf waits for a live child of ppid whose argv starts with argv0 and
// returns it.
func childOf(t *testing.T, ppid int, argv0 string) *proc.Process {
	t.Helper()
	var found *proc.Process
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("a %s below pid %d", argv0, ppid), func() bool {
		snap, err := proc.NewHost().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range snap.Children(ppid) {
			if !p.Exited() && len(p.Argv) > 0 && p.Argv[0] == argv0 {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

// waitGone waits until pid is gone or a zombie.
func waitGone(t *testing.T, pid int, what string) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what+" gone", func() bool {
		snap, err := proc.NewHost().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return snap.Procs[pid].Exited()
	})
}

// startMarked starts `sleep` as the test's own child with the session's
// CODEX_THREAD_ID in its environment: nothing ties it to the session but
// the variable.
func startMarked(t *testing.T, id, secs string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", secs)
	cmd.Env = append(os.Environ(), "CODEX_THREAD_ID="+id)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// orphansByPID is a session's orphan_processes issues by pid.
func orphansByPID(t *testing.T, o adapters.Observed) map[int]adapters.Issue {
	t.Helper()
	out := map[int]adapters.Issue{}
	for _, is := range o.Problems {
		if is.Kind != session.ProblemOrphanProcesses {
			continue
		}
		pid, err := strconv.Atoi(is.Key)
		if err != nil {
			t.Fatalf("issue key %q is no pid: %+v", is.Key, is)
		}
		out[pid] = is
	}
	return out
}

// wantOrphan: pid is a reapable orphan, by its identity.
func wantOrphan(t *testing.T, got map[int]adapters.Issue, p *proc.Process, evidence string) {
	t.Helper()
	is, ok := got[p.Identity.PID]
	switch {
	case !ok:
		t.Errorf("pid %d (%v) is not named: %+v", p.Identity.PID, p.Argv, got)
	case is.Process == nil || *is.Process != p.Identity:
		t.Errorf("pid %d (%v) is not reapable as itself: %+v", p.Identity.PID, p.Argv, is)
	case !strings.Contains(is.Detail, evidence):
		t.Errorf("pid %d: detail %q does not say %q", p.Identity.PID, is.Detail, evidence)
	}
}

// wantSuspect: pid is named, never with a Process (never reaped), and
// its detail says so.
func wantSuspect(t *testing.T, got map[int]adapters.Issue, pid int, what string) {
	t.Helper()
	is, ok := got[pid]
	switch {
	case !ok:
		t.Errorf("%s (pid %d) is not named as a suspect: %+v", what, pid, got)
	case is.Process != nil:
		t.Errorf("%s (pid %d) carries only the variable, yet is reapable: %+v", what, pid, is)
	case !strings.Contains(is.Detail, "suspect, not reaped"):
		t.Errorf("%s (pid %d): detail %q does not say it is a suspect left alone", what, pid, is.Detail)
	}
}

// TestCodexOrphansByTheTree: a Codex killed -9 mid tool. Its tools' bash
// die of their death signal; what they forked is a reapable orphan, both
// the process seen below the owner and one forked after the last look
// (still in its tool's session). A process that merely carries the
// session's CODEX_THREAD_ID, started by another parent, is a suspect:
// named, never reapable.
func TestCodexOrphansByTheTree(t *testing.T) {
	w := newOrphanWorld(t)
	c := fakecodex.StartCodex(t, "TestFakeCodexHelper", fakecodex.Spec{Lock: w.lock, Thread: w.id, Tools: []fakecodex.Tool{
		{Cmd: "sleep 300; echo done"},
		{Cmd: "read x < " + w.fifo + "; sleep 301; echo done"},
	}}, false)
	bystander := startMarked(t, w.id, "302")
	seen := childOf(t, c.Tools[0], "sleep")

	o := discover(t, w.a)[w.id]
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != c.Cmd.Process.Pid {
		t.Fatalf("owners %+v, want the fake Codex %d", o.Owners, c.Cmd.Process.Pid)
	}
	if len(o.Problems) != 0 {
		t.Fatalf("problems while the owner lives: %+v", o.Problems)
	}

	w.release(t)
	late := childOf(t, c.Tools[1], "sleep") // forked after the last look
	c.Kill()
	for _, pid := range c.Tools {
		waitGone(t, pid, fmt.Sprintf("the tool's bash %d (its death signal)", pid))
	}

	o = discover(t, w.a)[w.id]
	got := orphansByPID(t, o)
	wantOrphan(t, got, seen, "seen below Codex pid")
	wantOrphan(t, got, late, fmt.Sprintf("in the session of the tool pid %d", c.Tools[1]))
	wantSuspect(t, got, bystander.Process.Pid, "a process started elsewhere with the variable")
	if len(got) != 3 {
		t.Errorf("named %d processes, want 3: %+v", len(got), got)
	}
}

// TestCodexOrphansInItsOwnGroup: a Codex that leads its own session and
// group (as sessiond launches it) starts a plain child; what that child
// forks after the last look is proven the dead Codex's by the session it
// is in. The variable alone still proves nothing.
func TestCodexOrphansInItsOwnGroup(t *testing.T) {
	w := newOrphanWorld(t)
	c := fakecodex.StartCodex(t, "TestFakeCodexHelper", fakecodex.Spec{Lock: w.lock, Thread: w.id, Tools: []fakecodex.Tool{
		{Cmd: "read x < " + w.fifo + "; sleep 303; echo done", Plain: true},
	}}, true)
	bystander := startMarked(t, w.id, "304")
	if o := discover(t, w.a)[w.id]; len(o.Owners) != 1 || len(o.Problems) != 0 {
		t.Fatalf("owner alive: owners %+v problems %+v", o.Owners, o.Problems)
	}
	w.release(t)
	late := childOf(t, c.Tools[0], "sleep")
	if late.SID != c.Cmd.Process.Pid {
		t.Fatalf("the plain child's sleep is in session %d, want the fake's %d", late.SID, c.Cmd.Process.Pid)
	}
	owner := c.Cmd.Process.Pid
	c.Kill()
	waitGone(t, owner, "the fake Codex")

	got := orphansByPID(t, discover(t, w.a)[w.id])
	wantOrphan(t, got, late, fmt.Sprintf("in the session Codex pid %d led", owner))
	wantSuspect(t, got, bystander.Process.Pid, "a process started elsewhere with the variable")
	// The plain child itself (no death signal) lives on too, seen below
	// the owner.
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if bash := snap.Procs[c.Tools[0]]; !bash.Exited() {
		wantOrphan(t, got, bash, "seen below Codex pid")
	}
}

// TestCodexTmuxPanesAreSuspects: a Codex tool starts a real tmux server,
// which takes the tool's environment, CODEX_THREAD_ID included, and hands
// it to every pane, the first and one opened after Codex died. Once Codex
// is killed, the tool's own leftover is a reapable orphan; the server and
// its panes (sid their own shell, parent the server) are suspects only.
func TestCodexTmuxPanesAreSuspects(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux")
	}
	w := newOrphanWorld(t)
	dir, err := os.MkdirTemp("", "cxtmux")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	t.Cleanup(func() {
		exec.Command(tmux, "-S", sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	c := fakecodex.StartCodex(t, "TestFakeCodexHelper", fakecodex.Spec{Lock: w.lock, Thread: w.id, Tools: []fakecodex.Tool{
		{Cmd: fmt.Sprintf("unset TMUX TMUX_PANE; %s -S %s -f /dev/null new-session -d -s cx 'exec sleep 305'; sleep 306; echo done", tmux, sock)},
	}}, false)
	left := childOf(t, c.Tools[0], "sleep") // the tool's bash went on past tmux
	panePIDs := func() []int {
		out, err := exec.Command(tmux, "-S", sock, "list-panes", "-a", "-F", "#{pane_pid}").Output()
		if err != nil {
			t.Fatalf("list panes: %v", err)
		}
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			pid, _ := strconv.Atoi(f)
			pids = append(pids, pid)
		}
		return pids
	}
	first := panePIDs()
	if len(first) != 1 {
		t.Fatalf("panes %v", first)
	}
	if o := discover(t, w.a)[w.id]; len(o.Owners) != 1 || len(o.Problems) != 0 {
		t.Fatalf("owner alive: owners %+v problems %+v", o.Owners, o.Problems)
	}
	c.Kill()
	waitGone(t, c.Tools[0], "the tool's bash")
	// A pane opened after Codex died, from a client that never carried
	// the variable: the server's environment gives it.
	if out, err := exec.Command(tmux, "-S", sock, "new-window", "-d", "exec sleep 307").CombinedOutput(); err != nil {
		t.Fatalf("new-window: %v %s", err, out)
	}
	var panes []int
	testenv.Eventually(t, 10*time.Second, "the second pane", func() bool {
		panes = panePIDs()
		return len(panes) == 2
	})

	// The premise: the server and every pane carry the session's variable,
	// each pane in a session of its own below the server. A pane just
	// forked may not have called setsid yet: wait for it.
	var server *proc.Process
	premise := func(snap *proc.Snapshot) string {
		pane := snap.Procs[first[0]]
		if pane == nil {
			return fmt.Sprintf("the first pane %d is gone", first[0])
		}
		server = snap.Procs[pane.PPID]
		if server == nil || len(server.Argv) == 0 || !strings.HasPrefix(filepath.Base(server.Argv[0]), "tmux") {
			return fmt.Sprintf("the pane's parent %+v is no tmux server", server)
		}
		for _, pid := range append([]int{server.Identity.PID}, panes...) {
			p := snap.Procs[pid]
			if p == nil || p.Env[threadVar] != w.id {
				return fmt.Sprintf("pid %d does not carry %s=%s: %+v", pid, threadVar, w.id, p)
			}
			if pid != server.Identity.PID && (p.SID != pid || p.PPID != server.Identity.PID) {
				return fmt.Sprintf("pane %d: sid %d, parent %d; want its own session below the server %d", pid, p.SID, p.PPID, server.Identity.PID)
			}
		}
		return ""
	}
	var why string
	if !testenv.Poll(10*time.Second, func() bool {
		snap, err := proc.NewHost().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		why = premise(snap)
		return why == ""
	}) {
		t.Fatal(why)
	}

	got := orphansByPID(t, discover(t, w.a)[w.id])
	wantOrphan(t, got, left, "seen below Codex pid")
	wantSuspect(t, got, server.Identity.PID, "the tmux server")
	for _, pid := range panes {
		wantSuspect(t, got, pid, "a tmux pane")
	}
	var reapable []int
	for pid, is := range got {
		if is.Process != nil {
			reapable = append(reapable, pid)
		}
	}
	if !slices.Equal(reapable, []int{left.Identity.PID}) {
		t.Errorf("reapable %v, want only the tool's leftover %d", reapable, left.Identity.PID)
	}
}

// TestCodexRestartLeavesSuspects: the memory of the owners' trees is not
// saved. After a restart (a new adapter, given the old one's checkpoint)
// what a Codex that died before it left behind is only suspect: named,
// never reapable.
func TestCodexRestartLeavesSuspects(t *testing.T) {
	w := newOrphanWorld(t)
	c := fakecodex.StartCodex(t, "TestFakeCodexHelper", fakecodex.Spec{Lock: w.lock, Thread: w.id, Tools: []fakecodex.Tool{
		{Cmd: "sleep 308; echo done"},
	}}, false)
	left := childOf(t, c.Tools[0], "sleep")
	if o := discover(t, w.a)[w.id]; len(o.Owners) != 1 || len(o.Problems) != 0 {
		t.Fatalf("owner alive: owners %+v problems %+v", o.Owners, o.Problems)
	}
	c.Kill()
	waitGone(t, c.Tools[0], "the tool's bash")
	wantOrphan(t, orphansByPID(t, discover(t, w.a)[w.id]), left, "seen below Codex pid")

	restarted := New(Config{Roots: []string{w.root}, NoLearnedRoots: true})
	restarted.Restore(w.a.Checkpoint().Put)
	got := orphansByPID(t, discover(t, restarted)[w.id])
	wantSuspect(t, got, left.Identity.PID, "the dead Codex's leftover, after a restart")
	if len(got) != 1 {
		t.Errorf("named %+v, want the one suspect", got)
	}
}
