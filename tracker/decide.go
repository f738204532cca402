package tracker

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// evidence is everything one decision about one session may use. decide is
// a pure function of a record and its evidence: no I/O, no clock of its own,
// so every invariant is a table test.
type evidence struct {
	// obs is what the agent's adapter saw this pass; nil when the session
	// was not in the scan (absent, or the adapter could not look).
	obs *adapters.Observed
	// adapterErr is set when the adapter could not look at the input this
	// session lives in. The status then stays the last known.
	adapterErr error
	// probe answers liveness for an identity (memoized per pass).
	probe func(proc.Identity) proc.Result
	now   time.Time
	// grace is both the launch grace period and how long a session's data
	// must be still before a session with no candidate owner counts as dead.
	grace time.Duration
	// stallAfter is how long a live, busy owner may make no progress before
	// the session is flagged stalled.
	stallAfter time.Duration
	// hooks are the hooks kept for the session, by sender (hooks.go says
	// which decide takes).
	hooks []*hookEvidence
	// pane says which tmux pane a live process runs in (nil: none, or
	// not known this pass, as on an exit event's pass).
	pane func(proc.Identity) *session.Pane
	// boot is this boot's id, from the pass's process snapshot ("" when
	// it failed).
	boot string
}

// candidate is one process that owns or may own a session.
type candidate struct {
	id       proc.Identity
	inferred bool
	evidence string
	result   proc.Result
	// settled: the result came from the agent's data, not from a probe.
	settled bool
	// released: the agent's data names its owners exactly and this one is
	// not among them any more (result Dead, whether or not it lives on).
	released bool
}

// launchEvidence is the owner evidence of a process sessiond launched,
// until the agent's data names another owner.
const launchEvidence = "launched by sessiond"

// decide returns the record as it should be after this evidence, and the
// events that record the change. It never returns events for an unchanged
// record. It implements invariants 1-4 of docs/design.md#the-six-invariants;
// see the comments at each rule.
func decide(rec *session.Record, ev evidence) (*session.Record, []session.Event) {
	out := rec.Clone()
	isNew := rec.Status == ""
	observed := ev.obs != nil
	now := ev.now

	if observed {
		applyObserved(out, ev.obs, now)
	}

	cands := gatherCandidates(rec, ev)
	alive, unknown := byLiveness(cands)
	problems, carriedInFlight, inFlight := knownProblems(rec, ev)

	switch {
	case len(alive) > 0:
		// Invariant 1: running iff an owner probes Alive. Invariant 4: this
		// holds for a stopped session too; a live claimant revives it.
		problems = decideLive(out, rec, ev, alive, problems)

	case len(unknown) > 0:
		// No candidate alive, and at least one we could not check: we do not
		// know, and say so rather than guess.
		problems = append(problems, carriedInFlight...)
		out.Status = session.StatusUnknown
		if unknown[0].settled {
			out.StatusReason = unknown[0].result.Reason
		} else {
			out.StatusReason = fmt.Sprintf("could not probe pid %d: %s", unknown[0].id.PID, unknown[0].result.Reason)
		}

	case len(cands) > 0:
		// Every candidate is confirmed dead.
		problems = append(problems, carriedInFlight...)
		markDead(out, rec, observed, inFlight, &problems, now, deadReason(cands))

	case observed:
		// No candidate owner at all: unknown until the data has been still
		// for the grace period, then dead.
		last := out.LastActivityAt
		if last != nil && now.Sub(*last) < ev.grace {
			out.Status = session.StatusUnknown
			out.StatusReason = "no owner process found; data changed at " + last.UTC().Format(time.RFC3339)
		} else {
			markDead(out, rec, observed, inFlight, &problems, now, "no owner process, and the data has been still for the grace period")
		}

	default:
		// Not observed and no candidate: invariant 2, absence from a scan
		// never changes a status. Keep the last known.
		if rec.Status.Terminal() {
			problems = append(problems, carriedInFlight...)
		}
		if isNew {
			out.Status = session.StatusUnknown
			out.StatusReason = "not observed yet"
		}
	}

	out.Problems = mergeProblems(rec.Problems, problems)
	return out, events(rec, out, isNew, now)
}

