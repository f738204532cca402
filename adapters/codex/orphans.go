package codex

import (
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
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
// So each pass remembers (adapters/internal/lineage, the rule every
// adapter shares), for every live owner of a session, its descendants and
// the tool sessions it started (each setsid'd direct child, tagged with
// the thread Codex gave it). Once the
// owner is dead, a process that carries a session's CODEX_THREAD_ID is an
// orphan of it, reapable (an orphan_processes issue with its Process),
// only on evidence an unrelated process cannot inherit:
//   - it was seen below the owner, and is still in the session it had then
//     (one that left it with setsid, a daemon such as a tmux server, is not);
//   - it is in a tool session the owner started, for that thread (a
//     process forked after the last look still carries the sid);
//   - it is in the dead owner's own session or process group (the owner led
//     it: a Codex sessiond launched with setsid), its pid not another
//     process's now.
//
// A process that carries the variable with none of that (a tmux pane: its
// sid its own shell, its parent the tmux server) is a suspect: an
// orphan_processes issue without Process, whose detail says why it is not
// reaped. `sessionctl reap` and --auto-repair reap act on Process only.
//
// What was never seen proves nothing: a tool started and killed with its
// Codex between two passes leaves only suspects. The memory is held in
// the daemon only, never saved with the checkpoint (see lineage): a
// restart loses it, so what a Codex that died before the restart (or
// while sessiond was down) left behind is only suspect afterwards, while
// an owner alive at the restart is learned again by the first pass.

// Bounds on what is remembered of owners' process trees.
const (
	maxRememberedOwners = 4096
	maxRememberedDesc   = 256
	maxRememberedTools  = 256
)

var treeBounds = lineage.Bounds{Owners: maxRememberedOwners, Desc: maxRememberedDesc, Tools: maxRememberedTools}

// threadVar is the variable Codex sets in every tool it runs.
const threadVar = "CODEX_THREAD_ID"

// threadOf is the thread p carries: the tag of a tool session.
func threadOf(p *proc.Process) string { return p.Env[threadVar] }

// addToolProcs looks at the processes that carry a session's
// CODEX_THREAD_ID, after it has remembered the trees of the owners alive
// now (lineage.Memory.AddToolProcs; an app-server that owns many sessions
// once).
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
	if a.lineage == nil {
		a.lineage = lineage.NewTagged(treeBounds, threadOf)
	}
	a.lineage.AddToolProcs(obs, snap, lineage.Marked{Var: threadVar, Agent: "Codex", Session: "Codex",
		Own:       func(p *proc.Process) bool { return isCodexArgv(p.Argv) },
		StartTime: func(id proc.Identity) (time.Time, error) { return a.cfg.Host.StartTime(id) },
		Unjudged:  func(o *adapters.Observed) bool { return unchecked[o.UpstreamID] },
	})
}
