package qwen

import (
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
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

// addToolProcs looks at the processes that carry a session's
// QWEN_CODE_SESSION_ID, after it has remembered the trees of the owners
// alive now (lineage.Memory.AddToolProcs): with no live owner, they are
// orphans or suspects.
func (a *Adapter) addToolProcs(obs []adapters.Observed, snap *proc.Snapshot) {
	a.lineage.AddToolProcs(obs, snap, lineage.Marked{Var: sessionVar, Agent: "qwen", Session: "Qwen Code",
		Own: func(p *proc.Process) bool { return isQwenArgv(p.Argv) },
	})
}
