package tracker

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// decide's table tests hold each rule by one case or two: one edited
// case would let a broken rule through. This test is the
// second, independent guard: it draws thousands of records and pieces of
// evidence from a seeded generator and checks, for every draw, the
// promise the rules serve, "a session runs iff its owner lives", stated
// from decide's invariants 1-4 rather than from its code:
//
//   - never stopped or interrupted while a candidate owner probes alive
//     or unknown; running (or starting) exactly when one probes alive,
//     and then owned by one that does;
//   - with no candidate at all: unknown while the data moved inside the
//     grace period, dead past it; absent from the scan, the last known
//     status stays;
//   - a hook changes the activity only, never the status or the owner,
//     and only when it came from the owner's tree;
//   - decide does not touch its input, and deciding its own answer again
//     with the same evidence keeps the status.
//
// The oracle (claimsOf) says which processes may own the session and what
// each counts as, from the contract: owners the agent's data names (as
// it settles them, or probed), and the record's owner and candidates
// while it is not stopped (identities are unique per boot, so a stopped
// session's owners are settled dead); the recorded owner in place of an
// unplaced one that names it exactly; and, where the data names its
// owners exactly, a recorded one it no longer names has let go.

// propCases is how many draws one run checks: well under a second, and a
// few seconds with -race on two cores.
const propCases = 20000

// propSeed fixes the draws: a failure names its case, and the same case
// comes back on every run.
const propSeed = 37

func TestDecideProperties(t *testing.T) {
	r := rand.New(rand.NewPCG(propSeed, propSeed))
	counts := map[string]int{}
	for i := 0; i < propCases; i++ {
		c := drawCase(r)
		for _, err := range c.check(counts) {
			t.Errorf("case %d: %v\n%s", i, err, c)
		}
		if t.Failed() {
			// One case's dump is enough to read; the rest would repeat it.
			t.FailNow()
		}
	}
	// The draws must reach every branch the invariants speak of, or a
	// change to the generator would quietly test nothing.
	for _, k := range []string{"alive", "unknown", "all dead", "none, moved inside grace", "none, still past grace",
		"none, absent", "hook from the owner's tree", "hook from outside only", "unplaced, the recorded owner", "released"} {
		if counts[k] < propCases/200 {
			t.Errorf("only %d of %d draws reach %q: %v", counts[k], propCases, k, counts)
		}
	}
	t.Logf("draws by branch: %v", counts)
}

// propCase is one draw.
type propCase struct {
	rec  *session.Record
	ev   evidence
	live map[proc.Identity]proc.Liveness
	// consistent: the probe agrees that a stopped record's owner is dead.
	consistent bool
}

// The probed identities: three processes of this boot, and a process that
// took pid 100 after the first (other start ticks).
var (
	propIDs = []proc.Identity{ident(100), ident(200), ident(300), {BootID: "boot-a", PID: 100, StartTicks: 999}}
	// propHookProc is the hook's own process, below the owner or a stranger.
	propHookProc = ident(900)
	// Owners the agent's data settles: another machine's (no boot) and
	// an earlier boot's; never probed, and never one of propIDs.
	settledIDs = []proc.Identity{{PID: 100, StartTicks: 1000}, {BootID: "boot-old", PID: 200, StartTicks: 2000}}
)

const (
	propGrace       = 30 * time.Second
	unplacedEv      = "registry, pid 1 of PID namespace pid:[4026532178]"
	unplacedTicks   = 3000
	propExactOwners = "the lock table"
)

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// ago is a moment before t0 that lands inside the grace period, on its
// edge, or past it.
func ago(r *rand.Rand) time.Time {
	return t0.Add(-pick(r, 0, time.Second, 5*time.Second, propGrace-time.Second, propGrace, propGrace+time.Second, 5*time.Minute, 2*time.Hour))
}

