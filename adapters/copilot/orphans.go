package copilot

import (
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
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

// addToolProcs looks at the processes that carry a session's id, after
// remembering the trees of the owners alive now
// (lineage.Memory.AddToolProcs). While the owner lives, a tool of its
// tree started after the last write is progress the events do not show.
// With no live owner they are orphans or suspects. Where some copilot's
// descriptors could not be read, nobody is called an orphan of a session
// without an owner: that copilot may have it.
func (a *Adapter) addToolProcs(obs []adapters.Observed, snap *proc.Snapshot, procs *procView) {
	a.lineage.AddToolProcs(obs, snap, lineage.Marked{Var: sessionVar, Agent: "Copilot", Session: "Copilot",
		Own:       func(p *proc.Process) bool { return isNativeArgv(p.Argv) || isLoaderArgv(p.Argv) },
		StartTime: func(id proc.Identity) (time.Time, error) { return a.cfg.Host.StartTime(id) },
		Unjudged:  func(*adapters.Observed) bool { return procs.unreadable },
	})
}
