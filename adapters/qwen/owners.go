package qwen

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
)

// Who owns a session. Qwen holds no file open between writes (each record
// is an open, write, fsync, close), so no descriptor names a chat's
// writer. In order:
//   - named exactly: the session registry's entry (a TUI; a stale entry
//     names its dead owner, with its start ticks), a qwen whose argv names
//     the session (--session-id, --resume without --fork-session), a qwen
//     one of whose direct children carries the session's
//     QWEN_CODE_SESSION_ID (a tool it runs: Qwen sets the variable in
//     every tool's environment), a `qwen -p` whose prompt is the session's
//     first and that started before the session's first record;
//   - else inferred: a live qwen in the session's cwd that started before
//     its last write and is named for no other session. More than one
//     makes owner_ambiguous (the tracker), and the session stops only when
//     every candidate is dead.

// startSlack allows for the resolution of start times (the boot time is
// known to the second) against write times.
const startSlack = 2 * time.Second

// StartTimer gives a process's start time.
type StartTimer interface {
	StartTime(id proc.Identity) (time.Time, error)
}

// ownerView is one pass's evidence about owners: the live qwen processes,
// the registry entries of each home, and what names which session.
type ownerView struct {
	snap   *proc.Snapshot
	boot   string
	pidNS  uint64
	procs  []*qwenProc
	starts map[proc.Identity]time.Time
	st     StartTimer
	// named are the sessions each live process is named for.
	named map[proc.Identity]map[string]bool
	// toolOf: sessions whose tools a live qwen runs, by process.
	toolOf map[proc.Identity]map[string]bool
	// promptOf: sessions whose first prompt a live run's argv gives.
	promptOf map[proc.Identity]map[string]bool
}

func newOwnerView(snap *proc.Snapshot, st StartTimer, pidNS uint64) *ownerView {
	v := &ownerView{snap: snap, procs: findQwen(snap), st: st, pidNS: pidNS,
		starts: map[proc.Identity]time.Time{}, named: map[proc.Identity]map[string]bool{}, toolOf: map[proc.Identity]map[string]bool{},
		promptOf: map[proc.Identity]map[string]bool{}}
	if snap != nil {
		v.boot = snap.BootID
	}
	byPID := map[int]*qwenProc{}
	for _, q := range v.procs {
		byPID[q.p.Identity.PID] = q
		if q.args.Session != "" && !q.args.Fork {
			v.name(q.id(), q.args.Session)
		}
	}
	if snap != nil && len(byPID) > 0 {
		for _, c := range snap.Procs {
			id := c.Env[sessionVar]
			if id == "" || c.Exited() {
				continue
			}
			if q := byPID[c.PPID]; q != nil && q.sessionVar != id && c.Identity.StartTicks >= q.p.Identity.StartTicks {
				if v.toolOf[q.id()] == nil {
					v.toolOf[q.id()] = map[string]bool{}
				}
				v.toolOf[q.id()][id] = true
				v.name(q.id(), id)
			}
		}
	}
	return v
}

func (v *ownerView) name(id proc.Identity, session string) {
	if v.named[id] == nil {
		v.named[id] = map[string]bool{}
	}
	v.named[id][session] = true
}

// live reports whether e names a process of the snapshot, as that very
// process.
func (v *ownerView) live(e *entry) (*proc.Process, bool) {
	if v.snap == nil || e.BootID != v.boot || (e.PIDNs != 0 && v.pidNS != 0 && e.PIDNs != v.pidNS) {
		return nil, false
	}
	p := v.snap.Procs[e.PID]
	if p.Exited() || p.Identity.StartTicks != e.Ticks {
		return nil, false
	}
	return p, true
}

// nameEntries marks the processes the live registry entries name.
func (v *ownerView) nameEntries(entries []entry) {
	for i := range entries {
		if p, ok := v.live(&entries[i]); ok {
			v.name(p.Identity, entries[i].SessionID)
		}
	}
}