func drawCase(r *rand.Rand) *propCase {
	c := &propCase{live: map[proc.Identity]proc.Liveness{}}
	for _, id := range propIDs {
		if l := pick(r, proc.Alive, proc.Dead, proc.Unknown, -1); l >= 0 {
			c.live[id] = l // -1: not in the table, the kernel has no such process
		}
	}
	c.live[propHookProc] = proc.Alive
	c.rec = drawRecord(r)
	// Most worlds agree with the record: a stopped session's owner was
	// confirmed dead, and an identity never lives again. The others probe
	// it alive or unknown, as a buggy probe would: decide must not take
	// a stopped session's owner back from it.
	c.consistent = true
	if c.rec.Status.Terminal() && c.rec.Owner != nil {
		if chance(r, 0.7) {
			delete(c.live, *c.rec.Owner)
		} else {
			c.consistent = c.live[*c.rec.Owner] == proc.Dead
			if _, ok := c.live[*c.rec.Owner]; !ok {
				c.consistent = true
			}
		}
	}
	boot := pick(r, "boot-a", "boot-a", "", "boot-b")
	c.ev = evidence{probe: probeTable(c.live), now: t0, grace: propGrace, stallAfter: 20 * time.Minute, boot: boot}
	if chance(r, 0.7) {
		c.ev.obs = drawObserved(r, c.rec, boot)
	}
	if chance(r, 0.1) {
		c.ev.adapterErr = fmt.Errorf("permission denied")
	}
	for n := pick(r, 0, 0, 1, 2, 3); n > 0; n-- {
		c.ev.hooks = append(c.ev.hooks, drawHook(r))
	}
	return c
}

func drawRecord(r *rand.Rand) *session.Record {
	status := pick(r, session.Status(""), session.StatusStarting, session.StatusRunning, session.StatusUnknown, session.StatusStopped, session.StatusInterrupted)
	rec := &session.Record{ID: "abc123", Agent: "claude", UpstreamID: "up-1", Status: status, Cwd: "/w",
		CreatedAt: t0.Add(-time.Hour), Problems: []session.Problem{}}
	// A running or starting record has its owner: only decideLive makes
	// one, and it names the owner; a launch records the process it
	// started.
	if chance(r, 0.7) || status == session.StatusRunning || status == session.StatusStarting {
		id := pick(r, propIDs...)
		rec.Owner = &id
		rec.OwnerInferred = chance(r, 0.3)
		rec.OwnerEvidence = pick(r, "", "registry", launchEvidence, unplacedEv)
	}
	// Candidates come with an owner of a session not stopped: decide
	// records them only beside the live one it picked (an ambiguous
	// owner), and drops them when the session stops.
	for n := pick(r, 0, 0, 0, 1, 2); n > 0 && rec.Owner != nil && !status.Terminal(); n-- {
		rec.Candidates = append(rec.Candidates, pick(r, propIDs...))
	}
	if chance(r, 0.3) {
		rec.Launched = true
		rec.CreatedAt = t0.Add(-pick(r, time.Second, 10*time.Second, 40*time.Second))
		if chance(r, 0.5) {
			rec.LaunchedAt = ptime(ago(r))
		}
	}
	if chance(r, 0.7) {
		rec.LastActivityAt = ptime(ago(r))
	}
	if chance(r, 0.5) {
		rec.LastSeenAt = ptime(ago(r))
	}
	if status != "" && !status.Terminal() {
		rec.Activity = pick(r, session.ActivityBusy, session.ActivityIdle, session.ActivityWaiting, session.ActivityUnknown)
		rec.ActivitySource = pick(r, session.SourceTranscript, session.SourceRegistry, session.SourceHook)
		rec.ActivitySince = ptime(ago(r))
		if rec.Activity == session.ActivityWaiting {
			rec.WaitingFor = &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash"}
		}
	}
	if status.Terminal() {
		rec.StoppedAt = ptime(ago(r))
	}
	if chance(r, 0.3) {
		rec.Problems = append(rec.Problems, session.Problem{Kind: session.ProblemOrphanedToolCall, Key: "toolu_1", Since: ago(r)})
	}
	if chance(r, 0.2) {
		rec.Problems = append(rec.Problems, session.Problem{Kind: session.ProblemOrphanProcesses, Key: "4242", Since: ago(r)})
	}
	if rec.Owner != nil && rec.Launched && chance(r, 0.3) {
		rec.Exit = &session.ExitStatus{PID: rec.Owner.PID, Code: pick(r, 0, 1), At: t0.Add(-time.Second)}
	}
	return rec
}

