package opencode

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// What a dead opencode left behind.
//
// OpenCode 1.18.33 runs each bash tool as a child leading a session (and
// process group) of its own, with OPENCODE_PID (its pid), OPENCODE=1 and
// AGENT=1 in its environment; after a kill -9 of opencode the tool lives
// on, re-parented, in that session. But OPENCODE_PID is inherited by
// anything the tool starts and handed on by anything that keeps its
// environment: a tmux server started from a tool gives it to every pane it
// opens, other agents included. It names an opencode; it never proves a
// process is that opencode's.
//
// The proof is the process tree seen while the opencode lived
// (adapters/internal/lineage): each pass remembers, for every live
// opencode that may run sessions, its descendants and the tool sessions it
// started. Once it is dead, a process that carries OPENCODE_PID is a
// reapable orphan (an orphan_processes issue with its Process) of the
// sessions that opencode owned only if it was seen below it and kept its
// session, is in one of its tool sessions, or is in the session or process
// group it led with its pid not another process's now. That holds when
// the session has a live owner again: the real `opencode serve` in the
// same directory takes over a session whose `opencode run` was killed, and
// the run's python3 is still reapable.
//
// A process that carries the OPENCODE_PID of a dead opencode with none of
// that is a suspect: an orphan_processes issue without Process, whose
// detail says why it is not reaped. `sessionctl reap` and --auto-repair
// reap act on Process only.
//
// Both the trees and which sessions each opencode owned (memo) are held in
// the daemon only: after a restart, what an opencode that died before it
// left behind is not named at all (no session is known for it), and an
// opencode alive at the restart is learned again by the first pass.

// memoTTL is how long a process is remembered as a session's owner after it
// was last seen, so tool processes it leaves behind can be attributed.
const memoTTL = 24 * time.Hour

// treeBounds bound what is remembered of live opencodes' process trees.
var treeBounds = lineage.Bounds{Owners: 4096, Desc: 256, Tools: 256}

// pidVar is the variable OpenCode sets in every tool it runs.
const pidVar = "OPENCODE_PID"

// ownerMemo remembers a process that owned sessions.
type ownerMemo struct {
	id       proc.Identity
	sessions map[string]bool
	seen     time.Time
}

// isOpenCodeTool: a setsid'd child of an opencode leads a tool session if
// opencode marked it.
func isOpenCodeTool(c *proc.Process) bool { return c.Env[pidVar] != "" || c.Env["OPENCODE"] != "" }

// orphans names, by session id, the tool processes dead opencode processes
// left behind and those that only carry a dead opencode's OPENCODE_PID,
// attributed to the sessions that process owned when it was seen. procs
// are the live opencode processes of snap.
func (a *Adapter) orphans(snap *proc.Snapshot, procs []*ocProc) map[string][]adapters.Issue {
	out := map[string][]adapters.Issue{}
	if snap == nil {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	uid := os.Getuid()
	var cands []*proc.Process
	for _, p := range snap.Procs {
		if p.Env[pidVar] == "" || p.Exited() || p.UID != uid {
			continue
		}
		if _, _, ok := commandLine(p.Argv); ok {
			continue // an opencode itself: it owns what it runs
		}
		cands = append(cands, p)
	}
	// The table is indexed (for the trees) only when an opencode lives or
	// one is remembered: on an idle pass, neither.
	var ev *lineage.Evidence
	if len(procs) > 0 || a.lineage.Len() > 0 {
		tr := lineage.NewTree(snap)
		for _, o := range procs {
			if o.owner() {
				a.lineage.Remember(tr, o.id(), "", isOpenCodeTool)
			}
		}
		a.lineage.Forget(tr)
		ev = a.lineage.Evidence(tr)
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].Identity.PID < cands[j].Identity.PID })
	for _, p := range cands {
		sessions, is, ok := a.judgeLeftover(snap, ev, p)
		if !ok {
			continue
		}
		for sid := range sessions {
			out[sid] = append(out[sid], is)
		}
	}
	return out
}

// judgeLeftover decides what p, which carries OPENCODE_PID, is: the tool
// of a live opencode (not named), a reapable orphan of a dead one, or a
// suspect; and the sessions it is named under.
func (a *Adapter) judgeLeftover(snap *proc.Snapshot, ev *lineage.Evidence, p *proc.Process) (map[string]bool, adapters.Issue, bool) {
	pid := p.Identity.PID
	ownerPID, err := strconv.Atoi(p.Env[pidVar])
	if err != nil || ownerPID <= 0 || ownerPID == pid {
		return nil, adapters.Issue{}, false
	}
	if o := snap.Procs[ownerPID]; !o.Exited() && o.Identity.StartTicks <= p.Identity.StartTicks {
		if _, _, ok := commandLine(o.Argv); ok {
			return nil, adapters.Issue{}, false // its opencode lives
		}
	}
	pr, found := ev.Attribute(p)
	if found && lineage.Live(snap, pr.Owner) {
		return nil, adapters.Issue{}, false // a tool of a live opencode
	}
	cmd := strings.Join(p.Argv, " ")
	if len(cmd) > 80 {
		cmd = cmd[:80] + "…"
	}
	is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(pid)}
	if t, err := a.cfg.StartTimer.StartTime(p.Identity); err == nil {
		is.Since = t
	}
	if found {
		m, ok := a.memo[pr.Owner.PID]
		if !ok || m.id != pr.Owner || len(m.sessions) == 0 {
			a.log.Debug("orphaned OpenCode tool process of an opencode that owned no session", zap.Int("pid", pid), zap.Int("opencode_pid", pr.Owner.PID))
			return nil, adapters.Issue{}, false
		}
		// The identity lets reap signal exactly this process.
		id := p.Identity
		is.Process = &id
		is.Detail = fmt.Sprintf("pid %d (%s) still runs; its opencode (pid %d) is dead: %s", pid, cmd, pr.Owner.PID, pr.Why("opencode"))
		return m.sessions, is, true
	}
	m, ok := a.memo[ownerPID]
	if !ok || m.id.StartTicks > p.Identity.StartTicks {
		a.log.Debug("OpenCode tool process with an unknown owner", zap.Int("pid", pid), zap.Int("opencode_pid", ownerPID))
		return nil, adapters.Issue{}, false
	}
	why := "not seen below it, not in a tool session it started nor in its process group or session (the variable is inherited: a tmux server started from a tool hands it to every pane)"
	if pr.How == lineage.Left {
		why = pr.Why("opencode")
	}
	is.Detail = fmt.Sprintf("pid %d (%s) carries %s=%d of this session's opencode, which is dead, but nothing ties it to that opencode: %s. A suspect, not reaped (cwd %s)", pid, cmd, pidVar, ownerPID, why, oneline.OrUnknown(p.Cwd))
	return m.sessions, is, true
}
