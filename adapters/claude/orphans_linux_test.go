//go:build linux

package claude

import (
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
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/internal/testkit/toolowner"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// TestToolOwnerHelper is the fake claude's process (toolowner.Start).
func TestToolOwnerHelper(t *testing.T) { toolowner.Helper(t) }

// orphanWorld is a config root with a session killed mid tool, owned (by
// its registry entry) by a fake claude that starts its tools as Claude
// Code 2.1.328 does, and a fifo its tools may wait on.
type orphanWorld struct {
	root  *claudetest.Root
	cwd   string
	id    string
	fifo  string
	owner *toolowner.Owner
	a     *Adapter
}

// claudeToolEnv is what 2.1.328 puts in every tool's environment.
func claudeToolEnv(id string) []string {
	return []string{"CLAUDECODE=1", "CLAUDE_PID={pid}", "CLAUDE_CODE_SESSION_ID=" + id}
}

func newOrphanWorld(t *testing.T, spec toolowner.Spec) *orphanWorld {
	t.Helper()
	r, cwd := newRoot(t)
	w := &orphanWorld{root: r, cwd: cwd, id: claudetest.NewSessionID(), fifo: filepath.Join(t.TempDir(), "go")}
	if err := syscall.Mkfifo(w.fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tr := claudetest.NewTranscript(w.id, cwd, time.Now())
	tr.CrashMidTool("run the long job", "sleep 300")
	r.WriteTranscript(t, tr)
	// {id} and {fifo} in the spec are the world's.
	fill := func(ss []string) []string {
		out := make([]string, len(ss))
		for i, s := range ss {
			out[i] = strings.NewReplacer("{id}", w.id, "{fifo}", w.fifo).Replace(s)
		}
		return out
	}
	for i := range spec.Tools {
		spec.Tools[i].Cmd = fill([]string{spec.Tools[i].Cmd})[0]
		spec.Tools[i].Env = fill(spec.Tools[i].Env)
	}
	if spec.Env == nil {
		spec.Env = claudeToolEnv(w.id)
	}
	spec.Env = fill(spec.Env)
	w.owner = toolowner.Start(t, "TestToolOwnerHelper", spec)
	r.WriteRegistry(t, claudetest.LiveEntry(t, w.owner.PID(), w.id, cwd, "busy"))
	w.a = newTestAdapter(t, &testFS{}, r.Dir)
	return w
}

// look is one pass: the session's orphan_processes issues by pid.
func (w *orphanWorld) look(t *testing.T, a *Adapter) (*adapters.Observed, map[int]adapters.Issue) {
	t.Helper()
	o := mustFind(t, discover(t, a, snapshot(t)), w.id)
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
	return o, out
}

// aliveOwned: the session's owner lives and nothing is named.
func (w *orphanWorld) aliveOwned(t *testing.T) {
	t.Helper()
	o, got := w.look(t, w.a)
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != w.owner.PID() || len(got) != 0 {
		t.Fatalf("owner alive: owners %+v, named %+v", o.Owners, got)
	}
}

func (w *orphanWorld) release(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(w.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// childOf waits for a live child of ppid whose argv starts with argv0.
func childOf(t *testing.T, ppid int, argv0 string) *proc.Process {
	t.Helper()
	var found *proc.Process
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("a %s below pid %d", argv0, ppid), func() bool {
		for _, p := range snapshot(t).Children(ppid) {
			if !p.Exited() && len(p.Argv) > 0 && p.Argv[0] == argv0 {
				found = p
				return true
			}
		}
		return false
	})
	return found
}

func procOf(t *testing.T, pid int) *proc.Process {
	t.Helper()
	p := snapshot(t).Procs[pid]
	if p.Exited() {
		t.Fatalf("pid %d is gone", pid)
	}
	return p
}

// startMarked starts `sleep` as the test's own child with env: nothing
// ties it to the session but the variables.
func startMarked(t *testing.T, secs string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sleep", secs)
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// wantOrphan: p is a reapable orphan, by its identity.
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

// wantSuspect: pid is named, never with a Process (never reaped), and its
// detail says so.
func wantSuspect(t *testing.T, got map[int]adapters.Issue, pid int, what string) {
	t.Helper()
	is, ok := got[pid]
	switch {
	case !ok:
		t.Errorf("%s (pid %d) is not named as a suspect: %+v", what, pid, got)
	case is.Process != nil:
		t.Errorf("%s (pid %d) only carries the variables, yet is reapable: %+v", what, pid, is)
	case !strings.Contains(is.Detail, "suspect, not reaped") || !strings.Contains(is.Detail, fmt.Sprintf("pid %d ", pid)):
		t.Errorf("%s (pid %d): detail %q does not say it is a suspect left alone", what, pid, is.Detail)
	}
}

func reapable(got map[int]adapters.Issue) []int {
	var out []int
	for pid, is := range got {
		if is.Process != nil {
			out = append(out, pid)
		}
	}
	slices.Sort(out)
	return out
}

// A claude killed -9 mid tool. Its tools' bash live on, re-parented, and
// so does what they forked: reapable orphans, both what a pass saw below
// the claude and what a tool forked after the last look (still in the
// tool's session). A process that only carries CLAUDE_PID and
// CLAUDE_CODE_SESSION_ID of the dead claude, started by another parent,
// is a suspect: named, never reapable.
func TestClaudeOrphansByTheTree(t *testing.T) {
	w := newOrphanWorld(t, toolowner.Spec{Tools: []toolowner.Tool{
		{Cmd: "sleep 300; echo done"},
		{Cmd: "read x < {fifo}; sleep 301; echo done"},
	}})
	bystander := startMarked(t, "302", "CLAUDE_PID="+strconv.Itoa(w.owner.PID()), "CLAUDE_CODE_SESSION_ID="+w.id)
	seen := childOf(t, w.owner.Tools[0], "sleep")
	w.aliveOwned(t)

	w.release(t)
	late := childOf(t, w.owner.Tools[1], "sleep") // forked after the last look
	bash := []*proc.Process{procOf(t, w.owner.Tools[0]), procOf(t, w.owner.Tools[1])}
	w.owner.Kill()

	_, got := w.look(t, w.a)
	wantOrphan(t, got, seen, fmt.Sprintf("seen below claude pid %d", w.owner.PID()))
	wantOrphan(t, got, late, fmt.Sprintf("in the session of the tool pid %d that claude pid %d started", w.owner.Tools[1], w.owner.PID()))
	for _, b := range bash {
		wantOrphan(t, got, b, "seen below claude pid")
	}
	wantSuspect(t, got, bystander.Process.Pid, "a process started elsewhere with the variables")
	if len(got) != 5 {
		t.Errorf("named %d processes, want 5: %+v", len(got), got)
	}
}

// A claude's tool starts a real tmux server, which takes the tool's
// environment (CLAUDE_PID, CLAUDE_CODE_SESSION_ID) and hands it to every
// pane, the first and one opened after claude died. Once claude is
// killed, the tool's own leftovers are reapable; the server and its panes
// are suspects only.
func TestClaudeTmuxPanesAreSuspects(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux")
	}
	dir, err := os.MkdirTemp("", "cltmux")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	t.Cleanup(func() {
		exec.Command(tmux, "-S", sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	w := newOrphanWorld(t, toolowner.Spec{Tools: []toolowner.Tool{
		{Cmd: fmt.Sprintf("unset TMUX TMUX_PANE; %s -S %s -f /dev/null new-session -d -s cl 'exec sleep 305'; sleep 306; echo done", tmux, sock)},
	}})
	left := childOf(t, w.owner.Tools[0], "sleep") // the tool's bash went on past tmux
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
	if first := panePIDs(); len(first) != 1 {
		t.Fatalf("panes %v", first)
	}
	w.aliveOwned(t)
	bash := procOf(t, w.owner.Tools[0])
	w.owner.Kill()
	// A pane opened after claude died, from a client that never carried
	// the variables: the server's environment gives them.
	if out, err := exec.Command(tmux, "-S", sock, "new-window", "-d", "exec sleep 307").CombinedOutput(); err != nil {
		t.Fatalf("new-window: %v %s", err, out)
	}
	var panes []int
	testenv.Eventually(t, 10*time.Second, "the second pane", func() bool {
		panes = panePIDs()
		return len(panes) == 2
	})

	snap := snapshot(t)
	server := snap.Procs[snap.Procs[panes[0]].PPID]
	if server == nil || len(server.Argv) == 0 || !strings.HasPrefix(filepath.Base(server.Argv[0]), "tmux") {
		t.Fatalf("the pane's parent %+v is no tmux server", server)
	}
	// The premise: the server and every pane carry the dead claude's
	// variables, each pane in a session of its own below the server.
	for _, pid := range append([]int{server.Identity.PID}, panes...) {
		p := snap.Procs[pid]
		if p == nil || p.Env["CLAUDE_CODE_SESSION_ID"] != w.id || p.Env["CLAUDE_PID"] != strconv.Itoa(w.owner.PID()) {
			t.Fatalf("pid %d does not carry the dead claude's variables: %+v", pid, p)
		}
		if pid != server.Identity.PID && (p.SID != pid || p.PPID != server.Identity.PID) {
			t.Fatalf("pane %d: sid %d, parent %d; want its own session below the server %d", pid, p.SID, p.PPID, server.Identity.PID)
		}
	}

	_, got := w.look(t, w.a)
	wantOrphan(t, got, left, "seen below claude pid")
	wantOrphan(t, got, bash, "seen below claude pid")
	wantSuspect(t, got, server.Identity.PID, "the tmux server")
	for _, pid := range panes {
		wantSuspect(t, got, pid, "a tmux pane")
	}
	if want := []int{min(left.Identity.PID, bash.Identity.PID), max(left.Identity.PID, bash.Identity.PID)}; !slices.Equal(reapable(got), want) {
		t.Errorf("reapable %v, want only the tool's own leftovers %v", reapable(got), want)
	}
}

// MCP stdio servers are plain children in claude's process group, naming
// only the session. A claude leading its group (as a shell with job
// control starts it) dies: its MCP server is reapable, and so is what the
// server forked after the last look, by the group. A process elsewhere
// that carries only the session id is a suspect once the claude is dead
// (while it lives it may be that claude's: not named).
func TestClaudeMCPServersByTheGroup(t *testing.T) {
	w := newOrphanWorld(t, toolowner.Spec{Setpgid: true, Env: []string{}, Tools: []toolowner.Tool{
		{Cmd: "read x < {fifo}; sleep 303; echo done", Plain: true, Env: []string{"CLAUDE_CODE_SESSION_ID={id}"}},
	}})
	elsewhere := startMarked(t, "304", "CLAUDE_CODE_SESSION_ID="+w.id)
	server := procOf(t, w.owner.Tools[0])
	if server.PGID != w.owner.PID() || server.SID == w.owner.PID() {
		t.Fatalf("the premise: the MCP server %+v is in the group, not the session, the fake claude %d leads", server, w.owner.PID())
	}
	w.aliveOwned(t)
	w.release(t)
	late := childOf(t, server.Identity.PID, "sleep")
	owner := w.owner.PID()
	w.owner.Kill()

	_, got := w.look(t, w.a)
	wantOrphan(t, got, server, fmt.Sprintf("seen below claude pid %d", owner))
	wantOrphan(t, got, late, fmt.Sprintf("in the process group claude pid %d led", owner))
	wantSuspect(t, got, elsewhere.Process.Pid, "a process elsewhere with the session id")
	if len(got) != 3 {
		t.Errorf("named %+v, want 3", got)
	}
}

// The memory of the trees is not saved. After a restart (a new adapter)
// what a claude that died before it left behind is only suspect: named,
// never reapable; the same adapter that saw the claude alive reaps it.
func TestClaudeRestartLeavesSuspects(t *testing.T) {
	w := newOrphanWorld(t, toolowner.Spec{Tools: []toolowner.Tool{{Cmd: "sleep 308; echo done"}}})
	left := childOf(t, w.owner.Tools[0], "sleep")
	w.aliveOwned(t)
	w.owner.Kill()
	_, got := w.look(t, w.a)
	wantOrphan(t, got, left, "seen below claude pid")

	_, got = w.look(t, newTestAdapter(t, &testFS{}, w.root.Dir))
	wantSuspect(t, got, left.Identity.PID, "the dead claude's leftover, after a restart")
	wantSuspect(t, got, w.owner.Tools[0], "the dead claude's tool, after a restart")
	if len(got) != 2 {
		t.Errorf("named %+v, want the two suspects", got)
	}
}