// applyObserved copies into out what the agent's data shows of it this
// pass: when it was seen, its cwd, title, source, last activity and resume
// cursor.
func applyObserved(out *session.Record, o *adapters.Observed, now time.Time) {
	t := now
	out.LastSeenAt = &t
	if o.Cwd != "" {
		out.Cwd = o.Cwd
	}
	if o.Title != "" {
		out.Title = o.Title
	}
	if o.Source != "" {
		out.Source = o.Source
	}
	if !o.LastActivity.IsZero() && (out.LastActivityAt == nil || o.LastActivity.After(*out.LastActivityAt)) {
		la := o.LastActivity
		out.LastActivityAt = &la
	}
	// The agent's own data shows this upstream session: that confirms
	// the resume cursor (a launch's first output alone does not).
	if o.Root != "" && out.UpstreamID != "" && out.Cwd != "" {
		cur := session.ResumeCursor{SchemaVersion: session.ResumeCursorVersion, Agent: out.Agent,
			UpstreamID: out.UpstreamID, Cwd: out.Cwd, Root: o.Root}
		if out.Resume == nil || *out.Resume != cur {
			out.Resume = &cur
		}
	}
}

// byLiveness picks the candidates that probe Alive and those that could
// not be probed (Unknown); the rest are dead.
func byLiveness(cands []candidate) (alive, unknown []candidate) {
	for _, c := range cands {
		switch c.result.Liveness {
		case proc.Alive:
			alive = append(alive, c)
		case proc.Unknown:
			unknown = append(unknown, c)
		}
	}
	return alive, unknown
}

// knownProblems returns the problems that hold whatever the liveness, the
// in-flight problems carried from the record, and the in-flight work the
// adapter reports now.
//
// Problems the adapter reports whatever the liveness (orphan processes).
// When the adapter did not report this pass, the last known ones stay:
// in-flight problems count only while the session is dead.
func knownProblems(rec *session.Record, ev evidence) (problems, carriedInFlight []session.Problem, inFlight []adapters.Issue) {
	if ev.obs != nil {
		problems = appendIssues(problems, ev.obs.Problems, ev.now)
		inFlight = ev.obs.InFlight
	} else {
		for _, p := range rec.Problems {
			switch {
			case p.Kind == session.ProblemOrphanProcesses:
				problems = append(problems, p)
			case p.Kind.InFlight():
				carriedInFlight = append(carriedInFlight, p)
			}
		}
	}
	if ev.adapterErr != nil {
		problems = append(problems, session.Problem{Kind: session.ProblemAdapterError, Detail: ev.adapterErr.Error(), Since: ev.now})
	}
	return problems, carriedInFlight, inFlight
}

// decideLive makes out owned by one of its live candidates, starting or
// running, with its activity, and returns problems with those a live
// session can have added (an ambiguous owner, not discovered, stalled).
func decideLive(out, rec *session.Record, ev evidence, alive []candidate, problems []session.Problem) []session.Problem {
	now := ev.now
	owner := pickOwner(rec, alive)
	id := owner.id
	out.Owner = &id
	out.OwnerInferred = owner.inferred
	out.OwnerEvidence = owner.evidence
	out.Candidates = nil
	out.StoppedAt = nil
	if ambiguous(alive) {
		for _, c := range alive {
			out.Candidates = append(out.Candidates, c.id)
		}
		problems = append(problems, session.Problem{Kind: session.ProblemOwnerAmbiguous, Detail: "several live processes could own this session: " + pidList(alive), Since: now})
	}
	// Invariant 3: a launched session is starting inside its grace period
	// until its agent's data shows it; past it, a live owner keeps it
	// running, flagged not_discovered if the data never showed it.
	launchedAt := launchTime(rec)
	inGrace := rec.Launched && now.Sub(launchedAt) < ev.grace
	notSeen := out.LastSeenAt == nil || (rec.LaunchedAt != nil && !out.LastSeenAt.After(*rec.LaunchedAt))
	switch {
	case rec.Launched && notSeen && inGrace:
		out.Status = session.StatusStarting
		out.StatusReason = fmt.Sprintf("launched as pid %d; waiting for the agent's data", id.PID)
	default:
		out.Status = session.StatusRunning
		out.StatusReason = fmt.Sprintf("owner pid %d is alive (%s)", id.PID, owner.evidence)
		if rec.Launched && notSeen {
			problems = append(problems, session.Problem{Kind: session.ProblemNotDiscovered, Detail: fmt.Sprintf("owner pid %d is alive but the agent's data has not shown this session", id.PID), Since: launchedAt.Add(ev.grace)})
		}
	}
	setActivity(out, rec, ev, id)
	setPane(out, rec, ev, id)
	// The watchdog: busy with no progress past the threshold, and not
	// waiting for the user, is stalled. A flag, never a kill. A hook from
	// the owner's tree that set the activity is progress too (a tool
	// starting), newer than what the data shows.
	if out.Activity == session.ActivityBusy && out.LastActivityAt != nil && ev.stallAfter > 0 {
		progress := *out.LastActivityAt
		if out.ActivitySource == session.SourceHook && out.ActivitySince != nil && out.ActivitySince.After(progress) {
			progress = *out.ActivitySince
		}
		if now.Sub(progress) >= ev.stallAfter {
			problems = append(problems, session.Problem{Kind: session.ProblemStalled, Detail: fmt.Sprintf("busy with no progress since %s (threshold %s)", progress.UTC().Format(time.RFC3339), ev.stallAfter), Since: progress.Add(ev.stallAfter)})
		}
	}
	return problems
}

