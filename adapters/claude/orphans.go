package claude

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Bounds on what is remembered of live owners' process trees.
const (
	maxRememberedOwners = 4096
	maxRememberedDesc   = 256
)

// ownerMemory is the process tree last seen below a live owner. Older
// Claude Code versions set only CLAUDECODE=1 in their tools' environment,
// so a leftover tool names neither its owner nor its session: the memory of
// the tree is the only way to attribute it after the owner dies.
type ownerMemory struct {
	session string
	desc    map[int]proc.Identity
}

// orphans finds tool processes whose owner died, by session id. Three
// ways: the environment markers (CLAUDE_PID, CLAUDE_CODE_SESSION_ID;
// 2.1.328), the process group of MCP servers (which carry only the
// session id), and the remembered descendants of owners seen alive earlier. Nothing is
// killed here. Only the snapshot's marker variables are read.
func (a *Adapter) orphans(v *procView, regTicks map[int][]string, live []liveOwner) map[string][]adapters.Issue {
	if v.snap == nil {
		return nil
	}
	snap := v.snap
	a.rememberTrees(v, live)

	out := map[string][]adapters.Issue{}
	found := orphanSet{out: out, seen: map[int]bool{}}
	pids := make([]int, 0, len(snap.Procs))
	for pid := range snap.Procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	a.markedOrphans(v, regTicks, pids, found)
	mcpOrphans(snap, pids, found)
	a.rememberedOrphans(snap, found)
	return out
}

// rememberTrees remembers the trees of the owners alive now.
func (a *Adapter) rememberTrees(v *procView, live []liveOwner) {
	snap := v.snap
	for _, lo := range live {
		p := snap.Procs[lo.id.PID]
		if dead(p) || p.Identity != lo.id {
			continue
		}
		m := a.remembered[lo.id]
		if m == nil {
			if len(a.remembered) >= maxRememberedOwners {
				continue
			}
			m = &ownerMemory{}
			a.remembered[lo.id] = m
		}
		m.session = lo.session
		m.desc = map[int]proc.Identity{}
		for _, d := range v.descendants(lo.id.PID, maxRememberedDesc) {
			if !dead(d) && d.Identity.StartTicks >= lo.id.StartTicks {
				m.desc[d.Identity.PID] = d.Identity
			}
		}
	}
}

// orphanSet is the orphans found, by session id, each process once. It is
// passed by value: it holds only its two maps.
type orphanSet struct {
	out  map[string][]adapters.Issue
	seen map[int]bool
}

func (s orphanSet) add(sid string, p *proc.Process, owner int) {
	if s.seen[p.Identity.PID] {
		return
	}
	s.seen[p.Identity.PID] = true
	cwd := p.Cwd
	if cwd == "" {
		cwd = "?"
	}
	id := p.Identity
	s.out[sid] = append(s.out[sid], adapters.Issue{
		Kind:    session.ProblemOrphanProcesses,
		Process: &id,
		Key:     strconv.Itoa(p.Identity.PID),
		Detail:  fmt.Sprintf("pid %d still runs after its owner pid %d died: %s (cwd %s)", p.Identity.PID, owner, shortArgv(p.Argv), cwd),
	})
}

// markedOrphans finds tools by their environment markers: a tool names
// its owner's pid and its session.
func (a *Adapter) markedOrphans(v *procView, regTicks map[int][]string, pids []int, found orphanSet) {
	snap := v.snap
	for _, pid := range pids {
		p := snap.Procs[pid]
		if dead(p) || p.Env == nil || p.Env["CLAUDE_PID"] == "" {
			continue
		}
		owner, err := strconv.Atoi(p.Env["CLAUDE_PID"])
		if err != nil || owner <= 0 || owner == pid {
			continue
		}
		if ownerAlive(snap, owner, p, regTicks[owner]) {
			continue
		}
		sid := p.Env["CLAUDE_CODE_SESSION_ID"]
		if sid == "" {
			sid = a.sessionOfPID(owner, v)
		}
		if sid != "" {
			found.add(sid, p, owner)
		}
	}
}

// mcpOrphans finds MCP stdio servers left behind. They name their session
// but no owner pid (no CLAUDE_PID; checked on 2.1.328). They run in
// claude's process group and outlive its kill -9, reparented away: one
// whose parent is no live claude and whose group holds no live claude is
// orphaned.
func mcpOrphans(snap *proc.Snapshot, pids []int, found orphanSet) {
	claudeGroups := map[int]bool{}
	for _, p := range snap.Procs {
		if !dead(p) && p.PGID > 0 && isClaudeArgv(p.Argv) && !snap.ForkedNotExeced(p) {
			claudeGroups[p.PGID] = true
		}
	}
	for _, pid := range pids {
		p := snap.Procs[pid]
		if dead(p) || p.Env == nil || p.Env["CLAUDE_PID"] != "" || p.Env["CLAUDE_CODE_SESSION_ID"] == "" || p.PGID <= 0 {
			continue
		}
		if isClaudeArgv(p.Argv) || claudeGroups[p.PGID] {
			continue // a claude itself, or its group's claude still lives
		}
		if parent := snap.Procs[p.PPID]; !dead(parent) && isClaudeArgv(parent.Argv) {
			continue
		}
		found.add(p.Env["CLAUDE_CODE_SESSION_ID"], p, p.PGID)
	}
}

// rememberedOrphans finds the remembered trees of owners that are gone,
// and forgets what is gone of them.
func (a *Adapter) rememberedOrphans(snap *proc.Snapshot, found orphanSet) {
	for oid, m := range a.remembered {
		if p := snap.Procs[oid.PID]; !dead(p) && p.Identity == oid {
			continue
		}
		for dpid, did := range m.desc {
			p := snap.Procs[dpid]
			if dead(p) || p.Identity != did {
				delete(m.desc, dpid)
				continue
			}
			found.add(m.session, p, oid.PID)
		}
		if len(m.desc) == 0 {
			delete(a.remembered, oid)
		}
	}
}

// ownerAlive reports whether the process a tool names as its owner is
// still that owner: present, not a zombie, started no later than the tool
// (else the pid was reused), and with the start the registry recorded.
func ownerAlive(snap *proc.Snapshot, owner int, child *proc.Process, ticks []string) bool {
	o := snap.Procs[owner]
	if dead(o) || o.Identity.StartTicks > child.Identity.StartTicks {
		return false
	}
	if len(ticks) == 0 {
		return true
	}
	for _, t := range ticks {
		if procStartMatches(t, o.Identity.StartTicks) {
			return true
		}
	}
	return false
}

// sessionOfPID is the session a registry entry of this host, PID namespace
// and boot names for pid.
func (a *Adapter) sessionOfPID(pid int, v *procView) string {
	for _, r := range a.roots {
		for _, rf := range r.regs {
			e := rf.entry
			if e == nil || e.PID != pid || e.SessionID == "" {
				continue
			}
			if v.locate(e, proc.Identity{}).kind != placeHere {
				continue
			}
			return e.SessionID
		}
	}
	for oid, m := range a.remembered {
		if oid.PID == pid {
			return m.session
		}
	}
	return ""
}