func drawObserved(r *rand.Rand, rec *session.Record, boot string) *adapters.Observed {
	o := &adapters.Observed{UpstreamID: "up-1", Cwd: "/w"}
	for n := pick(r, 0, 0, 1, 1, 2); n > 0; n-- {
		o.Owners = append(o.Owners, adapters.Owner{Identity: pick(r, propIDs...), Inferred: chance(r, 0.4), Evidence: pick(r, "registry", "argv --resume")})
	}
	if chance(r, 0.15) {
		o.Owners = append(o.Owners, adapters.Owner{Identity: pick(r, settledIDs...), Evidence: "registry",
			NoProbe: &proc.Result{Liveness: pick(r, proc.Unknown, proc.Dead), Reason: "settled by the agent's data"}})
	}
	switch {
	case chance(r, 0.2):
		// An owner the adapter cannot place now (a PID namespace out of
		// sight), which may or may not name the recorded owner exactly.
		ow := adapters.Owner{Identity: proc.Identity{PID: 1, StartTicks: unplacedTicks}, Evidence: unplacedEv, Unplaced: true,
			NoProbe: &proc.Result{Liveness: proc.Unknown, Reason: "pid 1 lives in another PID namespace"}}
		if rec.Owner != nil && chance(r, 0.6) {
			ow.Identity.StartTicks = rec.Owner.StartTicks
		}
		if chance(r, 0.2) {
			ow.Evidence = "registry, pid 1 of PID namespace pid:[4026532999]"
		}
		if chance(r, 0.1) {
			ow.Unplaced = false
		}
		o.Owners = append(o.Owners, ow)
	case chance(r, 0.3):
		// Exact owners come from another kind of adapter (Codex's lock
		// table) than unplaced ones (Claude's registry): never both.
		o.OwnersExact = propExactOwners
	}
	if chance(r, 0.8) {
		o.LastActivity = ago(r)
	}
	o.Activity = pick(r, session.Activity(""), session.ActivityBusy, session.ActivityIdle, session.ActivityWaiting)
	if o.Activity != "" {
		o.ActivitySource = pick(r, session.SourceTranscript, session.SourceRegistry)
		o.ActivityAt = ago(r)
	}
	if o.Activity == session.ActivityWaiting {
		o.WaitingFor = &session.WaitingFor{Kind: session.WaitingPermission, Detail: "permission prompt"}
	}
	if chance(r, 0.3) {
		o.InFlight = append(o.InFlight, adapters.Issue{Kind: session.ProblemOrphanedToolCall, Key: "toolu_2", Detail: "Bash: sleep"})
	}
	if chance(r, 0.2) {
		o.Problems = append(o.Problems, adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: "4343", Detail: "sleep"})
	}
	return o
}

func drawHook(r *rand.Rand) *hookEvidence {
	h := &hookEvidence{Hook: adapters.Hook{UpstreamID: "up-1", Event: "PermissionRequest",
		Activity: pick(r, session.ActivityBusy, session.ActivityIdle, session.ActivityWaiting)}}
	if h.Activity == session.ActivityWaiting {
		h.WaitingFor = &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "make"}
	}
	h.At = t0.Add(-pick(r, 100*time.Millisecond, time.Second, 3*time.Second, time.Minute))
	h.From = []proc.Identity{propHookProc}
	for n := pick(r, 0, 1, 1, 2); n > 0; n-- {
		h.From = append(h.From, pick(r, propIDs...))
	}
	return h
}

// claimsOf is the oracle: every process that may own the session, with
// what it counts as.
func claimsOf(rec *session.Record, ev evidence) map[proc.Identity]proc.Liveness {
	stopped := rec.Status.Terminal()
	out := map[proc.Identity]proc.Liveness{}
	add := func(id proc.Identity, l proc.Liveness) {
		if _, ok := out[id]; !ok && !id.IsZero() {
			out[id] = l
		}
	}
	recorded := func(id proc.Identity) proc.Liveness {
		if stopped {
			return proc.Dead // confirmed dead when it stopped
		}
		return ev.probe(id).Liveness
	}
	named := map[proc.Identity]bool{}
	if o := ev.obs; o != nil {
		for _, ow := range o.Owners {
			named[ow.Identity] = true
			switch {
			case ow.Unplaced && rec.Owner != nil && ev.boot != "" && rec.Owner.BootID == ev.boot && ow.Identity.StartTicks != 0 &&
				ow.Identity.StartTicks == rec.Owner.StartTicks && ow.Evidence != "" && ow.Evidence == rec.OwnerEvidence:
				add(*rec.Owner, recorded(*rec.Owner))
			case ow.NoProbe != nil:
				add(ow.Identity, ow.NoProbe.Liveness)
			default:
				add(ow.Identity, ev.probe(ow.Identity).Liveness)
			}
		}
	}
	ids := rec.Candidates
	if rec.Owner != nil {
		ids = append([]proc.Identity{*rec.Owner}, ids...)
	}
	for _, id := range ids {
		l := recorded(id)
		launched := rec.Owner != nil && id == *rec.Owner && rec.OwnerEvidence == launchEvidence
		if ev.obs != nil && ev.obs.OwnersExact != "" && !stopped && l != proc.Dead && !named[id] && !launched {
			l = proc.Dead // let go, by the agent's exact account
		}
		add(id, l)
	}
	return out
}

