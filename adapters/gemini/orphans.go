package gemini

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// What a dead gemini left behind.
//
// Gemini CLI names no session in its tools' environment (it sets
// GEMINI_CLI=1, which says only that some gemini started the process), so
// the process tree seen while the gemini lived is the only evidence
// (adapters/internal/lineage): each pass remembers, for every live gemini
// that could own a session, its descendants and the tool sessions it
// started, and which sessions it could own (owned). Once that gemini is
// dead, a process it is proven to have left (seen below it and still in
// the session it had then, in a tool session it started, or in the
// session or process group it led) is an orphan_processes issue, with its
// Process (reapable), on each of those sessions. Nothing else is named:
// without a marker there is no suspect to name.
//
// The memory is held in the daemon only (see lineage): after a restart,
// what a gemini that died before it left behind is not named.

// treeBounds bound what is remembered of live geminis' process trees.
var treeBounds = lineage.Bounds{Owners: 1024, Desc: 256, Tools: 256}

// memoTTL is how long a dead owner's sessions are remembered.
const memoTTL = 24 * time.Hour

// ownerMemo is what a gemini could own when it was last seen alive.
type ownerMemo struct {
	sessions map[string]bool
	seen     time.Time
}

// anyTool: Gemini CLI marks no tool with a session, so every child that
// leads a session of its own is taken for a tool session.
func anyTool(*proc.Process) bool { return true }

// addOrphans remembers the trees of the live owners and names, on the
// sessions a dead one could own, the processes it left behind.
func (a *Adapter) addOrphans(obs []adapters.Observed, snap *proc.Snapshot, procs []*gProc) {
	if snap == nil {
		return
	}
	now := time.Now()
	live := map[proc.Identity]bool{}
	for i := range obs {
		for _, o := range obs[i].Owners {
			if lineage.Live(snap, o.Identity) {
				live[o.Identity] = true
				m := a.owned[o.Identity]
				if m == nil {
					m = &ownerMemo{sessions: map[string]bool{}}
					a.owned[o.Identity] = m
				}
				m.sessions[obs[i].UpstreamID] = true
				m.seen = now
			}
		}
	}
	if len(live) == 0 && a.lineage.Len() == 0 {
		return
	}
	at := make(map[string]int, len(obs))
	for i := range obs {
		at[obs[i].UpstreamID] = i
	}
	tr := lineage.NewTree(snap)
	for id := range live {
		a.lineage.Remember(tr, id, "", anyTool)
	}
	a.lineage.Forget(tr)
	for id, m := range a.owned {
		if !live[id] && now.Sub(m.seen) > memoTTL {
			delete(a.owned, id)
		}
	}
	ev := a.lineage.Evidence(tr)
	gemini := map[int]bool{}
	for _, g := range procs {
		gemini[g.p.Identity.PID] = true
	}
	var cands []*proc.Process
	for _, p := range snap.Procs {
		if p.Exited() || gemini[p.Identity.PID] {
			continue
		}
		if _, ok := isGeminiArgv(p.Argv); ok {
			continue
		}
		cands = append(cands, p)
	}
	slices.SortFunc(cands, func(x, y *proc.Process) int { return x.Identity.PID - y.Identity.PID })
	for _, p := range cands {
		pr, found := ev.Attribute(p)
		if !found || lineage.Live(snap, pr.Owner) {
			continue
		}
		m := a.owned[pr.Owner]
		if m == nil {
			continue
		}
		pid := p.Identity.PID
		id := p.Identity
		is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(pid), Process: &id,
			Detail: fmt.Sprintf("pid %d (%s, cwd %s) still runs; its gemini (pid %d) is dead: %s", pid, oneline.Argv(p.Argv), oneline.OrUnknown(p.Cwd), pr.Owner.PID, pr.Why("gemini"))}
		if t, err := a.cfg.Host.StartTime(p.Identity); err == nil {
			is.Since = t
		}
		for sid := range m.sessions {
			if i, ok := at[sid]; ok && !hasLiveOwner(snap, obs[i].Owners) {
				obs[i].Problems = append(obs[i].Problems, is)
			}
		}
	}
}

func hasLiveOwner(snap *proc.Snapshot, owners []adapters.Owner) bool {
	for _, o := range owners {
		if lineage.Live(snap, o.Identity) {
			return true
		}
	}
	return false
}
