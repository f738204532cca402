package claude

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// What a dead claude left behind.
//
// Claude Code 2.1.328 runs each Bash tool as `bash -c <cmd>`, a child of
// claude in a session and process group of its own (setsid), with
// CLAUDE_PID (claude's pid), CLAUDE_CODE_SESSION_ID and CLAUDECODE=1 in its
// environment; after a kill -9 of claude the bash and what it forked live
// on, re-parented, in that session. Its MCP stdio servers are plain
// children in claude's own process group, with only the session id.
// Older versions set only CLAUDECODE=1.
//
// The variables are inherited by anything the tool starts and handed on
// by anything that keeps its environment: a tmux server started from a
// tool gives them to every pane it opens, other agents included. So they
// pick a session, and never prove a process is a dead claude's. The proof
// is the process tree seen while the claude lived (adapters/internal/
// lineage): each pass remembers, for every live claude and every live
// owner of a session, its descendants and the tool sessions it started.
// Once that claude is dead, a process is a reapable orphan (an
// orphan_processes issue with its Process) only if it was seen below it
// and kept its session, is in one of its tool sessions, or is in the
// session or process group it led (its MCP servers) with its pid not
// another process's now.
//
// A process that carries the variables of a dead claude of a session with
// none of that is a suspect: an orphan_processes issue without Process,
// whose detail says why it is not reaped. `sessionctl reap` and
// --auto-repair reap act on Process only. What was never seen proves
// nothing: the memory is the daemon's only (see lineage), so after a
// restart a claude that died before it left only suspects.

// Bounds on what is remembered of live claudes' process trees.
var treeBounds = lineage.Bounds{Owners: 4096, Desc: 256, Tools: 256}

// Claude's marker variables.
const (
	pidVar     = "CLAUDE_PID"
	sessionVar = "CLAUDE_CODE_SESSION_ID"
	codeVar    = "CLAUDECODE"
)

// carries reports whether p carries a variable claude sets in its tools.
func carries(p *proc.Process) bool {
	return p.Env[pidVar] != "" || p.Env[sessionVar] != "" || p.Env[codeVar] != ""
}

// orphans names, by session id, the processes dead claudes left behind
// and those that only carry a dead claude's variables. Nothing is killed
// here. Only the snapshot's marker variables are read.
func (a *Adapter) orphans(v *procView, regTicks map[int][]string, live []liveOwner) map[string][]adapters.Issue {
	if v.snap == nil {
		return nil
	}
	snap := v.snap
	uid := os.Getuid()
	var cands []*proc.Process
	for _, p := range snap.Procs {
		if !p.Exited() && p.UID == uid && carries(p) && !isClaudeArgv(p.Argv) {
			cands = append(cands, p)
		}
	}
	// The table is indexed (for the trees) only when a claude lives or
	// one is remembered: on an idle pass, neither.
	var ev *lineage.Evidence
	if len(live) > 0 || len(v.claude) > 0 || a.lineage.Len() > 0 {
		tr := lineage.NewTree(snap)
		a.rememberTrees(v, tr, live)
		a.lineage.Forget(tr)
		ev = a.lineage.Evidence(tr)
		for _, p := range ev.LeftBehind() {
			// Older versions mark their tools with nothing that names
			// them: what was seen below a dead claude is looked at too.
			if p.UID == uid && !isClaudeArgv(p.Argv) {
				cands = append(cands, p)
			}
		}
	}
	if len(cands) == 0 {
		return nil
	}
	slices.SortFunc(cands, func(x, y *proc.Process) int { return cmp.Compare(x.Identity.PID, y.Identity.PID) })
	cands = slices.CompactFunc(cands, func(x, y *proc.Process) bool { return x.Identity.PID == y.Identity.PID })

	claudeGroups := map[int]bool{}
	for _, p := range snap.Procs {
		if !p.Exited() && p.PGID > 0 && isClaudeArgv(p.Argv) && !snap.ForkedNotExeced(p) {
			claudeGroups[p.PGID] = true
		}
	}
	owned := map[string]bool{}
	for _, lo := range live {
		owned[lo.session] = true
	}
	out := map[string][]adapters.Issue{}
	for _, p := range cands {
		if sid, is, ok := a.judgeLeftover(v, ev, regTicks, claudeGroups, owned, p); ok {
			out[sid] = append(out[sid], is)
		}
	}
	return out
}

// rememberTrees remembers the trees of the owners alive now, with the
// session each owns, and of every other live claude (a claude whose
// session is not known yet has tools and MCP servers all the same).
func (a *Adapter) rememberTrees(v *procView, tr *lineage.Tree, live []liveOwner) {
	done := map[proc.Identity]bool{}
	for _, lo := range live {
		if !done[lo.id] {
			done[lo.id] = true
			a.lineage.Remember(tr, lo.id, lo.session, isClaudeTool)
		}
	}
	for _, cp := range v.claude {
		if id := cp.p.Identity; !done[id] {
			done[id] = true
			a.lineage.Remember(tr, id, "", isClaudeTool)
		}
	}
}