// check decides the case and returns what it breaks, counting the
// branch it reached.
func (c *propCase) check(counts map[string]int) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	before := c.rec.Clone()
	out, evs := decide(c.rec, c.ev)
	if !reflect.DeepEqual(c.rec.Clone(), before) { // both through Clone: it makes an empty list nil
		fail("decide modified its input record")
	}

	claims := claimsOf(c.rec, c.ev)
	var alive, unknown int
	for _, l := range claims {
		switch l {
		case proc.Alive:
			alive++
		case proc.Unknown:
			unknown++
		}
	}
	live := out.Status == session.StatusRunning || out.Status == session.StatusStarting
	if live && (out.Owner == nil || claims[*out.Owner] != proc.Alive) {
		fail("%s with owner %v, which is no live candidate (claims %v)", out.Status, out.Owner, claims)
	}
	switch {
	case alive > 0:
		counts["alive"]++
		if !live {
			fail("%s (%s) while a candidate owner probes alive (claims %v)", out.Status, out.StatusReason, claims)
		}
	case unknown > 0:
		counts["unknown"]++
		if out.Status != session.StatusUnknown {
			fail("%s (%s) while no candidate lives and one could not be probed (claims %v)", out.Status, out.StatusReason, claims)
		}
	case len(claims) > 0:
		counts["all dead"]++
		if !out.Status.Terminal() {
			fail("%s (%s) while every candidate is dead (claims %v)", out.Status, out.StatusReason, claims)
		}
	case c.ev.obs != nil:
		last := c.rec.LastActivityAt
		if la := c.ev.obs.LastActivity; !la.IsZero() && (last == nil || la.After(*last)) {
			last = &la
		}
		if last != nil && c.ev.now.Sub(*last) < c.ev.grace {
			counts["none, moved inside grace"]++
			if out.Status != session.StatusUnknown {
				fail("%s (%s): no candidate, but the data moved %s ago, inside the grace period", out.Status, out.StatusReason, c.ev.now.Sub(*last))
			}
		} else {
			counts["none, still past grace"]++
			if !out.Status.Terminal() {
				fail("%s (%s): no candidate, and the data has been still past the grace period", out.Status, out.StatusReason)
			}
		}
	default:
		counts["none, absent"]++
		want := c.rec.Status
		if want == "" {
			want = session.StatusUnknown
		}
		if out.Status != want {
			fail("%s (%s): absent from the scan with no candidate, want the last known %q", out.Status, out.StatusReason, want)
		}
	}
	if out.Status.Terminal() && (out.StoppedAt == nil || out.Activity != "" || out.WaitingFor != nil) {
		fail("%s with stopped_at %v, activity %q, waiting %+v", out.Status, out.StoppedAt, out.Activity, out.WaitingFor)
	}
	if out.Status == session.StatusRunning && out.StoppedAt != nil {
		fail("running with stopped_at %v", out.StoppedAt)
	}
	if c.rec.Status != out.Status && (len(evs) != 1 || evs[0].To != out.Status) {
		fail("status %q -> %q with events %+v", c.rec.Status, out.Status, evs)
	}
	if u := claimsUnplaced(c.rec, c.ev); u {
		counts["unplaced, the recorded owner"]++
	}
	if c.ev.obs != nil && c.ev.obs.OwnersExact != "" && strings.Contains(out.StatusReason, "let the session go") {
		counts["released"]++
	}

	errs = append(errs, c.checkHooks(out, evs, counts)...)

	// Its own answer, decided again on the same evidence, keeps its status:
	// a steady state is a fixed point (in a world where the dead stay
	// dead: a session that left stopped has its owner probed again).
	if again, _ := decide(out, c.ev); c.consistent && again.Status != out.Status {
		fail("decided again: %s (%s) after %s (%s)", again.Status, again.StatusReason, out.Status, out.StatusReason)
	}
	return errs
}

