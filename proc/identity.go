// Package proc answers "is this the same process, and does it still live?"
//
// A process is identified by Identity{BootID, PID, StartTicks}: a PID alone
// is reused by the kernel, and a (PID, start time) pair is unique only within
// one boot. Probe is the only truth sessiond uses for "running".
package proc

import (
	"fmt"
	"slices"
	"time"
)

// Identity names one process for the life of the machine's current boot.
// Two identities are the same process only if all three fields match.
type Identity struct {
	// BootID is the kernel's boot id (/proc/sys/kernel/random/boot_id on
	// Linux, kern.bootsessionuuid on macOS).
	BootID string `json:"boot_id"`
	PID    int    `json:"pid"`
	// StartTicks is the process start time: on Linux field 22 of
	// /proc/<pid>/stat in clock ticks since boot (the value Claude Code
	// records as procStart); on macOS microseconds since the epoch.
	StartTicks uint64 `json:"start_ticks"`
}

// String formats the identity for logs and errors.
func (id Identity) String() string {
	return fmt.Sprintf("pid %d (start %d, boot %.8s)", id.PID, id.StartTicks, id.BootID)
}

// IsZero reports whether the identity names no process.
func (id Identity) IsZero() bool { return id.PID == 0 }

// Liveness is the answer of a probe.
type Liveness int

// Probe answers. Unknown only when the check itself failed.
const (
	Unknown Liveness = iota
	Alive
	Dead
)

func (l Liveness) String() string {
	switch l {
	case Alive:
		return "alive"
	case Dead:
		return "dead"
	}
	return "unknown"
}

// Result is a probe's answer with the reason, for logs and status reasons.
type Result struct {
	Liveness Liveness
	Reason   string
}

// Exit reports that a watched process is gone.
type Exit struct {
	Identity Identity
	At       time.Time
	// Reason says how the exit was noticed ("pidfd", "kqueue", "probe").
	Reason string
}

// Process is one row of a process-table snapshot.
type Process struct {
	Identity Identity
	PPID     int
	// PGID is the process group (0 when unknown).
	PGID int
	// SID is the session id, the pid of the session's leader (0 when
	// unknown).
	SID int
	// State is the one-letter state of /proc/<pid>/stat (R, S, Z, ...).
	State byte
	UID   int
	// Cwd is empty when it could not be read (another user's process).
	Cwd  string
	Argv []string
	// Env holds only the marker variables listed in markerVars that are set;
	// nil when the environment could not be read. Never the whole environment.
	Env map[string]string
}

// Exited reports whether p has exited: a zombie (Z, not yet reaped) or a
// dead row (X). A nil p, a pid the snapshot has no row for, counts as
// exited too.
func (p *Process) Exited() bool { return p == nil || exitedState(p.State) }

// exitedState reports whether a one-letter process state is an exited
// process's.
func exitedState(state byte) bool { return state == 'Z' || state == 'X' }

// markerVars are the only environment variables a snapshot reads. An
// environment holds tokens and API keys: read nothing else, log nothing.
var markerVars = []string{
	"CLAUDECODE",
	"CLAUDE_CONFIG_DIR",
	"CLAUDE_PID",
	"CLAUDE_CODE_SESSION_ID",
	"OPENCODE",
	"OPENCODE_PID",
	// Codex sets CODEX_THREAD_ID (the session id) in every tool it runs, so
	// a tool left behind names its session; CODEX_HOME relocates its data.
	"CODEX_THREAD_ID",
	"CODEX_HOME",
	// Copilot CLI sets COPILOT_AGENT_SESSION_ID (the session id) in every
	// tool it runs.
	"COPILOT_AGENT_SESSION_ID",
	// Qwen Code sets QWEN_CODE_SESSION_ID (the session id) in every tool
	// it runs, as Codex does its thread.
	"QWEN_CODE_SESSION_ID",
	// HOME: a claude without CLAUDE_CONFIG_DIR keeps its data in
	// $HOME/.claude, which is not ours when its HOME is another.
	"HOME",
	// tmux sets both in every pane: the server's socket (first field of
	// TMUX) and the pane's id, which every process started in the pane
	// inherits. They say which pane a session runs in.
	"TMUX",
	"TMUX_PANE",
}

// Snapshot is the process table at one moment, taken once per tick.
type Snapshot struct {
	Taken  time.Time
	BootID string
	Procs  map[int]*Process
}

// Children returns the direct children of pid in the snapshot.
func (s *Snapshot) Children(pid int) []*Process {
	var out []*Process
	for _, p := range s.Procs {
		if p.PPID == pid {
			out = append(out, p)
		}
	}
	return out
}

// ForkedNotExeced reports whether p looks like a copy of its live parent
// between a fork and an exec: the same argv. Agents start their tools that
// way, and the copy's identity (pid, start time) survives the exec, so an
// adapter that took the copy for an agent would keep a killed session's
// owner alive for as long as its tool runs. (Seen with the real OpenCode
// under load; Claude Code is the same kind of native binary.)
func (s *Snapshot) ForkedNotExeced(p *Process) bool {
	parent := s.Procs[p.PPID]
	if parent.Exited() || len(p.Argv) == 0 {
		return false
	}
	return slices.Equal(parent.Argv, p.Argv)
}

// Descendants returns every process below pid in the snapshot.
func (s *Snapshot) Descendants(pid int) []*Process {
	kids := map[int][]*Process{}
	for _, p := range s.Procs {
		kids[p.PPID] = append(kids[p.PPID], p)
	}
	var out []*Process
	stack := []int{pid}
	seen := map[int]bool{pid: true}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range kids[n] {
			if seen[c.Identity.PID] {
				continue
			}
			seen[c.Identity.PID] = true
			out = append(out, c)
			stack = append(stack, c.Identity.PID)
		}
	}
	return out
}
