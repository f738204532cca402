package lineage

import (
	"strings"
	"testing"

	"github.com/sessiond/sessiond/proc"
)

// row is a process of a synthetic snapshot.
func row(pid, ticks, ppid, sid, pgid int, env ...string) *proc.Process {
	p := &proc.Process{Identity: proc.Identity{BootID: "b", PID: pid, StartTicks: uint64(ticks)}, PPID: ppid, SID: sid, PGID: pgid, State: 'S', Env: map[string]string{}}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		p.Env[k] = v
	}
	return p
}

func snap(ps ...*proc.Process) *proc.Snapshot {
	s := &proc.Snapshot{BootID: "b", Procs: map[int]*proc.Process{}}
	for _, p := range ps {
		s.Procs[p.Identity.PID] = p
	}
	return s
}

// reparented is p after its parent died.
func reparented(p *proc.Process) *proc.Process {
	q := *p
	q.PPID = 1
	return &q
}

func isTool(p *proc.Process) bool { return p.Env["TOOL"] != "" }

var bounds = Bounds{Owners: 8, Desc: 16, Tools: 4}

// pass runs what an adapter runs each pass: remember the live owners,
// forget what is gone, index.
func pass(m *Memory, s *proc.Snapshot, owners ...*proc.Process) *Evidence {
	tr := NewTree(s)
	for _, o := range owners {
		m.Remember(tr, o.Identity, "S", isTool)
	}
	m.Forget(tr)
	return m.Evidence(tr)
}

func wantProof(t *testing.T, ev *Evidence, p *proc.Process, owner *proc.Process, how How) {
	t.Helper()
	pr, ok := ev.Attribute(p)
	if !ok || pr.Owner != owner.Identity || pr.How != how || pr.Label != "S" {
		t.Errorf("pid %d: proof %+v (found %v), want %v of owner %d", p.Identity.PID, pr, ok, how, owner.Identity.PID)
	}
}

func wantNone(t *testing.T, ev *Evidence, p *proc.Process, what string) {
	t.Helper()
	if pr, ok := ev.Attribute(p); ok {
		t.Errorf("%s (pid %d) is proven %+v: it only carries the marker", what, p.Identity.PID, pr)
	}
}

// An owner killed mid tool: what it started is proven its by the tree
// seen while it lived, what a tmux server started from its tool opens is
// not, nor is anything to a memory that never saw the owner (a restart).
func TestAttributeByTheTree(t *testing.T) {
	owner := row(100, 1000, 10, 10, 100)
	tool := row(200, 1100, 100, 200, 200, "TOOL=1") // setsid'd child: a tool session
	py := row(201, 1200, 200, 200, 200, "TOOL=1")   // what the tool forked
	mcp := row(300, 1100, 100, 10, 100, "TOOL=1")   // a plain child in the owner's group
	server := row(400, 1150, 1, 400, 400, "TOOL=1") // a tmux server: left the tool's session at once
	pane := row(401, 1160, 400, 401, 401, "TOOL=1") // its pane: a session of its own
	m := New(bounds)
	ev := pass(m, snap(owner, tool, py, mcp, server, pane), owner)
	wantProof(t, ev, py, owner, Seen) // the adapter skips it: its owner lives

	late := row(202, 1300, 200, 200, 200, "TOOL=1") // forked after the last look
	dead := snap(reparented(tool), py, reparented(mcp), server, pane, late)
	ev = pass(m, dead)
	wantProof(t, ev, tool, owner, Seen)
	wantProof(t, ev, py, owner, Seen)
	wantProof(t, ev, mcp, owner, Seen)
	wantProof(t, ev, late, owner, InTool)
	wantNone(t, ev, server, "the tmux server")
	wantNone(t, ev, pane, "the tmux pane")
	if got := len(ev.LeftBehind()); got != 3 {
		t.Errorf("left behind %d, want the 3 seen", got)
	}
	if pr, _ := ev.Attribute(late); !strings.Contains(pr.Why("claude"), "tool pid 200 that claude pid 100") {
		t.Errorf("why: %q", pr.Why("claude"))
	}

	// A restart: a memory that never saw the owner proves nothing.
	fresh := pass(New(bounds), dead)
	for _, p := range []*proc.Process{tool, py, mcp, late} {
		wantNone(t, fresh, p, "after a restart")
	}
	var nilEv *Evidence
	wantNone(t, nilEv, py, "no evidence")
}