// setPane records the tmux pane the owner runs in. A process cannot move
// to another pane, so the pane is looked up when the owner changes (or
// was never found) and kept while the owner is the same. It is looked up
// only on a pass the adapter observed the session, which says whether the
// owner is a shared server, in no session's pane.
func setPane(out, rec *session.Record, ev evidence, owner proc.Identity) {
	same := rec.Owner != nil && *rec.Owner == owner
	if !same {
		out.Pane = nil
	}
	if same && rec.Pane != nil || ev.pane == nil || ev.obs == nil {
		return
	}
	for _, o := range ev.obs.Owners {
		if o.Identity == owner && o.Shared {
			out.Pane = nil
			return
		}
	}
	out.Pane = ev.pane(owner)
}

// gatherCandidates lists every process that may own the session: the stored
// owner and candidates, and the owners the adapter reports now. Identities
// are unique per boot, so a stored owner already confirmed dead stays dead
// and is not probed again.
func gatherCandidates(rec *session.Record, ev evidence) []candidate {
	var out []candidate
	seen := map[proc.Identity]bool{}
	add := func(id proc.Identity, inferred bool, evidence string, known *proc.Result) {
		if id.IsZero() || seen[id] {
			return
		}
		seen[id] = true
		c := candidate{id: id, inferred: inferred, evidence: evidence}
		if known != nil {
			c.result, c.settled = *known, true
		} else {
			c.result = ev.probe(id)
		}
		// A process that lives on but no longer holds the session (by the
		// agent's exact account) has let it go; a dead one is just dead.
		if !c.settled && c.result.Liveness != proc.Dead && ev.obs != nil && ev.obs.OwnersExact != "" && evidence != launchEvidence && !owns(ev.obs, id) {
			c.released, c.settled = true, true
			c.result = proc.Result{Liveness: proc.Dead, Reason: ev.obs.OwnersExact + " names another owner, or none"}
		}
		out = append(out, c)
	}
	terminal := rec.Status.Terminal()
	if ev.obs != nil {
		for _, o := range ev.obs.Owners {
			if placedBefore(rec, o, ev.boot) {
				// The recorded owner is this very process, as it was
				// found on this host: its death is the owner's.
				add(*rec.Owner, o.Inferred, o.Evidence, knownDead(terminal))
				continue
			}
			// An owner the agent's data settles (another machine, a
			// previous boot) is never probed: its pid means nothing here.
			add(o.Identity, o.Inferred, o.Evidence, o.NoProbe)
		}
	}
	if rec.Owner != nil {
		evd := rec.OwnerEvidence
		if evd == "" {
			evd = "recorded owner"
		}
		add(*rec.Owner, rec.OwnerInferred, evd, knownDead(terminal))
	}
	for _, id := range rec.Candidates {
		add(id, true, "recorded candidate", knownDead(terminal))
	}
	return out
}

