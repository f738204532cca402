// Package lineage says whether a process an agent left behind is provably
// the agent's, from what the process tree looked like while it lived.
//
// Agents mark their tools' environment (CLAUDE_PID and
// CLAUDE_CODE_SESSION_ID, OPENCODE_PID, CODEX_THREAD_ID), but an
// environment is inherited by anything a tool starts and handed on by
// anything that keeps it: a tmux server started from a tool gives it to
// every pane it opens later, other agents included. A marker picks a
// session; it never proves a process is the session's.
//
// What an unrelated process cannot inherit is its place in the tree. So,
// while an owner lives, each pass remembers (Memory.Remember) its
// descendants, each with the session it was in, and the tool sessions it
// started: the sid of each direct child that leads a session of its own
// (Claude Code 2.1.328, OpenCode 1.18.33 and Codex 0.169.0 run each tool
// so). Once the owner is dead, a process is proven its (Evidence.Attribute)
// only if
//   - it was seen below the owner and is still in the session it had then
//     (one that left it with setsid, a daemon such as a tmux server, is
//     not);
//   - it is in a tool session the owner started (what a tool forked after
//     the last look still carries the sid), and, in a memory made with
//     NewTagged, carries the tag the tool's leader had (Codex: the thread
//     it gave the tool);
//   - it is in the session or process group the dead owner led (the kernel
//     hands out no pid that still names a live group or session), its pid
//     not another process's now.
//
// Anything else is at most a suspect: the adapter may name it, never with
// the identity reap signals.
//
// What was never seen proves nothing: a tool started and killed with its
// owner between two passes leaves only suspects. The memory lives in the
// daemon only, never in a checkpoint: a remembered sid is evidence only
// while passes keep checking that its session still has members and its
// leader's pid is not another process's, and one saved across a stop of
// unknown length may name a session the kernel has since handed to an
// unrelated process.
package lineage

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sessiond/sessiond/proc"
)

// Bounds bound what a Memory keeps.
type Bounds struct {
	// Owners is how many owners are remembered at once; Desc and Tools
	// how many descendants and tool sessions of each.
	Owners, Desc, Tools int
}

// Memory is what was seen below owners while they lived. Not safe for
// concurrent use: adapters hold it under their pass lock.
type Memory struct {
	b      Bounds
	tag    func(*proc.Process) string // nil: tool sessions are not tagged
	owners map[proc.Identity]*owner
}

type owner struct {
	label string
	// tools are the tool sessions it started, by session id.
	tools map[int]tool
	// desc are its descendants at the last look it lived, by pid, each
	// with the session it was in then.
	desc map[int]seen
}

type seen struct {
	id  proc.Identity
	sid int
}

// tool is one tool session an owner started.
type tool struct {
	leader proc.Identity // the child that leads it
	tag    string        // the leader's tag, when it was last seen
}

// New returns an empty memory with bounds b.
func New(b Bounds) *Memory {
	return &Memory{b: b, owners: map[proc.Identity]*owner{}}
}

// NewTagged returns an empty memory with bounds b whose tool sessions are
// tagged: each keeps tag(leader) as it was when its owner was last seen
// alive, and proves a process the owner's only if tag(process) is the
// same. An owner that runs tools for several sessions (Codex's app-server)
// names each tool's session so (CODEX_THREAD_ID): its tool session proves
// nothing for another session's variable.
func NewTagged(b Bounds, tag func(*proc.Process) string) *Memory {
	m := New(b)
	m.tag = tag
	return m
}

// Len is how many owners are remembered.
func (m *Memory) Len() int { return len(m.owners) }

// label is what the adapter named a remembered owner with (its session);
// ok is false when the owner is not remembered.
func (m *Memory) label(id proc.Identity) (label string, ok bool) {
	if o := m.owners[id]; o != nil {
		return o.label, true
	}
	return "", false
}

// Kept is how many descendants and tool sessions are remembered of the
// owner id; ok is false when it is not remembered.
func (m *Memory) Kept(id proc.Identity) (desc, tools int, ok bool) {
	o := m.owners[id]
	if o == nil {
		return 0, 0, false
	}
	return len(o.desc), len(o.tools), true
}

// LabelOfPID is the label of the newest remembered owner at pid with one.
func (m *Memory) LabelOfPID(pid int) string {
	var best proc.Identity
	label := ""
	for id, o := range m.owners {
		if id.PID == pid && o.label != "" && (label == "" || id.StartTicks > best.StartTicks) {
			best, label = id, o.label
		}
	}
	return label
}

// Tree indexes one snapshot's live processes: children by parent, and how
// many live members each session and process group has.
type Tree struct {
	snap          *proc.Snapshot
	kids          map[int][]*proc.Process
	bySID, byPGID map[int]int
}

