package codex

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Process tables built by hand: the corner cases of orphans.go that real
// processes reach only by chance (pid reuse, a snapshot caught between a
// fork and a setsid).

const (
	synBoot   = "boot-1"
	synThread = "019a0000-0000-7000-8000-000000000001"
)

// synProc is one row: pid, parent, session, group and start ticks.
type synProc struct {
	pid, ppid, sid, pgid int
	ticks                uint64
	thread               string
	argv0                string
}

func synSnap(rows ...synProc) *proc.Snapshot {
	s := &proc.Snapshot{BootID: synBoot, Procs: map[int]*proc.Process{}}
	for _, r := range rows {
		p := &proc.Process{
			Identity: proc.Identity{BootID: synBoot, PID: r.pid, StartTicks: r.ticks},
			PPID:     r.ppid, SID: r.sid, PGID: r.pgid, State: 'S', UID: os.Getuid(),
			Argv: []string{cmpOr(r.argv0, "sleep")}, Env: map[string]string{},
		}
		if r.thread != "" {
			p.Env[threadVar] = r.thread
		}
		s.Procs[r.pid] = p
	}
	return s
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// stubHost answers StartTime from the start ticks (one tick a second from
// base); nothing else is used by addToolProcs.
type stubHost struct {
	ProcHost
	base time.Time
}

func (h stubHost) StartTime(id proc.Identity) (time.Time, error) {
	return h.base.Add(time.Duration(id.StartTicks) * time.Second), nil
}

var synBase = time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)

// isCodexTool is the tool test lineage.Memory.AddToolProcs makes of
// threadVar: a setsid'd child of an owner leads a tool session if Codex
// gave it a thread.
func isCodexTool(c *proc.Process) bool { return threadOf(c) != "" }

func synAdapter() *Adapter {
	return New(Config{Roots: []string{"/nonexistent"}, NoLearnedRoots: true, Host: stubHost{base: synBase}})
}

// synPass runs addToolProcs for one session owned by owner (none when
// owner is zero) and returns its observation.
func synPass(a *Adapter, snap *proc.Snapshot, owner proc.Identity) adapters.Observed {
	o := adapters.Observed{UpstreamID: synThread, LastActivity: synBase}
	if !owner.IsZero() {
		o.Owners = []adapters.Owner{{Identity: owner}}
	}
	obs := []adapters.Observed{o}
	a.addToolProcs(obs, snap, nil)
	return obs[0]
}

func synID(pid int, ticks uint64) proc.Identity {
	return proc.Identity{BootID: synBoot, PID: pid, StartTicks: ticks}
}

// reapable is the pids a reap would signal; named every pid named.
func reapable(o adapters.Observed) (reap, named []int) {
	for _, is := range o.Problems {
		if is.Kind != session.ProblemOrphanProcesses {
			continue
		}
		pid, _ := strconv.Atoi(is.Key)
		named = append(named, pid)
		if is.Process != nil {
			reap = append(reap, pid)
		}
	}
	return reap, named
}

// The owner 100 (its own session 1, group 1) runs tool 200 (setsid'd,
// thread set) whose bash forked 201.
var (
	synOwner = synProc{pid: 100, ppid: 1, sid: 1, pgid: 1, ticks: 10, argv0: "codex"}
	synTool  = synProc{pid: 200, ppid: 100, sid: 200, pgid: 200, ticks: 20, thread: synThread, argv0: "bash"}
	synKid   = synProc{pid: 201, ppid: 200, sid: 200, pgid: 200, ticks: 21, thread: synThread}
)

// A process seen below the owner that left its session afterwards (a tmux
// server caught between its fork and its setsid) is no longer proven the
// owner's: a suspect.
func TestOrphanThatLeftItsSessionIsSuspect(t *testing.T) {
	a := synAdapter()
	server := synProc{pid: 202, ppid: 201, sid: 200, pgid: 200, ticks: 22, thread: synThread, argv0: "tmux"}
	synPass(a, synSnap(synOwner, synTool, synKid, server), synID(100, 10))

	server.ppid, server.sid, server.pgid = 1, 202, 202 // daemonized
	kid := synKid
	kid.ppid = 1 // its bash died of the death signal
	o := synPass(a, synSnap(kid, server), proc.Identity{})
	reap, named := reapable(o)
	if fmt.Sprint(reap) != "[201]" || fmt.Sprint(named) != "[201 202]" {
		t.Fatalf("reapable %v of named %v, want [201] of [201 202]: %+v", reap, named, o.Problems)
	}
}