// placedBefore says whether o, an owner the adapter cannot place on this
// host now (adapters.Owner.Unplaced: a process of this boot), is the
// recorded owner: of this boot, with the same evidence, which names the
// process exactly, and the same start ticks.
func placedBefore(rec *session.Record, o adapters.Owner, boot string) bool {
	return o.Unplaced && rec.Owner != nil && boot != "" && rec.Owner.BootID == boot && o.Identity.StartTicks != 0 &&
		rec.Owner.StartTicks == o.Identity.StartTicks && o.Evidence != "" && rec.OwnerEvidence == o.Evidence
}

// owns says whether the observation names id as an owner.
func owns(o *adapters.Observed, id proc.Identity) bool {
	for _, ow := range o.Owners {
		if ow.Identity == id {
			return true
		}
	}
	return false
}

// knownDead is the answer for a recorded owner of a terminal session: it
// was confirmed dead, and identities are unique per boot.
func knownDead(terminal bool) *proc.Result {
	if !terminal {
		return nil
	}
	return &proc.Result{Liveness: proc.Dead, Reason: "confirmed dead earlier"}
}

// pickOwner prefers the current owner if it still lives, then an owner the
// agent named over an inferred one, then the first.
func pickOwner(rec *session.Record, alive []candidate) candidate {
	if rec.Owner != nil {
		for _, c := range alive {
			if c.id == *rec.Owner && !c.inferred {
				return c
			}
		}
	}
	for _, c := range alive {
		if !c.inferred {
			return c
		}
	}
	if rec.Owner != nil {
		for _, c := range alive {
			if c.id == *rec.Owner {
				return c
			}
		}
	}
	return alive[0]
}

// ambiguous: several live candidates and none named by the agent's data.
func ambiguous(alive []candidate) bool {
	if len(alive) < 2 {
		return false
	}
	for _, c := range alive {
		if !c.inferred {
			return false
		}
	}
	return true
}

// markDead makes out stopped, or interrupted when work was in flight: the
// adapter reports it now, it was recorded before, or the session was busy
// when last observed and cannot be observed now.
func markDead(out, rec *session.Record, observed bool, inFlight []adapters.Issue, problems *[]session.Problem, now time.Time, reason string) {
	out.Pane = nil // the pane, if it lives on, now runs something else
	flight := len(inFlight) > 0
	if flight {
		*problems = appendIssues(*problems, inFlight, now)
	} else {
		for _, p := range *problems {
			if p.Kind.InFlight() {
				flight = true
			}
		}
	}
	busyWhenLastSeen := !observed && rec.Activity == session.ActivityBusy && !rec.Status.Terminal()
	switch {
	case flight:
		out.Status = session.StatusInterrupted
		out.StatusReason = reason + "; work was in flight"
	case busyWhenLastSeen:
		out.Status = session.StatusInterrupted
		out.StatusReason = reason + "; it was busy when last observed"
	case rec.Status == session.StatusInterrupted && !observed:
		// Keep what we knew: nothing new says the work was finished.
		out.Status = session.StatusInterrupted
		out.StatusReason = rec.StatusReason
	default:
		out.Status = session.StatusStopped
		out.StatusReason = reason
	}
	// A launched owner that exited within seconds, not cleanly, before its
	// agent's data ever showed the session failed to start (a login or
	// usage error): say so, with its log tail. A clean exit, or a death
	// after the data showed the session, is a run that did start: the real
	// CLIs finish a headless turn against a fast model in under a second.
	if x := rec.Exit; x != nil && rec.Launched && rec.Owner != nil && x.PID == rec.Owner.PID && x.At.Sub(launchTime(rec)) < fastExit &&
		x.Code != 0 && (out.LastSeenAt == nil || !out.LastSeenAt.After(launchTime(rec))) {
		*problems = append(*problems, session.Problem{Kind: session.ProblemLaunchFailed, Since: x.At,
			Detail: fmt.Sprintf("exited %s after %s: %s", exitWords(x), x.At.Sub(launchTime(rec)).Round(10*time.Millisecond), x.LogTail)})
	}
	out.Activity, out.ActivitySource, out.ActivitySince, out.WaitingFor = "", "", nil, nil
	out.Candidates = nil
	if out.StoppedAt == nil || !rec.Status.Terminal() {
		t := now
		if rec.Status == "" && out.LastActivityAt != nil {
			// Discovered already dead: the best known end is the last write.
			t = *out.LastActivityAt
		}
		out.StoppedAt = &t
	}
}