// NewTree indexes snap.
func NewTree(snap *proc.Snapshot) *Tree {
	t := &Tree{snap: snap, kids: map[int][]*proc.Process{}, bySID: map[int]int{}, byPGID: map[int]int{}}
	for _, p := range snap.Procs {
		if p.Exited() {
			continue
		}
		t.kids[p.PPID] = append(t.kids[p.PPID], p)
		if p.SID > 0 {
			t.bySID[p.SID]++
		}
		if p.PGID > 0 {
			t.byPGID[p.PGID]++
		}
	}
	for _, ks := range t.kids {
		slices.SortFunc(ks, func(a, b *proc.Process) int { return cmp.Compare(a.Identity.PID, b.Identity.PID) })
	}
	return t
}

// Live reports whether id is in snap as that very process, not a zombie.
func Live(snap *proc.Snapshot, id proc.Identity) bool {
	p := snap.Procs[id.PID]
	return !p.Exited() && p.Identity == id
}

// Remember records, for id alive in tr, its descendants (afresh) and the
// tool sessions it started: each direct child that leads a session of its
// own and for which isTool holds (added to those remembered, with its tag
// in a tagged memory). label is
// kept with it (the adapter's session, or ""). It reports false when id is
// not alive or the memory is full.
func (m *Memory) Remember(tr *Tree, id proc.Identity, label string, isTool func(*proc.Process) bool) bool {
	if !Live(tr.snap, id) {
		return false
	}
	o := m.owners[id]
	if o == nil {
		if len(m.owners) >= m.b.Owners {
			return false
		}
		o = &owner{tools: map[int]tool{}}
		m.owners[id] = o
	}
	o.label = label
	for _, c := range tr.kids[id.PID] {
		if c.SID != c.Identity.PID || c.Identity.StartTicks < id.StartTicks || !isTool(c) {
			continue
		}
		if _, ok := o.tools[c.SID]; ok || len(o.tools) < m.b.Tools {
			t := tool{leader: c.Identity}
			if m.tag != nil {
				t.tag = m.tag(c)
			}
			o.tools[c.SID] = t
		}
	}
	o.desc = map[int]seen{}
	stack := []int{id.PID}
	visited := map[int]bool{id.PID: true}
	for len(stack) > 0 && len(o.desc) < m.b.Desc {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range tr.kids[n] {
			if visited[c.Identity.PID] || len(o.desc) >= m.b.Desc {
				continue
			}
			visited[c.Identity.PID] = true
			if c.Identity.StartTicks < id.StartTicks {
				continue // older than the owner: a torn snapshot across pid reuse
			}
			o.desc[c.Identity.PID] = seen{id: c.Identity, sid: c.SID}
			stack = append(stack, c.Identity.PID)
		}
	}
	return true
}

// Forget drops what is gone: descendants that died, tool sessions with no
// live member (or whose leader's pid is another process now), and dead
// owners with nothing left that could be theirs.
func (m *Memory) Forget(tr *Tree) {
	snap := tr.snap
	for id, o := range m.owners {
		for pid, d := range o.desc {
			if p := snap.Procs[pid]; p.Exited() || p.Identity != d.id {
				delete(o.desc, pid)
			}
		}
		for sid, t := range o.tools {
			if p := snap.Procs[sid]; tr.bySID[sid] == 0 || (p != nil && p.Identity != t.leader) {
				delete(o.tools, sid)
			}
		}
		if Live(snap, id) || len(o.desc) > 0 || len(o.tools) > 0 {
			continue
		}
		// Its own session or group may still hold what it forked, unless
		// its pid is another process's now (then they are that one's).
		p := snap.Procs[id.PID]
		if (p == nil || p.Identity == id) && (tr.bySID[id.PID] > 0 || tr.byPGID[id.PID] > 0) {
			continue
		}
		delete(m.owners, id)
	}
}

// How says what ties a process to an owner.
type How int

const (
	// Seen: seen below the owner while it lived, and still in the session
	// it was in then.
	Seen How = iota + 1
	// InTool: in the session of a tool the owner started.
	InTool
	// InSession, InGroup: in the session or process group the owner led.
	InSession
	InGroup
	// Left (never a proof): seen below the owner while it lived, but it
	// has left the session it was in then, as a daemon does.
	Left
)

// Proof is what ties a process to an owner.
type Proof struct {
	Owner proc.Identity
	// Label is the owner's, as remembered.
	Label string
	How   How
	// Tool is the tool session's id (How InTool).
	Tool int
}

