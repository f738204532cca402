package claude

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// The owners of a session: the processes its registry entries name
// (validated against the process table, placed by their pidDomain), the
// live claudes whose argv names it, and, for a session none names, a live
// claude in its cwd that started before its last write.

// liveOwner is an owner seen alive in this pass's snapshot, whose
// descendants are remembered in case it dies without naming them.
type liveOwner struct {
	id      proc.Identity
	session string
}

// observeEntries adds what the session's registry entries say: an owner
// each, the cwd, title and last activity the transcript does not give, the
// status of a valid owner, and busy markers. It lists the owners they
// validate as alive.
func (a *Adapter) observeEntries(o *adapters.Observed, b *sessBuild, v *procView) []liveOwner {
	var live []liveOwner
	sort.Slice(b.entries, func(i, j int) bool { return b.entries[i].entry.PID < b.entries[j].entry.PID })
	for _, rf := range b.entries {
		e := rf.entry
		if o.Cwd == "" {
			o.Cwd = e.Cwd
		}
		if o.Title == "" && e.Name != "" {
			o.Title = transcript.Shorten(e.Name, transcript.TitleMax)
		}
		if b.file == nil {
			for _, t := range []time.Time{e.UpdatedAt, e.StatusUpdatedAt, e.StartedAt} {
				if t.After(o.LastActivity) {
					o.LastActivity = t
				}
			}
		}
		eo := a.registryOwner(rf, v)
		o.Owners = append(o.Owners, adapters.Owner{Identity: eo.id, Evidence: eo.place.evidence(e), NoProbe: eo.place.unprobed(),
			Unplaced: eo.place.unplaced()})
		if is := eo.place.issue(e); is != nil {
			o.Problems = append(o.Problems, *is)
		}
		if eo.valid {
			live = append(live, liveOwner{eo.id, b.id})
			if act, ok := registryActivity(e.Status); ok && o.ActivityEvidence == "" {
				o.Activity = act
				o.ActivityEvidence = evidenceRegistryState
				o.ActivitySource = session.SourceRegistry
				o.ActivityAt = e.StatusUpdatedAt
				if o.ActivityAt.IsZero() {
					o.ActivityAt = e.UpdatedAt
				}
				if act == session.ActivityWaiting {
					o.WaitingFor = registryWaiting(e.WaitingFor)
				}
				if act == session.ActivityWaiting && e.WaitingFor != "" {
					o.ActivityEvidence += " (waiting for " + e.WaitingFor + ")"
				}
				if e.Status == "shell" {
					o.ActivityEvidence += " (shell: a background job runs)"
				}
			}
		}
		if e.Status == "busy" && eo.place.problem == "" {
			// (A busy entry of another machine is not stale from here.)
			since := e.StatusUpdatedAt
			if since.IsZero() {
				since = e.UpdatedAt
			}
			o.InFlight = append(o.InFlight, adapters.Issue{
				Kind:   session.ProblemStaleBusyMarker,
				Key:    strconv.Itoa(e.PID),
				Detail: fmt.Sprintf("%s says busy (pid %d)", rf.path, e.PID),
				Since:  since,
			})
		}
	}
	return live
}

// observeArgv adds the live claude processes whose argv names the session
// as its owners.
func observeArgv(o *adapters.Observed, b *sessBuild, live []liveOwner) []liveOwner {
	for _, cp := range b.argv {
		if o.Cwd == "" {
			o.Cwd = cp.p.Cwd
		}
		ev := evidenceArgvResume
		if cp.argvFlag == "--session-id" {
			ev = evidenceArgvSessionID
		}
		o.Owners = appendOwner(o.Owners, adapters.Owner{Identity: cp.p.Identity, Evidence: ev})
		live = append(live, liveOwner{cp.p.Identity, b.id})
	}
	return live
}

// inferCwdOwners is for a session no process names: a live claude in its
// cwd that started before its last write may own it. One that started
// after is no evidence (an old session in the same directory), nor is one
// a registry entry or its argv names as the owner of another session: a
// claude process holds one session at a time, and the supervisor that
// launched a helper in its own folder would otherwise keep the helper's
// ended session running.
func inferCwdOwners(o *adapters.Observed, b *sessBuild, v *procView, sum *transcript.Summary, live []liveOwner) []liveOwner {
	last := sum.Last
	if last.IsZero() {
		last = b.file.mtime
	}
	for _, cp := range v.byCwd[filepath.Clean(sum.Cwd)] {
		if cp.root != "" && cp.root != b.root.path {
			continue
		}
		if other, ok := v.claimed[cp.p.Identity]; ok && other != b.id {
			continue
		}
		st, ok := v.startTime(cp.p.Identity)
		if !ok || !st.Before(last) {
			continue
		}
		o.Owners = appendOwner(o.Owners, adapters.Owner{Identity: cp.p.Identity, Inferred: true, Evidence: evidenceCwdMatch})
	}
	if len(o.Owners) == 1 {
		live = append(live, liveOwner{o.Owners[0].Identity, b.id})
	}
	return live
}

