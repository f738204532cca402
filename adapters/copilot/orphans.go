package copilot

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

// Tool processes, and what a dead Copilot left behind.
//
// Copilot 1.0.102 runs each shell tool as `/bin/bash --norc --noprofile -c
// <cmd>`, a child of the native binary in a session and process group of
// its own (setsid), with COPILOT_AGENT_SESSION_ID (the session id) in its
// environment. After a kill -9 of the owner the bash and what it forked
// live on, re-parented, still in that session and still carrying the
// variable. The variable is inherited by anything a tool starts, so it
// picks a session and proves nothing; the proof is the process tree seen
// while the owner lived (adapters/internal/lineage, the rule every adapter
// shares): once the owner is dead a process that carries a session's id is
// its orphan (reapable) only if it was seen below the owner and is still in
// the session it had then, or is in a tool session the owner started for
// that session, or in the session or group the owner led. Anything else is
// a suspect: an orphan_processes issue without Process.

// Bounds on what is remembered of owners' process trees.
var treeBounds = lineage.Bounds{Owners: 4096, Desc: 256, Tools: 256}

// sessionVar is the variable Copilot sets in every tool it runs.
const sessionVar = "COPILOT_AGENT_SESSION_ID"

// sessionOf is the session p carries: the tag of a tool session.
func sessionOf(p *proc.Process) string { return p.Env[sessionVar] }

// isTool: a setsid'd child of an owner leads a tool session if Copilot
// gave it a session.
func isTool(c *proc.Process) bool { return sessionOf(c) != "" }

// addToolProcs looks at the processes that carry a session's id, after
// remembering the trees of the owners alive now. While the owner lives,
// a tool of its tree started after the last write is progress the events
// do not show. With no live owner they are orphans or suspects. Where some
// copilot's descriptors could not be read, nobody is called an orphan of a
// session without an owner: that copilot may have it.
func (a *Adapter) addToolProcs(obs []adapters.Observed, snap *proc.Snapshot, procs *procView) {
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
		if _, ok := at[sessionOf(p)]; ok && p.UID == uid && !p.Exited() && !isNativeArgv(p.Argv) && !isLoaderArgv(p.Argv) {
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
					a.lineage.Remember(tr, o.Identity, "", isTool)
				}
			}
		}
		a.lineage.Forget(tr)
		ev = a.lineage.Evidence(tr)
	}
	for _, p := range cands {
		pid := p.Identity.PID
		o := &obs[at[sessionOf(p)]]
		pr, found := ev.Attribute(p)
		owner, why := pr.Owner, pr.Why("Copilot")
		if live := liveOwners(snap, o.Owners); len(live) > 0 {
			if found && lineage.Live(snap, owner) && slices.Contains(live, owner) {
				if t, err := a.cfg.Host.StartTime(p.Identity); err == nil && t.After(o.LastActivity) {
					o.LastActivity = t
				}
			}
			continue
		}
		if procs.unreadable {
			continue
		}
		what := fmt.Sprintf("%s (cwd %s)", shortArgv(p.Argv), orUnknown(p.Cwd))
		is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(pid)}
		switch {
		case found && !lineage.Live(snap, owner):
			id := p.Identity
			is.Process = &id
			is.Detail = fmt.Sprintf("pid %d of this Copilot session still runs with no live Copilot owning it: %s; %s", pid, what, why)
		case found:
			is.Detail = fmt.Sprintf("pid %d carries this session's %s, but its Copilot pid %d still runs and may track it (%s): a suspect, not reaped: %s", pid, sessionVar, owner.PID, why, what)
		default:
			is.Detail = fmt.Sprintf("pid %d carries this session's %s, but nothing ties it to the session's Copilot: not seen below it, not in a tool session it started nor in its process group or session (the variable is inherited: a tmux server started from a tool hands it to every pane). A suspect, not reaped: %s", pid, sessionVar, what)
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