// Why says it in words, agent naming the owner ("claude", "opencode",
// "Codex").
func (p Proof) Why(agent string) string {
	switch p.How {
	case Seen:
		return fmt.Sprintf("seen below %s pid %d while it lived", agent, p.Owner.PID)
	case InTool:
		return fmt.Sprintf("in the session of the tool pid %d that %s pid %d started", p.Tool, agent, p.Owner.PID)
	case InSession:
		return fmt.Sprintf("in the session %s pid %d led", agent, p.Owner.PID)
	case InGroup:
		return fmt.Sprintf("in the process group %s pid %d led", agent, p.Owner.PID)
	case Left:
		return fmt.Sprintf("seen below %s pid %d while it lived, but it has left the session it was in then (as a daemon such as a tmux server does)", agent, p.Owner.PID)
	}
	return "not tied to any " + agent
}

// Evidence is the memory indexed for one pass. A nil Evidence proves
// nothing.
type Evidence struct {
	snap   *proc.Snapshot
	tag    func(*proc.Process) string
	desc   map[int]evidenceOf // by pid
	tools  map[int]evidenceOf // by sid
	owners map[int]proc.Identity
	labels map[proc.Identity]string
	left   []*proc.Process
}

type evidenceOf struct {
	owner proc.Identity
	seen  seen // desc
	tool  tool // tools
}

// Evidence indexes the memory against tr (after Forget): where two owners
// remember one process, the newest owner's claim comes first (a claude
// run as another's tool holds what it started itself).
func (m *Memory) Evidence(tr *Tree) *Evidence {
	ev := &Evidence{snap: tr.snap, tag: m.tag, desc: map[int]evidenceOf{}, tools: map[int]evidenceOf{}, owners: map[int]proc.Identity{}, labels: map[proc.Identity]string{}}
	ids := make([]proc.Identity, 0, len(m.owners))
	for id := range m.owners {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(x, y proc.Identity) int {
		return cmp.Or(-cmp.Compare(x.StartTicks, y.StartTicks), cmp.Compare(x.PID, y.PID))
	})
	for _, id := range ids {
		o := m.owners[id]
		ev.labels[id] = o.label
		live := Live(tr.snap, id)
		pids := make([]int, 0, len(o.desc))
		for pid, d := range o.desc {
			if _, ok := ev.desc[pid]; !ok {
				ev.desc[pid] = evidenceOf{owner: id, seen: d}
				pids = append(pids, pid)
			}
		}
		if !live {
			slices.Sort(pids)
			for _, pid := range pids {
				if q := tr.snap.Procs[pid]; !q.Exited() && q.Identity == o.desc[pid].id {
					ev.left = append(ev.left, q)
				}
			}
		}
		for sid, t := range o.tools {
			if _, ok := ev.tools[sid]; !ok {
				ev.tools[sid] = evidenceOf{owner: id, tool: t}
			}
		}
		if _, ok := ev.owners[id.PID]; !ok {
			ev.owners[id.PID] = id
		}
	}
	return ev
}

// LeftBehind are the remembered descendants of owners dead now that are
// still the processes seen, whatever they carry.
func (ev *Evidence) LeftBehind() []*proc.Process {
	if ev == nil {
		return nil
	}
	return ev.left
}

// Attribute says which owner p is proven to come from, and how. When
// found is false, a Proof with How Left may still say it was seen below
// an owner (not a proof: it left the session it had).
func (ev *Evidence) Attribute(p *proc.Process) (pr Proof, found bool) {
	if ev == nil || p == nil {
		return Proof{}, false
	}
	var hint Proof
	if e, ok := ev.desc[p.Identity.PID]; ok && e.seen.id == p.Identity {
		pr := Proof{Owner: e.owner, Label: ev.labels[e.owner], How: Seen}
		if e.seen.sid == p.SID {
			return pr, true
		}
		pr.How = Left
		hint = pr
	}
	if e, ok := ev.tools[p.SID]; ok && p.SID > 0 && p.Identity.StartTicks >= e.tool.leader.StartTicks && (ev.tag == nil || ev.tag(p) == e.tool.tag) {
		if q := ev.snap.Procs[p.SID]; q == nil || q.Identity == e.tool.leader {
			return Proof{Owner: e.owner, Label: ev.labels[e.owner], How: InTool, Tool: p.SID}, true
		}
	}
	for _, g := range []struct {
		id  int
		how How
	}{{p.SID, InSession}, {p.PGID, InGroup}} {
		oid, ok := ev.owners[g.id]
		if !ok || g.id <= 0 || p.Identity.StartTicks < oid.StartTicks || p.Identity == oid {
			continue
		}
		// The kernel keeps a pid that names a live group or session from
		// being reused, so the owner led it, unless its pid is another
		// process's now.
		if q := ev.snap.Procs[oid.PID]; q != nil && q.Identity != oid {
			continue
		}
		return Proof{Owner: oid, Label: ev.labels[oid], How: g.how}, true
	}
	return hint, false
}
