package codex

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Tool processes, and what a dead Codex left behind.
//
// Codex gives every tool CODEX_THREAD_ID, the session id, and so names the
// session of each process it started. But the variable is inherited by
// anything the tool starts, and handed on by anything that keeps its
// environment: a tmux server started from a Codex tool gives it to every
// pane it opens later, other agents included. The variable alone picks a
// session; it never proves a process is the session's.
//
// The proof is the process tree, seen while the owner lived. Codex 0.169.0
// spawns each tool as `/proc/self/exe --codex-run-as-process-setup …`,
// which calls setsid() and prctl(PR_SET_PDEATHSIG, SIGTERM) and then execs
// `bash -c <cmd>`: the tool is Codex's child, in a session and process
// group of its own. After a kill -9 of Codex the bash dies of the death
// signal and what it forked lives on, re-parented to init, still in the
// bash's session (its sid the dead bash's pid) and still carrying the
// variable. For the TUI the owner is Codex's shared app-server daemon (it
// holds the writer lock), and every session's tools are its children.
//
// So, while an owner lives, each pass remembers (ownerMemory) its
// descendants and the tool sessions it started (the sid of each setsid'd
// direct child, with the thread that child was given). Once the owner is
// dead, a process that carries a session's CODEX_THREAD_ID is an orphan of
// it, reapable (an orphan_processes issue with its Process), only on
// evidence an unrelated process cannot inherit:
//   - it was seen below the owner, and is still in the session it had then
//     (one that left it with setsid, a daemon such as a tmux server, is not);
//   - it is in a tool session the owner started, for that thread (a
//     process forked after the last look still carries the sid);
//   - it is in the dead owner's own session or process group (the owner led
//     it: a Codex sessiond launched with setsid).
//
// A process that carries the variable with none of that (a tmux pane: its
// sid its own shell, its parent the tmux server) is a suspect: an
// orphan_processes issue without Process, whose detail says why it is not
// reaped. `sessionctl reap` and --auto-repair reap act on Process only.
//
// What was never seen proves nothing: a tool started and killed with its
// Codex between two passes leaves only suspects. The memory is held in
// the daemon only, never saved with the checkpoint: a restart loses it, so
// what a Codex that died before the restart (or while sessiond was down)
// left behind is only suspect afterwards, while an owner alive at the
// restart is learned again by the first pass. That is on purpose: a
// remembered sid is evidence only while passes keep checking that its
// session still has members and its leader's pid is not another
// process's; a sid saved across a stop of unknown length may name a
// session the kernel has since handed to an unrelated process.

// Bounds on what is remembered of owners' process trees.
const (
	maxRememberedOwners = 4096
	maxRememberedDesc   = 256
	maxRememberedTools  = 256
)

// threadVar is the variable Codex sets in every tool it runs.
const threadVar = "CODEX_THREAD_ID"

// ownerMemory is what was seen below one owner while it lived.
type ownerMemory struct {
	// tools are the tool sessions it started, by session id: the pid of
	// the setsid'd child that leads each one.
	tools map[int]toolSession
	// desc are its descendants at the last look it lived, by pid, each
	// with the session it was in then.
	desc map[int]seenProc
}

// toolSession is one session a tool of the owner leads.
type toolSession struct {
	leader proc.Identity
	thread string // the CODEX_THREAD_ID Codex gave the leader
}

// seenProc is a process seen below a live owner.
type seenProc struct {
	id  proc.Identity
	sid int
}

