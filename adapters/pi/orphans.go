package pi

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// What a dead pi left behind.
//
// Pi marks no tool's environment with its session or its pid, so there is
// not even a suspect to name: a process is a dead pi's only on the
// evidence of the process tree seen while it lived (the rule every
// adapter shares, adapters/internal/lineage). Pi runs each bash tool call
// as a detached child (its own session and process group), so after a
// kill -9 of pi the shell and what it forked live on, re-parented to
// init, in that session. So each pass remembers, for every live pi, its
// descendants and the sessions its children lead; once it is dead, a
// process is its orphan (an orphan_processes issue with its Process,
// which reap signals) only if it was seen below it and is still in the
// session it had then, or is in a tool session it started, or in the
// session or process group it led. Which sessions it was the owner or a
// candidate of is remembered with it: its orphans are theirs.
//
// What was never seen proves nothing, and the memory is the daemon's
// only (never saved): what a pi that died while sessiond was down left
// behind is not named.

var treeBounds = lineage.Bounds{Owners: 4096, Desc: 256, Tools: 256}

// ownerMemo is what a pi owned or could own while it was last seen alive.
type ownerMemo struct {
	sessions map[string]bool
}

// isTool: every child of a pi that leads a session of its own is a tool
// Pi started (its bash tool spawns detached).
func isTool(*proc.Process) bool { return true }

// addOrphans remembers the trees of the pi processes alive now and the
// sessions each could own, then names the processes dead ones left.
func (a *Adapter) addOrphans(obs []adapters.Observed, snap *proc.Snapshot, procs []*piProc) {
	if snap == nil {
		return
	}
	if len(procs) == 0 && a.lineage.Len() == 0 {
		clear(a.owned)
		return
	}
	at := make(map[string]int, len(obs))
	for i := range obs {
		at[obs[i].UpstreamID] = i
	}
	tr := lineage.NewTree(snap)
	for _, o := range procs {
		a.lineage.Remember(tr, o.id(), "", isTool)
		a.owned[o.id()] = &ownerMemo{sessions: map[string]bool{}}
	}
	for i := range obs {
		for _, ow := range obs[i].Owners {
			if m := a.owned[ow.Identity]; m != nil && lineage.Live(snap, ow.Identity) {
				m.sessions[obs[i].UpstreamID] = true
			}
		}
	}
	a.lineage.Forget(tr)
	for id := range a.owned {
		if _, _, ok := a.lineage.Kept(id); !ok {
			delete(a.owned, id)
		}
	}
	dead := false
	for id := range a.owned {
		dead = dead || !lineage.Live(snap, id)
	}
	if !dead {
		return
	}
	ev := a.lineage.Evidence(tr)
	uid := os.Getuid()
	var cands []*proc.Process
	for _, p := range snap.Procs {
		if p.Exited() || p.UID != uid {
			continue
		}
		if _, ok := commandLine(p.Argv); ok {
			continue // a pi itself: it owns what it runs
		}
		cands = append(cands, p)
	}
	slices.SortFunc(cands, func(x, y *proc.Process) int { return cmp.Compare(x.Identity.PID, y.Identity.PID) })
	for _, p := range cands {
		pr, found := ev.Attribute(p)
		if !found || lineage.Live(snap, pr.Owner) {
			continue
		}
		m := a.owned[pr.Owner]
		if m == nil {
			continue
		}
		id := p.Identity
		is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(id.PID), Process: &id,
			Detail: fmt.Sprintf("pid %d (%s, cwd %s) still runs; its pi (pid %d) is dead: %s", id.PID, oneline.Argv(p.Argv), oneline.OrUnknown(p.Cwd), pr.Owner.PID, pr.Why("pi"))}
		if t, err := a.cfg.Host.StartTime(id); err == nil {
			is.Since = t
		}
		ids := make([]string, 0, len(m.sessions))
		for s := range m.sessions {
			ids = append(ids, s)
		}
		slices.Sort(ids)
		for _, s := range ids {
			if i, ok := at[s]; ok {
				obs[i].Problems = append(obs[i].Problems, is)
			}
		}
	}
}