// A remembered tool session whose leader's pid is another process now
// proves nothing: that pid leads another session.
func TestReusedToolSessionIsSuspect(t *testing.T) {
	a := synAdapter()
	synPass(a, synSnap(synOwner, synTool, synKid), synID(100, 10))
	// The tool's session ended; pid 200 is a pane's shell now, whose child
	// carries the variable (the pane's server got it from a tool).
	shell := synProc{pid: 200, ppid: 300, sid: 200, pgid: 200, ticks: 90, thread: synThread, argv0: "bash"}
	kid := synProc{pid: 203, ppid: 200, sid: 200, pgid: 200, ticks: 91, thread: synThread}
	o := synPass(a, synSnap(shell, kid), proc.Identity{})
	if reap, named := reapable(o); len(reap) != 0 || len(named) != 2 {
		t.Fatalf("reapable %v of named %v, want none of 2: %+v", reap, named, o.Problems)
	}
}

// A tool session for another thread proves nothing for this one.
func TestToolSessionOfAnotherThread(t *testing.T) {
	a := synAdapter()
	other := synTool
	other.thread = "019a0000-0000-7000-8000-0000000000ff"
	synPass(a, synSnap(synOwner, other), synID(100, 10))
	late := synProc{pid: 204, ppid: 1, sid: 200, pgid: 200, ticks: 30, thread: synThread}
	o := synPass(a, synSnap(late), proc.Identity{})
	if reap, named := reapable(o); len(reap) != 0 || len(named) != 1 {
		t.Fatalf("reapable %v of named %v, want none of 1: %+v", reap, named, o.Problems)
	}
}

// The dead owner's own group proves a process its, unless the owner's pid
// is another process now.
func TestOwnerGroupAndItsReuse(t *testing.T) {
	leader := synProc{pid: 100, ppid: 1, sid: 100, pgid: 100, ticks: 10, argv0: "codex"}
	late := synProc{pid: 205, ppid: 1, sid: 100, pgid: 100, ticks: 40, thread: synThread}

	a := synAdapter()
	synPass(a, synSnap(leader), synID(100, 10))
	o := synPass(a, synSnap(late), proc.Identity{})
	if reap, _ := reapable(o); fmt.Sprint(reap) != "[205]" || !strings.Contains(o.Problems[0].Detail, "in the session Codex pid 100 led") {
		t.Fatalf("reapable %v, want [205] by the owner's session: %+v", reap, o.Problems)
	}

	a = synAdapter()
	synPass(a, synSnap(leader), synID(100, 10))
	reused := synProc{pid: 100, ppid: 1, sid: 100, pgid: 100, ticks: 50, argv0: "zsh"}
	o = synPass(a, synSnap(reused, late), proc.Identity{})
	if reap, named := reapable(o); len(reap) != 0 || len(named) != 1 {
		t.Fatalf("reapable %v of named %v with the owner's pid reused: %+v", reap, named, o.Problems)
	}
}

// While an owner lives, a process in its tree that started after the
// rollout's last write is progress; one that only carries the variable is
// not.
func TestToolStartIsProgressOnlyInTheOwnersTree(t *testing.T) {
	a := synAdapter()
	stray := synProc{pid: 206, ppid: 1, sid: 206, pgid: 206, ticks: 99, thread: synThread}
	o := synPass(a, synSnap(synOwner, synTool, stray), synID(100, 10))
	if want := synBase.Add(20 * time.Second); !o.LastActivity.Equal(want) || len(o.Problems) != 0 {
		t.Fatalf("last activity %v, want the tool's start %v; problems %+v", o.LastActivity, want, o.Problems)
	}
}

// What is remembered is bounded, and a dead owner is forgotten once
// nothing of it is left.
func TestOwnerMemoryBounded(t *testing.T) {
	a := synAdapter()
	rows := []synProc{synOwner}
	for i := 0; i < maxRememberedDesc+50; i++ {
		pid := 1000 + i
		rows = append(rows, synProc{pid: pid, ppid: 100, sid: pid, pgid: pid, ticks: 20, thread: synThread})
	}
	synPass(a, synSnap(rows...), synID(100, 10))
	desc, tools, ok := a.lineage.Kept(synID(100, 10))
	if !ok || desc != maxRememberedDesc || tools != maxRememberedTools {
		t.Fatalf("memory %d descendants, %d tools; want %d, %d", desc, tools, maxRememberedDesc, maxRememberedTools)
	}
	synPass(a, synSnap(), proc.Identity{})
	if a.lineage.Len() != 0 {
		t.Fatalf("a dead owner with nothing left is still remembered: %d", a.lineage.Len())
	}

	a = synAdapter()
	o := synID(100, 10)
	snap := synSnap(synOwner)
	for i := 0; i < maxRememberedOwners+10; i++ {
		snap.Procs[100000+i] = &proc.Process{Identity: synID(100000+i, 1), PPID: 1, State: 'S'}
	}
	// The memory full of other owners, alive.
	tr := lineage.NewTree(snap)
	for i := 0; i < maxRememberedOwners+10; i++ {
		a.lineage.Remember(tr, synID(100000+i, 1), "", isCodexTool)
	}
	synPass(a, snap, o)
	if _, _, remembered := a.lineage.Kept(o); a.lineage.Len() > maxRememberedOwners+10 || remembered {
		t.Fatalf("remembered %d owners past the bound", a.lineage.Len())
	}
}