// checkHooks compares the decision with the same one made without hooks:
// only the activity may differ, and only for a hook from the owner's tree.
func (c *propCase) checkHooks(out *session.Record, evs []session.Event, counts map[string]int) []error {
	if len(c.ev.hooks) == 0 {
		return nil
	}
	var errs []error
	noHooks := c.ev
	noHooks.hooks = nil
	base, baseEvs := decide(c.rec, noHooks)
	fromOwner := false
	if out.Owner != nil {
		for _, h := range c.ev.hooks {
			fromOwner = fromOwner || h.from(*out.Owner)
		}
	}
	live := out.Status == session.StatusRunning || out.Status == session.StatusStarting
	switch {
	case live && fromOwner:
		counts["hook from the owner's tree"]++
	case live:
		counts["hook from outside only"]++
	}
	if !fromOwner || !live {
		if !reflect.DeepEqual(out, base) || !reflect.DeepEqual(evs, baseEvs) {
			errs = append(errs, fmt.Errorf("hooks none of which came from the owner's tree changed the decision:\n with    %s\n without %s", recLine(out), recLine(base)))
		}
		return errs
	}
	a, b := out.Clone(), base.Clone()
	for _, x := range []*session.Record{a, b} {
		x.Activity, x.ActivitySource, x.ActivitySince, x.WaitingFor = "", "", nil, nil
		// The watchdog's flag follows the activity: busy with no
		// progress past the threshold is stalled, and a hook from the
		// owner's tree is progress.
		x.Problems = slices.DeleteFunc(x.Problems, func(p session.Problem) bool { return p.Kind == session.ProblemStalled })
		if len(x.Problems) == 0 {
			x.Problems = nil
		}
	}
	if !reflect.DeepEqual(a, b) {
		errs = append(errs, fmt.Errorf("a hook changed more than the activity:\n with    %s\n without %s", recLine(out), recLine(base)))
	}
	return errs
}

// claimsUnplaced reports whether the draw has an unplaced owner that names
// the recorded one exactly.
func claimsUnplaced(rec *session.Record, ev evidence) bool {
	if ev.obs == nil || rec.Owner == nil {
		return false
	}
	for _, ow := range ev.obs.Owners {
		if ow.Unplaced && ev.boot != "" && rec.Owner.BootID == ev.boot && ow.Identity.StartTicks == rec.Owner.StartTicks && ow.Evidence == rec.OwnerEvidence {
			return true
		}
	}
	return false
}

func recLine(r *session.Record) string {
	return fmt.Sprintf("%s (%s) owner %v activity %q from %q since %v waiting %+v problems %v stopped_at %v",
		r.Status, r.StatusReason, r.Owner, r.Activity, r.ActivitySource, r.ActivitySince, r.WaitingFor, r.Problems, r.StoppedAt)
}

// String dumps the draw, for a failure.
func (c *propCase) String() string {
	var b strings.Builder
	r := c.rec
	fmt.Fprintf(&b, "record: status %q owner %v (inferred %v, evidence %q) candidates %v launched %v at %v exit %+v\n",
		r.Status, r.Owner, r.OwnerInferred, r.OwnerEvidence, r.Candidates, r.Launched, r.LaunchedAt, r.Exit)
	fmt.Fprintf(&b, "        activity %q from %q since %v, last activity %v, last seen %v, problems %v\n",
		r.Activity, r.ActivitySource, r.ActivitySince, r.LastActivityAt, r.LastSeenAt, r.Problems)
	fmt.Fprintf(&b, "probe table: %v; boot %q; adapter error %v\n", c.live, c.ev.boot, c.ev.adapterErr)
	if o := c.ev.obs; o != nil {
		fmt.Fprintf(&b, "observed: owners %+v exact %q last activity %v activity %q at %v in flight %v problems %v\n",
			o.Owners, o.OwnersExact, o.LastActivity, o.Activity, o.ActivityAt, o.InFlight, o.Problems)
	} else {
		b.WriteString("not observed\n")
	}
	for _, h := range c.ev.hooks {
		fmt.Fprintf(&b, "hook: %s at %v from %v\n", h.Activity, h.At, h.From)
	}
	return b.String()
}