// addToolProcs looks at the processes that carry a session's
// CODEX_THREAD_ID, after it has remembered the trees of the owners alive
// now.
//
// While the session's owner lives, one of its tools started after the
// rollout's last write is progress the rollout does not show: Codex
// writes nothing between a command's approval and its end, so it is the
// only sign that an approved command runs (the tracker then ends the
// "waiting" a PermissionRequest hook set). Only a process in the owner's
// tree counts.
//
// With no live owner, they are orphans or suspects (see above). Nothing
// is killed here. Nor is a tool of a session in unchecked named at all: a
// process whose descriptors could not be read may hold its writer lock.
func (a *Adapter) addToolProcs(obs []adapters.Observed, snap *proc.Snapshot, unchecked map[string]bool) {
	if snap == nil {
		return
	}
	if a.remembered == nil {
		a.remembered = map[proc.Identity]*ownerMemory{}
	}
	at := map[string]int{}
	anyLive := false
	for i := range obs {
		at[obs[i].UpstreamID] = i
		anyLive = anyLive || len(liveOwners(snap, obs[i].Owners)) > 0
	}
	// The processes that carry the thread of a session seen: on most
	// passes none, and the process table is not indexed at all when no
	// owner lives and nothing is remembered.
	uid := os.Getuid()
	var cands []*proc.Process
	for _, p := range snap.Procs {
		if _, ok := at[p.Env[threadVar]]; ok && p.UID == uid && !dead(p) && !isCodexArgv(p.Argv) {
			cands = append(cands, p)
		}
	}
	slices.SortFunc(cands, func(x, y *proc.Process) int { return cmp.Compare(x.Identity.PID, y.Identity.PID) })
	ev := &evidence{snap: snap}
	if anyLive || len(a.remembered) > 0 {
		tr := newTree(snap)
		a.rememberTrees(obs, tr)
		a.forgetGone(tr)
		ev = a.evidence(tr)
	}

	for _, p := range cands {
		pid, thread := p.Identity.PID, p.Env[threadVar]
		i := at[thread]
		o := &obs[i]
		owner, why, found := ev.attribute(p, thread)
		if live := liveOwners(snap, o.Owners); len(live) > 0 {
			if found && ownerLive(snap, owner) && slices.Contains(live, owner) {
				if t, err := a.cfg.Host.StartTime(p.Identity); err == nil && t.After(o.LastActivity) {
					o.LastActivity = t
				}
			}
			continue
		}
		if unchecked[o.UpstreamID] {
			continue
		}
		what := fmt.Sprintf("%s (cwd %s)", shortArgv(p.Argv), orUnknown(p.Cwd))
		is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(pid)}
		switch {
		case found && !ownerLive(snap, owner):
			id := p.Identity
			is.Process = &id
			is.Detail = fmt.Sprintf("pid %d of this Codex session still runs with no live Codex owning it: %s; %s", pid, what, why)
		case found:
			is.Detail = fmt.Sprintf("pid %d carries this session's %s, but its Codex pid %d still runs and may track it (%s): a suspect, not reaped: %s", pid, threadVar, owner.PID, why, what)
		default:
			is.Detail = fmt.Sprintf("pid %d carries this session's %s, but nothing ties it to the session's Codex: not seen below it, not in a tool session it started nor in its process group or session (the variable is inherited: a tmux server started from a tool hands it to every pane). A suspect, not reaped: %s", pid, threadVar, what)
		}
		o.Problems = append(o.Problems, is)
	}
}

// tree indexes a snapshot: children by parent, live members by session
// and by process group.
type tree struct {
	snap          *proc.Snapshot
	kids          map[int][]*proc.Process
	bySID, byPGID map[int]int
}