// claimOwners fills v.claimed: the live claudes a valid registry entry of
// a readable root, or their argv, names as a session's owner.
func (a *Adapter) claimOwners(v *procView) {
	if v.snap == nil {
		return
	}
	v.claimed = map[proc.Identity]string{}
	// The argv first: a registry entry, rewritten when the claude moves to
	// another session (/resume, /clear), says where it is now.
	for id, cps := range v.byArgv {
		for _, cp := range cps {
			v.claimed[cp.p.Identity] = id
		}
	}
	for _, r := range a.roots {
		if !r.ok || !r.present || !r.regsOK {
			continue
		}
		for _, rf := range r.regs {
			if rf.entry == nil || rf.entry.SessionID == "" {
				continue
			}
			if eo := a.registryOwner(rf, v); eo.valid {
				v.claimed[eo.id] = rf.entry.SessionID
			}
		}
	}
}

func appendOwner(owners []adapters.Owner, o adapters.Owner) []adapters.Owner {
	for _, x := range owners {
		if x.Identity == o.Identity {
			return owners
		}
	}
	return append(owners, o)
}

// entryOwner is what one registry entry says of its owner.
type entryOwner struct {
	id proc.Identity
	// valid: validated against a live process of this host (same pid and
	// start, not a zombie).
	valid bool
	place place
}

// registryOwner is the identity a registry entry names, placed by its
// pidDomain and startedAt, and whether it was validated against a live
// process. An entry whose pid is live with other start ticks names a
// reused pid: its identity is still reported (it probes Dead), but it is
// not valid. An entry of another machine or an invisible namespace gets an
// identity with no boot, which the tracker never probes (place.unprobed).
// An entry of another PID namespace validated at its host pid keeps that
// identity in rf (see locate).
func (a *Adapter) registryOwner(rf *regFile, v *procView) entryOwner {
	e := rf.entry
	pl := v.locate(e, rf.hostOf(e))
	ticks, _ := procStartTicks(e.ProcStart)
	if pl.pid == 0 || pl.dead() {
		return entryOwner{id: proc.Identity{PID: e.PID, StartTicks: ticks}, place: pl}
	}
	out := entryOwner{id: proc.Identity{BootID: v.boot, PID: pl.pid, StartTicks: ticks}, place: pl}
	if !pl.host.IsZero() {
		out.id = pl.host
	}
	var p *proc.Process
	if v.snap != nil {
		p = v.snap.Procs[pl.pid]
	} else if v.host != nil {
		if live, err := v.host.Identify(pl.pid); err == nil {
			p = &proc.Process{Identity: live}
		}
	}
	if p.Exited() {
		return out
	}
	switch {
	case !pl.host.IsZero():
		out.valid = p.Identity.StartTicks == pl.host.StartTicks
	case procStartMatches(e.ProcStart, p.Identity.StartTicks):
		out.id.StartTicks = p.Identity.StartTicks // the same value on Linux; exact on macOS
		out.valid = true
	case e.ProcStart == "" && v.snap != nil && isClaudeArgv(p.Argv) && !e.StartedAt.IsZero():
		// No procStart (older versions): a claude process at that pid that
		// started no later than the entry says is the same process.
		if st, ok := v.startTime(p.Identity); ok && !st.After(e.StartedAt.Add(2*time.Second)) {
			out.id.StartTicks = p.Identity.StartTicks
			out.valid = true
		}
	}
	if out.valid && pl.kind == placeOtherNamespace && pl.host.IsZero() {
		rf.setHost(e, out.id)
	}
	return out
}

// registryTicks maps each pid named by a registry entry of this host, PID
// namespace and boot to the procStart values recorded for it.
func (a *Adapter) registryTicks(v *procView) map[int][]string {
	m := map[int][]string{}
	for _, r := range a.roots {
		if !r.ok || !r.regsOK {
			continue
		}
		for _, rf := range r.regs {
			e := rf.entry
			if e == nil || e.ProcStart == "" {
				continue
			}
			if v.locate(e, proc.Identity{}).kind != placeHere {
				continue // its pid is not this host's, or not this boot's
			}
			m[e.PID] = append(m[e.PID], e.ProcStart)
		}
	}
	return m
}
