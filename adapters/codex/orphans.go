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
	"github.com/sessiond/sessiond/adapters/internal/lineage"
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

// isCodexTool: a setsid'd child of an owner leads a tool session if Codex
// gave it a thread.
func isCodexTool(c *proc.Process) bool { return threadOf(c) != "" }

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
	if a.lineage == nil {
		a.lineage = lineage.NewTagged(treeBounds, threadOf)
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
		if _, ok := at[p.Env[threadVar]]; ok && p.UID == uid && !p.Exited() && !isCodexArgv(p.Argv) {
			cands = append(cands, p)
		}
	}
	slices.SortFunc(cands, func(x, y *proc.Process) int { return cmp.Compare(x.Identity.PID, y.Identity.PID) })
	var ev *lineage.Evidence
	if anyLive || a.lineage.Len() > 0 {
		tr := lineage.NewTree(snap)
		a.rememberTrees(obs, tr)
		a.lineage.Forget(tr)
		ev = a.lineage.Evidence(tr)
	}

	for _, p := range cands {
		pid := p.Identity.PID
		o := &obs[at[p.Env[threadVar]]]
		pr, found := ev.Attribute(p)
		owner, why := pr.Owner, pr.Why("Codex")
		if live := liveOwners(snap, o.Owners); len(live) > 0 {
			if found && lineage.Live(snap, owner) && slices.Contains(live, owner) {
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
		case found && !lineage.Live(snap, owner):
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

// rememberTrees remembers the tree of each owner alive now (an app-server
// that owns many sessions once).
func (a *Adapter) rememberTrees(obs []adapters.Observed, tr *lineage.Tree) {
	done := map[proc.Identity]bool{}
	for i := range obs {
		for _, o := range obs[i].Owners {
			if !done[o.Identity] {
				done[o.Identity] = true
				a.lineage.Remember(tr, o.Identity, "", isCodexTool)
			}
		}
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
