package codex

import (
	"fmt"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// addToolProcs looks at the processes of each session's tools: they carry
// the session id in CODEX_THREAD_ID.
//
// While the owner lives, a tool process started after the rollout's last
// write is progress the rollout does not show: Codex writes nothing
// between a command's approval and its end, so it is the only sign that
// an approved command runs (the tracker then ends the "waiting" a
// PermissionRequest hook set).
//
// With no live owner, they are orphans. Codex runs
// each tool in its own session (setsid) with PR_SET_PDEATHSIG, so the
// tool's shell dies with it, but what that shell forked lives on,
// re-parented; every such process still carries CODEX_THREAD_ID, the
// session id. One of those is an orphan when its session has no live
// owner: while the owner lives, a process of its session may be a
// background command it still tracks. Nothing is killed here. Nor is a
// tool of a session in unchecked called an orphan: a process whose
// descriptors could not be read may hold its writer lock.
func (a *Adapter) addToolProcs(obs []adapters.Observed, snap *proc.Snapshot, unchecked map[string]bool) {
	if snap == nil {
		return
	}
	at := map[string]int{}
	for i := range obs {
		at[obs[i].UpstreamID] = i
	}
	pids := make([]int, 0, len(snap.Procs))
	for pid := range snap.Procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	uid := os.Getuid()
	for _, pid := range pids {
		p := snap.Procs[pid]
		i, ok := at[p.Env["CODEX_THREAD_ID"]]
		if !ok || p.UID != uid || p.State == 'Z' || p.State == 'X' || isCodexArgv(p.Argv) {
			continue
		}
		if ownerAlive(snap, obs[i].Owners) {
			if t, err := a.cfg.Host.StartTime(p.Identity); err == nil && t.After(obs[i].LastActivity) {
				obs[i].LastActivity = t
			}
			continue
		}
		if unchecked[obs[i].UpstreamID] {
			continue
		}
		id := p.Identity
		obs[i].Problems = append(obs[i].Problems, adapters.Issue{
			Kind:    session.ProblemOrphanProcesses,
			Key:     strconv.Itoa(pid),
			Process: &id,
			Detail:  fmt.Sprintf("pid %d of this Codex session still runs with no live Codex owning it: %s (cwd %s)", pid, shortArgv(p.Argv), orUnknown(p.Cwd)),
		})
	}
}

// ownerAlive: one of the owners is in the snapshot as that very process.
func ownerAlive(snap *proc.Snapshot, owners []adapters.Owner) bool {
	for _, o := range owners {
		if p := snap.Procs[o.Identity.PID]; p != nil && p.Identity == o.Identity && p.State != 'Z' && p.State != 'X' {
			return true
		}
	}
	return false
}

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
