package qwen

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Tool processes, and what a dead qwen left behind.
//
// Qwen 0.24.4 runs each shell tool as `bash -c <command>`, a direct child
// of the owner leading a session (and process group) of its own, with
// QWEN_CODE_SESSION_ID (the session id), QWEN_CODE=1 and
// QWEN_CODE_PROJECT_DIR in its environment. After a kill -9 of a `qwen -p`
// the bash and what it forked live on, re-parented, in that session. (The
// TUI runs its tools on a pseudo-terminal: they die with it.) The variable
// is inherited by anything a tool starts, and handed on by anything that
// keeps its environment (a tmux server started from a tool gives it to
// every pane): it picks a session, it never proves a process is the
// session's.
//
// The proof is the process tree, seen while the owner lived
// (adapters/internal/lineage): each pass remembers, for every live owner
// of a session, its descendants and the tool sessions it started (each
// setsid'd direct child, tagged with the session Qwen gave it). Once the
// owner is dead, a process that carries a session's QWEN_CODE_SESSION_ID
// is its orphan, reapable (an orphan_processes issue with its Process),
// only if it was seen below the owner and kept its session, is in a tool
// session the owner started for that session, or is in the dead owner's
// own session or process group. Anything else that carries the variable
// is a suspect: an issue without Process, whose detail says why it is not
// reaped. The memory is the daemon's only, never checkpointed.

var treeBounds = lineage.Bounds{Owners: 4096, Desc: 256, Tools: 256}

// sessionOf is the session p carries: the tag of a tool session.
func sessionOf(p *proc.Process) string { return p.Env[sessionVar] }

// isQwenTool: a setsid'd child of an owner leads a tool session if Qwen
// gave it a session.
func isQwenTool(c *proc.Process) bool { return sessionOf(c) != "" }

// addToolProcs looks at the processes that carry a session's
// QWEN_CODE_SESSION_ID, after it has remembered the trees of the owners
// alive now: with no live owner, they are orphans or suspects.
func (a *Adapter) addToolProcs(obs []adapters.Observed, snap *proc.Snapshot) {
	if snap == nil {
		return
	}
	at := map[string]int{}
	anyLive := false
	for i := range obs {
		at[obs[i].UpstreamID] = i
		anyLive = anyLive || len(liveOwners(snap, obs[i].Owners)) > 0
	}
	uid := os.Getuid()
	var cands []*proc.Process
	for _, p := range snap.Procs {
		if _, ok := at[sessionOf(p)]; ok && p.UID == uid && !p.Exited() && !isQwenArgv(p.Argv) {
			cands = append(cands, p)
		}
	}
	slices.SortFunc(cands, func(x, y *proc.Process) int { return cmp.Compare(x.Identity.PID, y.Identity.PID) })
	var ev *lineage.Evidence
	if anyLive || a.lineage.Len() > 0 {
		tr := lineage.NewTree(snap)
		done := map[proc.Identity]bool{}
		for i := range obs {
			for _, o := range obs[i].Owners {
				if !done[o.Identity] {
					done[o.Identity] = true
					a.lineage.Remember(tr, o.Identity, "", isQwenTool)
				}
			}
		}
		a.lineage.Forget(tr)
		ev = a.lineage.Evidence(tr)
	}
	for _, p := range cands {
		pid := p.Identity.PID
		o := &obs[at[sessionOf(p)]]
		if len(liveOwners(snap, o.Owners)) > 0 {
			continue
		}
		pr, found := ev.Attribute(p)
		owner, why := pr.Owner, pr.Why("qwen")
		what := fmt.Sprintf("%s (cwd %s)", shortArgv(p.Argv), orUnknown(p.Cwd))
		is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(pid)}
		switch {
		case found && !lineage.Live(snap, owner):
			id := p.Identity
			is.Process = &id
			is.Detail = fmt.Sprintf("pid %d of this Qwen Code session still runs with no live qwen owning it: %s; %s", pid, what, why)
		case found:
			is.Detail = fmt.Sprintf("pid %d carries this session's %s, but its qwen pid %d still runs and may track it (%s): a suspect, not reaped: %s", pid, sessionVar, owner.PID, why, what)
		default:
			is.Detail = fmt.Sprintf("pid %d carries this session's %s, but nothing ties it to the session's qwen: not seen below it, not in a tool session it started nor in its process group or session (the variable is inherited: a tmux server started from a tool hands it to every pane). A suspect, not reaped: %s", pid, sessionVar, what)
		}
		o.Problems = append(o.Problems, is)
	}
}

// liveOwners are the identities of owners that are in the snapshot as
// that very process.
func liveOwners(snap *proc.Snapshot, owners []adapters.Owner) []proc.Identity {
	var out []proc.Identity
	for _, o := range owners {
		if lineage.Live(snap, o.Identity) {
			out = append(out, o.Identity)
		}
	}
	return out
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