// isClaudeTool: a setsid'd child of a claude leads a tool session if
// claude marked it.
func isClaudeTool(c *proc.Process) bool { return carries(c) }

// judgeLeftover decides what p, alive and carrying claude's variables or
// seen below a claude now dead, is: the tool of a live claude (not named),
// a reapable orphan of a dead one, or a suspect; and under which session.
func (a *Adapter) judgeLeftover(v *procView, ev *lineage.Evidence, regTicks map[int][]string, claudeGroups map[int]bool, owned map[string]bool, p *proc.Process) (string, adapters.Issue, bool) {
	snap := v.snap
	pid := p.Identity.PID
	claimed := 0
	if s := p.Env[pidVar]; s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			claimed = n
		}
	}
	if claimed == pid {
		return "", adapters.Issue{}, false
	}
	// A live claude's own: the claude it names lives; or, naming none (an
	// MCP server), it is a child or a group member of a live claude.
	if claimed != 0 {
		if ownerAlive(snap, claimed, p, regTicks[claimed]) {
			return "", adapters.Issue{}, false
		}
	} else if parent := snap.Procs[p.PPID]; claudeGroups[p.PGID] || (!parent.Exited() && isClaudeArgv(parent.Argv)) {
		return "", adapters.Issue{}, false
	}
	pr, found := ev.Attribute(p)
	if found && lineage.Live(snap, pr.Owner) {
		return "", adapters.Issue{}, false // a tool of a live owner
	}
	sid := p.Env[sessionVar]
	if sid == "" {
		sid = pr.Label // found, or a hint
	}
	if sid == "" && claimed != 0 {
		sid = a.sessionOfPID(claimed, v)
	}
	if sid == "" {
		if found {
			a.log.Debug("orphaned Claude tool process of an unknown session", zap.Int("pid", pid), zap.Int("claude_pid", pr.Owner.PID))
		}
		return "", adapters.Issue{}, false
	}
	what := fmt.Sprintf("%s (cwd %s)", shortArgv(p.Argv), oneline.OrUnknown(p.Cwd))
	is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(pid)}
	if found {
		id := p.Identity
		is.Process = &id
		is.Detail = fmt.Sprintf("pid %d still runs after its owner pid %d died: %s; %s", pid, pr.Owner.PID, what, pr.Why("claude"))
		return sid, is, true
	}
	if claimed == 0 && owned[sid] {
		// Only the session id, of a session a claude runs: as likely that
		// claude's MCP server, out of its group, as anything.
		return "", adapters.Issue{}, false
	}
	why := "not seen below it, not in a tool session it started nor in its process group or session (the variables are inherited: a tmux server started from a tool hands them to every pane)"
	if pr.How == lineage.Left {
		why = pr.Why("claude")
	}
	is.Detail = fmt.Sprintf("pid %d carries this session's %s, but nothing ties it to a dead claude of it: %s. A suspect, not reaped: %s", pid, carried(p), why, what)
	return sid, is, true
}

// carried names the marker variables p carries, for a suspect's detail.
func carried(p *proc.Process) string {
	var vs []string
	if s := p.Env[pidVar]; s != "" {
		vs = append(vs, pidVar+"="+transcript.Shorten(s, 20))
	}
	if p.Env[sessionVar] != "" {
		vs = append(vs, sessionVar)
	}
	if len(vs) == 0 {
		return codeVar
	}
	return strings.Join(vs, " and ")
}

// ownerAlive reports whether the process a tool names as its owner is
// still that owner: present, not a zombie, started no later than the tool
// (else the pid was reused), and with the start the registry recorded.
func ownerAlive(snap *proc.Snapshot, owner int, child *proc.Process, ticks []string) bool {
	o := snap.Procs[owner]
	if o.Exited() || o.Identity.StartTicks > child.Identity.StartTicks {
		return false
	}
	if len(ticks) == 0 {
		return true
	}
	for _, t := range ticks {
		if procStartMatches(t, o.Identity.StartTicks) {
			return true
		}
	}
	return false
}

// sessionOfPID is the session a registry entry of this host, PID namespace
// and boot names for pid, else the one a claude remembered at pid owned.
func (a *Adapter) sessionOfPID(pid int, v *procView) string {
	for _, r := range a.roots {
		for _, rf := range r.regs {
			e := rf.entry
			if e == nil || e.PID != pid || e.SessionID == "" {
				continue
			}
			if v.locate(e, proc.Identity{}).kind != placeHere {
				continue
			}
			return e.SessionID
		}
	}
	return a.lineage.LabelOfPID(pid)
}