// fastExit: a launched process that ends sooner than this failed to start.
const fastExit = 10 * time.Second

// launchTime is when the grace period started: the last launch or resume.
func launchTime(r *session.Record) time.Time {
	if r.LaunchedAt != nil {
		return *r.LaunchedAt
	}
	return r.CreatedAt
}

func exitWords(x *session.ExitStatus) string {
	if x.Signal != "" {
		return "on signal " + x.Signal
	}
	return fmt.Sprintf("with code %d", x.Code)
}

func deadReason(cands []candidate) string {
	if len(cands) == 1 {
		if cands[0].released {
			return fmt.Sprintf("owner pid %d let the session go: %s", cands[0].id.PID, cands[0].result.Reason)
		}
		return fmt.Sprintf("owner pid %d is dead: %s", cands[0].id.PID, cands[0].result.Reason)
	}
	return "every candidate owner is dead (" + pidList(cands) + ")"
}

func pidList(cs []candidate) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = strconv.Itoa(c.id.PID)
	}
	return "pids " + strings.Join(s, ", ")
}

func appendIssues(dst []session.Problem, issues []adapters.Issue, now time.Time) []session.Problem {
	for _, is := range issues {
		since := is.Since
		if since.IsZero() {
			since = now
		}
		dst = append(dst, session.Problem{Kind: is.Kind, Key: is.Key, Detail: is.Detail, Since: since})
	}
	return dst
}

// mergeProblems keeps Since from the previous record for a problem seen
// again (same kind and key), drops duplicates and orders the list so equal
// sets compare equal.
func mergeProblems(prev, next []session.Problem) []session.Problem {
	type key struct {
		kind session.ProblemKind
		key  string
	}
	old := map[key]time.Time{}
	for _, p := range prev {
		old[key{p.Kind, p.Key}] = p.Since
	}
	seen := map[key]bool{}
	out := make([]session.Problem, 0, len(next))
	for _, p := range next {
		k := key{p.Kind, p.Key}
		if seen[k] {
			continue
		}
		seen[k] = true
		if s, ok := old[k]; ok && !s.IsZero() {
			p.Since = s
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// events describes the change from prev to next. No change, no event; a
// change that only moves timestamps or titles is recorded without an event.
func events(prev, next *session.Record, isNew bool, now time.Time) []session.Event {
	ev := session.Event{
		Time:       now,
		Agent:      next.Agent,
		To:         next.Status,
		Activity:   next.Activity,
		WaitingFor: next.WaitingFor,
		Reason:     next.StatusReason,
		Problems:   problemKinds(next.Problems),
	}
	switch {
	case isNew:
		ev.Type = session.EventCreated
	case prev.Status != next.Status:
		ev.Type = session.EventStatus
		ev.From = prev.Status
	case prev.Activity != next.Activity,
		!prev.WaitingFor.Equal(next.WaitingFor),
		!sameOwner(prev, next),
		!sameProblems(prev.Problems, next.Problems),
		!sameCursor(prev.Resume, next.Resume):
		ev.Type = session.EventUpdated
		ev.From = prev.Status
	default:
		return nil
	}
	return []session.Event{ev}
}

func sameCursor(a, b *session.ResumeCursor) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func sameOwner(a, b *session.Record) bool {
	if (a.Owner == nil) != (b.Owner == nil) {
		return false
	}
	if a.Owner != nil && *a.Owner != *b.Owner {
		return false
	}
	if len(a.Candidates) != len(b.Candidates) {
		return false
	}
	for i := range a.Candidates {
		if a.Candidates[i] != b.Candidates[i] {
			return false
		}
	}
	return true
}

// sameProblems compares kinds, keys and details; Since is kept by merge.
func sameProblems(a, b []session.Problem) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Kind != b[i].Kind || a[i].Key != b[i].Key || a[i].Detail != b[i].Detail {
			return false
		}
	}
	return true
}

func problemKinds(ps []session.Problem) []session.ProblemKind {
	var out []session.ProblemKind
	for _, p := range ps {
		if len(out) == 0 || out[len(out)-1] != p.Kind {
			out = append(out, p.Kind)
		}
	}
	return out
}