func newTree(snap *proc.Snapshot) *tree {
	t := &tree{snap: snap, kids: map[int][]*proc.Process{}, bySID: map[int]int{}, byPGID: map[int]int{}}
	for _, p := range snap.Procs {
		if dead(p) {
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

// rememberTrees remembers, for each owner alive now, its descendants
// (afresh) and the tool sessions it started (added to those remembered).
func (a *Adapter) rememberTrees(obs []adapters.Observed, tr *tree) {
	for i := range obs {
		for _, o := range obs[i].Owners {
			if !ownerLive(tr.snap, o.Identity) {
				continue
			}
			m := a.remembered[o.Identity]
			if m == nil {
				if len(a.remembered) >= maxRememberedOwners {
					continue
				}
				m = &ownerMemory{tools: map[int]toolSession{}}
				a.remembered[o.Identity] = m
			}
			a.rememberTree(m, o.Identity, tr)
		}
	}
}

func (a *Adapter) rememberTree(m *ownerMemory, owner proc.Identity, tr *tree) {
	m.desc = map[int]seenProc{}
	for _, c := range tr.kids[owner.PID] {
		// A setsid'd child leads a tool session: Codex gave it the thread.
		if th := c.Env[threadVar]; th != "" && c.SID == c.Identity.PID && c.Identity.StartTicks >= owner.StartTicks {
			if _, ok := m.tools[c.SID]; ok || len(m.tools) < maxRememberedTools {
				m.tools[c.SID] = toolSession{leader: c.Identity, thread: th}
			}
		}
	}
	stack := []int{owner.PID}
	seen := map[int]bool{owner.PID: true}
	for len(stack) > 0 && len(m.desc) < maxRememberedDesc {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range tr.kids[n] {
			if seen[c.Identity.PID] || len(m.desc) >= maxRememberedDesc {
				continue
			}
			seen[c.Identity.PID] = true
			if c.Identity.StartTicks < owner.StartTicks {
				continue // older than its parent's owner: a torn snapshot across pid reuse
			}
			m.desc[c.Identity.PID] = seenProc{id: c.Identity, sid: c.SID}
			stack = append(stack, c.Identity.PID)
		}
	}
}

// forgetGone drops what is gone from the memory: descendants that died,
// tool sessions with no live member (or whose leader's pid is another
// process now), and dead owners with nothing left that could be theirs.
func (a *Adapter) forgetGone(tr *tree) {
	snap := tr.snap
	for oid, m := range a.remembered {
		for pid, d := range m.desc {
			if p := snap.Procs[pid]; dead(p) || p.Identity != d.id {
				delete(m.desc, pid)
			}
		}
		for sid, ts := range m.tools {
			if p := snap.Procs[sid]; tr.bySID[sid] == 0 || (p != nil && p.Identity != ts.leader) {
				delete(m.tools, sid)
			}
		}
		if !ownerLive(snap, oid) && len(m.desc) == 0 && len(m.tools) == 0 && tr.bySID[oid.PID] == 0 && tr.byPGID[oid.PID] == 0 {
			delete(a.remembered, oid)
		}
	}
}

// evidence indexes the memory for one pass.
type evidence struct {
	snap   *proc.Snapshot
	desc   map[int]evidenceOf // by pid
	tools  map[int]evidenceOf // by sid
	owners map[int]proc.Identity
}

type evidenceOf struct {
	owner proc.Identity
	seen  seenProc    // desc
	tool  toolSession // tools
}

func (a *Adapter) evidence(tr *tree) *evidence {
	ev := &evidence{snap: tr.snap, desc: map[int]evidenceOf{}, tools: map[int]evidenceOf{}, owners: map[int]proc.Identity{}}
	ids := make([]proc.Identity, 0, len(a.remembered))
	for oid := range a.remembered {
		ids = append(ids, oid)
	}
	// One answer whatever the map's order: the newest owner first.
	slices.SortFunc(ids, func(x, y proc.Identity) int {
		return cmp.Or(-cmp.Compare(x.StartTicks, y.StartTicks), cmp.Compare(x.PID, y.PID))
	})
	for _, oid := range ids {
		m := a.remembered[oid]
		for pid, d := range m.desc {
			if _, ok := ev.desc[pid]; !ok {
				ev.desc[pid] = evidenceOf{owner: oid, seen: d}
			}
		}
		for sid, ts := range m.tools {
			if _, ok := ev.tools[sid]; !ok {
				ev.tools[sid] = evidenceOf{owner: oid, tool: ts}
			}
		}
		if _, ok := ev.owners[oid.PID]; !ok {
			ev.owners[oid.PID] = oid
		}
	}
	return ev
}

// attribute names the owner p is proven to come from, and how; found is
// false when nothing but its environment ties it to one.
func (ev *evidence) attribute(p *proc.Process, thread string) (owner proc.Identity, why string, found bool) {
	if e, ok := ev.desc[p.Identity.PID]; ok && e.seen.id == p.Identity && e.seen.sid == p.SID {
		return e.owner, fmt.Sprintf("seen below Codex pid %d while it lived", e.owner.PID), true
	}
	if e, ok := ev.tools[p.SID]; ok && p.SID > 0 && e.tool.thread == thread && p.Identity.StartTicks >= e.tool.leader.StartTicks {
		return e.owner, fmt.Sprintf("in the session of the tool pid %d that Codex pid %d started", p.SID, e.owner.PID), true
	}
	for _, g := range []struct {
		id   int
		what string
	}{{p.SID, "session"}, {p.PGID, "process group"}} {
		oid, ok := ev.owners[g.id]
		if !ok || g.id <= 0 || p.Identity.StartTicks < oid.StartTicks {
			continue
		}
		// The kernel keeps a pid that names a live group or session from
		// being reused, so the owner led it, unless its pid is another
		// process's now.
		if q := ev.snap.Procs[oid.PID]; q != nil && q.Identity != oid {
			continue
		}
		return oid, fmt.Sprintf("in the %s Codex pid %d led", g.what, oid.PID), true
	}
	return proc.Identity{}, "", false
}

// liveOwners are the identities of owners that are in the snapshot as
// that very process.
func liveOwners(snap *proc.Snapshot, owners []adapters.Owner) []proc.Identity {
	var out []proc.Identity
	for _, o := range owners {
		if ownerLive(snap, o.Identity) {
			out = append(out, o.Identity)
		}
	}
	return out
}

// ownerLive: id is in the snapshot as that very process, not a zombie.
func ownerLive(snap *proc.Snapshot, id proc.Identity) bool {
	p := snap.Procs[id.PID]
	return !dead(p) && p.Identity == id
}

func dead(p *proc.Process) bool { return p == nil || p.State == 'Z' || p.State == 'X' }

func shortArgv(argv []string) string {
	if len(argv) == 0 {
		return "?"
	}
	s := filepath.Base(argv[0])
	if len(argv) > 1 {
		s += " " + strings.Join(argv[1:], " ")
	}
	return oneline.Cut(s, 100)
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
