package lineage

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Marked is how an agent that marks every tool it runs with the tool's
// session (an environment variable: Codex's CODEX_THREAD_ID, Qwen Code's
// QWEN_CODE_SESSION_ID, Copilot's COPILOT_AGENT_SESSION_ID) has
// Memory.AddToolProcs judge the processes that carry a session's mark.
// The memory is made with NewTagged, its tag the variable's value.
type Marked struct {
	// Var is the variable.
	Var string
	// Agent names an owner in the details ("Codex", "qwen"), Session a
	// session ("Codex", "Qwen Code").
	Agent, Session string
	// Own reports whether p is the agent itself: it owns what it runs,
	// and is no one's tool.
	Own func(p *proc.Process) bool
	// StartTime, when set, is a process's start time: a process of a live
	// owner's tree that started after its session's LastActivity is that
	// session's activity, which its data may not show (a command running
	// after its approval). Nil: a live owner's tools change nothing.
	StartTime func(proc.Identity) (time.Time, error)
	// Unjudged, when set, reports whether a session with no live owner is
	// not to be judged this pass (a process whose descriptors could not
	// be read may own it): its marked processes are not named at all.
	Unjudged func(o *adapters.Observed) bool
}

// AddToolProcs remembers the trees of the owners of obs alive in snap
// (each once: one owner may own many sessions), then looks at the
// processes of this user that carry the mark of a session in obs (by
// UpstreamID), the agent's own aside. While the session has a live owner
// such a process is at most activity (Marked.StartTime). With none it is
// an orphan_processes issue on the session, by pid: with its Process
// (reap may signal it) when it is proven the process of a dead owner
// (Evidence.Attribute), a suspect without Process otherwise, whose detail
// says why it is not reaped. On a pass with no live owner and nothing
// remembered, the process table is not indexed at all.
func (m *Memory) AddToolProcs(obs []adapters.Observed, snap *proc.Snapshot, mk Marked) {
	if snap == nil {
		return
	}
	anyLive := false
	for i := range obs {
		if len(obs[i].Owners) > 0 && len(liveOwners(snap, obs[i].Owners)) > 0 {
			anyLive = true
			break
		}
	}
	// The sessions by id, only when some process is marked at all: an
	// idle pass over 2,000 sessions of history built this map for none.
	var at map[string]int
	uid := os.Getuid()
	var cands []*proc.Process
	for _, p := range snap.Procs {
		sid := p.Env[mk.Var]
		if sid == "" || p.UID != uid || p.Exited() || mk.Own(p) {
			continue
		}
		if at == nil {
			at = make(map[string]int, len(obs))
			for i := range obs {
				at[obs[i].UpstreamID] = i
			}
		}
		if _, ok := at[sid]; ok {
			cands = append(cands, p)
		}
	}
	slices.SortFunc(cands, func(x, y *proc.Process) int { return cmp.Compare(x.Identity.PID, y.Identity.PID) })
	var ev *Evidence
	if anyLive || m.Len() > 0 {
		tr := NewTree(snap)
		isTool := func(c *proc.Process) bool { return c.Env[mk.Var] != "" }
		done := map[proc.Identity]bool{}
		for i := range obs {
			for _, o := range obs[i].Owners {
				if !done[o.Identity] {
					done[o.Identity] = true
					m.Remember(tr, o.Identity, "", isTool)
				}
			}
		}
		m.Forget(tr)
		ev = m.Evidence(tr)
	}
	for _, p := range cands {
		o := &obs[at[p.Env[mk.Var]]]
		if live := liveOwners(snap, o.Owners); len(live) > 0 {
			if mk.StartTime == nil {
				continue
			}
			if pr, found := ev.Attribute(p); found && Live(snap, pr.Owner) && slices.Contains(live, pr.Owner) {
				if t, err := mk.StartTime(p.Identity); err == nil && t.After(o.LastActivity) {
					o.LastActivity = t
				}
			}
			continue
		}
		if mk.Unjudged != nil && mk.Unjudged(o) {
			continue
		}
		o.Problems = append(o.Problems, mk.issue(snap, ev, p))
	}
}

// issue is the orphan_processes issue of p, which carries the mark of a
// session with no live owner.
func (mk Marked) issue(snap *proc.Snapshot, ev *Evidence, p *proc.Process) adapters.Issue {
	pid := p.Identity.PID
	pr, found := ev.Attribute(p)
	owner, why := pr.Owner, pr.Why(mk.Agent)
	what := fmt.Sprintf("%s (cwd %s)", oneline.Argv(p.Argv), oneline.OrUnknown(p.Cwd))
	is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(pid)}
	switch {
	case found && !Live(snap, owner):
		id := p.Identity
		is.Process = &id
		is.Detail = fmt.Sprintf("pid %d of this %s session still runs with no live %s owning it: %s; %s", pid, mk.Session, mk.Agent, what, why)
	case found:
		is.Detail = fmt.Sprintf("pid %d carries this session's %s, but its %s pid %d still runs and may track it (%s): a suspect, not reaped: %s", pid, mk.Var, mk.Agent, owner.PID, why, what)
	default:
		is.Detail = fmt.Sprintf("pid %d carries this session's %s, but nothing ties it to the session's %s: not seen below it, not in a tool session it started nor in its process group or session (the variable is inherited: a tmux server started from a tool hands it to every pane). A suspect, not reaped: %s", pid, mk.Var, mk.Agent, what)
	}
	return is
}

// liveOwners are the identities of owners that are in snap as that very
// process.
func liveOwners(snap *proc.Snapshot, owners []adapters.Owner) []proc.Identity {
	var out []proc.Identity
	for _, o := range owners {
		if Live(snap, o.Identity) {
			out = append(out, o.Identity)
		}
	}
	return out
}

// AnyMarked reports whether a process of snap carries the variable v: a
// tool some session of the agent started, alive or orphaned. With none
// (and nothing remembered), AddToolProcs finds nothing.
func AnyMarked(snap *proc.Snapshot, v string) bool {
	if snap == nil {
		return false
	}
	for _, p := range snap.Procs {
		if p.Env[v] != "" {
			return true
		}
	}
	return false
}