// An owner that leads its own session and group: what is in them is
// its, unless its pid is another process's now.
func TestAttributeByTheOwnersSessionAndGroup(t *testing.T) {
	owner := row(100, 1000, 10, 100, 100)
	m := New(bounds)
	pass(m, snap(owner), owner)
	inSession := row(500, 1200, 1, 100, 501, "TOOL=1")
	inGroup := row(502, 1200, 1, 77, 100, "TOOL=1")
	older := row(503, 900, 1, 100, 100, "TOOL=1") // started before the owner
	ev := pass(m, snap(inSession, inGroup, older))
	wantProof(t, ev, inSession, owner, InSession)
	wantProof(t, ev, inGroup, owner, InGroup)
	wantNone(t, ev, older, "a process older than the owner")

	reused := row(100, 5000, 1, 100, 100) // the pid is another process now
	ev = pass(m, snap(reused, inSession, inGroup))
	wantNone(t, ev, inSession, "in a session whose leader's pid is another process")
}

// A process seen below the owner that left its session (a daemon) is no
// proof, only a hint; the newest of two owners that saw a process holds
// it.
func TestLeftAndNested(t *testing.T) {
	owner := row(100, 1000, 10, 10, 100)
	tool := row(200, 1100, 100, 200, 200, "TOOL=1")
	daemon := row(210, 1150, 200, 200, 200, "TOOL=1")
	nested := row(220, 1200, 200, 200, 200) // an owner run as a tool
	its := row(221, 1300, 220, 200, 200, "TOOL=1")
	m := New(bounds)
	pass(m, snap(owner, tool, daemon, nested, its), owner, nested)
	if m.Len() != 2 {
		t.Fatalf("remembered %d owners", m.Len())
	}
	setsid := *daemon
	setsid.SID, setsid.PGID, setsid.PPID = 210, 210, 1
	ev := pass(m, snap(reparented(tool), &setsid, nested, its), nested)
	if pr, ok := ev.Attribute(&setsid); ok || pr.How != Left || pr.Owner != owner.Identity || !strings.Contains(pr.Why("x"), "left the session") {
		t.Errorf("the daemon: %+v %v", pr, ok)
	}
	wantProof(t, ev, its, nested, Seen)
}

// What is gone is forgotten; bounds hold.
func TestForgetAndBounds(t *testing.T) {
	owner := row(100, 1000, 10, 10, 100)
	tool := row(200, 1100, 100, 200, 200, "TOOL=1")
	m := New(Bounds{Owners: 1, Desc: 1, Tools: 1})
	pass(m, snap(owner, tool, row(300, 1100, 100, 300, 300, "TOOL=1")), owner)
	if o := m.owners[owner.Identity]; len(o.desc) != 1 || len(o.tools) != 1 {
		t.Errorf("bounds: %+v", o)
	}
	if m.Remember(NewTree(snap(owner, row(101, 1000, 1, 101, 101))), row(101, 1000, 1, 101, 101).Identity, "", isTool) {
		t.Error("a second owner remembered past the bound")
	}
	pass(m, snap(reparented(tool)))
	if m.Len() != 1 {
		t.Fatal("the dead owner forgotten while its tool lives")
	}
	if l := m.LabelOfPID(100); l != "S" {
		t.Errorf("label %q", l)
	}
	pass(m, snap())
	if m.Len() != 0 {
		t.Errorf("remembered %d owners with nothing left of them", m.Len())
	}
}

// In a tagged memory a tool session proves only what carries its
// leader's tag (Codex: the thread it gave the tool), and what is bounded
// is counted by Kept.
func TestTaggedToolSessions(t *testing.T) {
	tag := func(p *proc.Process) string { return p.Env["TOOL"] }
	owner := row(100, 1000, 10, 10, 100)
	tool := row(200, 1100, 100, 200, 200, "TOOL=a")
	m := NewTagged(bounds, tag)
	pass(m, snap(owner, tool), owner)
	if d, n, ok := m.Kept(owner.Identity); !ok || d != 1 || n != 1 {
		t.Errorf("kept %d descendants, %d tools (%v), want 1, 1", d, n, ok)
	}
	same := row(201, 1300, 1, 200, 200, "TOOL=a")  // forked after the last look
	other := row(202, 1300, 1, 200, 200, "TOOL=b") // in it, with another tag
	ev := pass(m, snap(reparented(tool), same, other))
	wantProof(t, ev, same, owner, InTool)
	wantNone(t, ev, other, "a process with another tag")
	// Untagged, the session is enough.
	u := New(bounds)
	pass(u, snap(owner, tool), owner)
	wantProof(t, pass(u, snap(reparented(tool), same, other)), other, owner, InTool)
	if _, _, ok := u.Kept(row(7, 1, 1, 7, 7).Identity); ok {
		t.Error("kept an owner never seen")
	}
}