// entryOwner is the owner a registry entry names.
func (v *ownerView) entryOwner(e *entry) adapters.Owner {
	ev := "registry " + filepath.Base(e.path)
	switch {
	case e.BootID == "" || e.Ticks == 0:
		// No start to check the pid against: the pid alone may be
		// another process's now. Placed only when a qwen lives there.
		if v.snap != nil {
			if p := v.snap.Procs[e.PID]; !p.Exited() && isQwenArgv(p.Argv) {
				return adapters.Owner{Identity: p.Identity, Evidence: ev + " (no procStart; a qwen runs at its pid)"}
			}
		}
		dead := proc.Result{Liveness: proc.Dead, Reason: "registry entry without procStart, and no qwen at its pid"}
		return adapters.Owner{Identity: proc.Identity{PID: e.PID}, Evidence: ev, NoProbe: &dead}
	case v.boot != "" && e.BootID != v.boot:
		dead := proc.Result{Liveness: proc.Dead, Reason: "registry entry written before this boot"}
		return adapters.Owner{Identity: proc.Identity{BootID: e.BootID, PID: e.PID, StartTicks: e.Ticks}, Evidence: ev, NoProbe: &dead}
	case e.PIDNs != 0 && v.pidNS != 0 && e.PIDNs != v.pidNS:
		unk := proc.Result{Liveness: proc.Unknown, Reason: fmt.Sprintf("owner pid %d is in PID namespace %d, not this one", e.PID, e.PIDNs)}
		return adapters.Owner{Identity: proc.Identity{BootID: e.BootID, PID: e.PID, StartTicks: e.Ticks}, Evidence: ev + fmt.Sprintf(" (PID namespace %d)", e.PIDNs), NoProbe: &unk}
	}
	return adapters.Owner{Identity: proc.Identity{BootID: e.BootID, PID: e.PID, StartTicks: e.Ticks}, Evidence: ev}
}

// startTime is when p started (zero when unknown).
func (v *ownerView) startTime(id proc.Identity) time.Time {
	if t, ok := v.starts[id]; ok {
		return t
	}
	var t time.Time
	if v.st != nil {
		t, _ = v.st.StartTime(id)
	}
	v.starts[id] = t
	return t
}

// ownersOf lists the owners of a session: its registry entries', the
// named ones, else the inferred ones.
func (v *ownerView) ownersOf(id, cwd string, last time.Time, entries []*entry) []adapters.Owner {
	var out []adapters.Owner
	seen := map[proc.Identity]bool{}
	add := func(o adapters.Owner) {
		if !seen[o.Identity] {
			seen[o.Identity] = true
			out = append(out, o)
		}
	}
	for _, e := range entries {
		add(v.entryOwner(e))
	}
	for _, q := range v.procs {
		switch {
		case q.args.Session == id && !q.args.Fork:
			add(adapters.Owner{Identity: q.id(), Evidence: "argv names the session"})
		case v.toolOf[q.id()][id]:
			add(adapters.Owner{Identity: q.id(), Evidence: "runs a tool carrying QWEN_CODE_SESSION_ID=" + id})
		}
	}
	for _, q := range v.procs {
		if v.promptOf[q.id()][id] {
			add(adapters.Owner{Identity: q.id(), Evidence: "argv prompt is the session's first prompt, and it started before the session"})
		}
	}
	if len(out) > 0 || cwd == "" {
		return out
	}
	for _, q := range v.procs {
		if q.p.Cwd == "" || filepath.Clean(q.p.Cwd) != filepath.Clean(cwd) || len(v.named[q.id()]) > 0 || !v.startedBefore(q, last) {
			continue
		}
		add(adapters.Owner{Identity: q.id(), Inferred: true, Evidence: "cwd matches the session's, started before its last write"})
	}
	return out
}

// startedBefore: q started no later than t (with slack); unknown counts
// as before, so a process is never ruled out for want of a time.
func (v *ownerView) startedBefore(q *qwenProc, t time.Time) bool {
	st := v.startTime(q.id())
	if st.IsZero() || t.IsZero() {
		return true
	}
	return !st.After(t.Add(startSlack))
}

// promptSession is what namePrompts needs of a session.
type promptSession struct {
	id            string
	prompt        string
	created, last time.Time
}

// namePrompts names, for each run with a prompt that no registry entry,
// argv id or tool names (a `qwen -p`), the sessions whose first prompt
// is its prompt and that it started before: it created them. (A prompt
// Qwen was also given on stdin differs from the argv's: no name then, and
// inference stands.)
func (v *ownerView) namePrompts(sessions []promptSession) {
	for _, q := range v.procs {
		p := oneline.Cut(q.args.Prompt, maxTitle)
		if p == "" || q.args.Session != "" || q.args.Continue || len(v.named[q.id()]) > 0 {
			continue
		}
		for _, s := range sessions {
			if s.prompt != p || !v.startedBefore(q, s.created) || !v.startedBefore(q, s.last) {
				continue
			}
			if st := v.startTime(q.id()); !st.IsZero() && !s.created.IsZero() && s.created.Before(st.Add(-startSlack)) {
				continue // the session existed before the run started
			}
			if v.promptOf[q.id()] == nil {
				v.promptOf[q.id()] = map[string]bool{}
			}
			v.promptOf[q.id()][s.id] = true
		}
		for id := range v.promptOf[q.id()] {
			v.name(q.id(), id)
		}
	}
}
