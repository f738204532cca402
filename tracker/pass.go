package tracker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// pass is one reconcile pass and what it gathers on the way: what the
// adapters and the process table showed, the records it decides, and the
// changes it then writes. Reconcile makes one per pass, under passMu; run
// takes it through its steps in order: observe, plan, commit.
type pass struct {
	t   *Tracker
	rep PassReport
	// restore: the first pass; each adapter gets its saved state before
	// its Discover.
	restore bool

	obs  map[string]*observation // by agent: each adapter's result
	snap *proc.Snapshot          // the process table the adapters saw; nil if it failed
	// probes memoizes liveness for this pass; unknown counts the probes
	// that could not answer. probeMu guards both: new sessions are
	// decided on several cores (decideQueued).
	probeMu sync.Mutex
	probes  map[proc.Identity]proc.Result
	unknown uint64
	base    evidence // what every decision of this pass shares
	hooks   map[hookKey][]*hookEvidence

	// Shared, not copied: the pass only reads them (decide copies the ones
	// it changes), and the writes below go through Update.
	recs   []*session.Record
	claims *claimIndex // the upstream ids the records claim (quiet.go)
	// links ties launched records to the upstream ids linkLaunched found
	// for them (record id -> upstream id), and linkedUp the same by
	// agent and upstream id.
	links    map[string]string
	linkedUp map[string]map[string]bool
	// loud are the records whose sessions are in an adapter's own list;
	// sameInputs, by agent, whether its failed inputs are last pass's.
	loud       map[*session.Record]bool
	sameInputs map[string]bool
	// quietAgent is skipQuiet's last agent and the set it may skip for.
	quietAgent struct {
		name string
		set  *adapters.QuietSet
	}

	changed []string  // ids of the records that change
	queued  []queued  // the observations with no record, to decide
	creates []created // and their first records
}

// queued is an observed session with no record, to be decided.
type queued struct {
	agent, up string
	ob        *adapters.Observed
}

// run does the pass: observe, decide, record.
func (p *pass) run(ctx context.Context) (PassReport, error) {
	if err := p.observe(ctx); err != nil {
		return p.rep, err
	}
	t := p.t
	if t.cfg.AfterDiscover != nil {
		t.cfg.AfterDiscover()
	}
	p.probes = map[proc.Identity]proc.Result{}
	defer p.countProbes()
	p.base = evidence{probe: p.probe, pane: p.pane, now: t.cfg.Now(), grace: t.cfg.Grace, stallAfter: t.cfg.StallAfter}
	if p.snap != nil {
		p.base.boot = p.snap.BootID
	}
	p.hooks = t.hooks.snapshot(p.base.now)

	if err := p.plan(); err != nil {
		return p.rep, err
	}
	if len(p.changed) == 0 && len(p.creates) == 0 {
		t.syncWatches(p.recs)
		return p.rep, nil
	}
	if err := p.commit(); err != nil {
		return p.rep, err
	}
	if recs, err := t.cfg.Store.ListShared(); err == nil {
		t.syncWatches(recs)
	}
	return p.rep, nil
}

// observe takes the process snapshot and runs every adapter's Discover.
func (p *pass) observe(ctx context.Context) error {
	t := p.t
	// The store's records load (once, at the first pass: a restart's
	// largest cost after discovery) while the process table is read and
	// the adapters look. They are listed for the pass below, after
	// discovery, as always.
	loaded := make(chan struct{})
	go func() { defer close(loaded); _, _ = t.cfg.Store.ListShared() }()
	// At the first pass each adapter is handed what it saved meanwhile
	// too, on its own goroutine: decoding the saved state of 2,000 chats
	// and reading /proc overlap rather than add up on a restart.
	var restored []chan struct{}
	if p.restore {
		restored = make([]chan struct{}, len(t.cfg.Adapters))
		for i, a := range t.cfg.Adapters {
			restored[i] = make(chan struct{})
			go func() { defer close(restored[i]); t.restore(a) }()
		}
	}
	snap, err := t.cfg.Host.Snapshot()
	if err != nil {
		// Adapters still run: they must cope with a nil snapshot (no owners
		// inferred this pass); stored owners are still probed directly.
		t.log.Warn("process snapshot failed", zap.Error(err))
		snap = nil
	}
	p.snap = snap
	p.obs = t.discoverAll(ctx, snap, restored)
	<-loaded
	return ctx.Err()
}

// probe answers liveness once per identity per pass.
func (p *pass) probe(id proc.Identity) proc.Result {
	p.probeMu.Lock()
	defer p.probeMu.Unlock()
	if r, ok := p.probes[id]; ok {
		return r
	}
	r := p.t.cfg.Host.Probe(id)
	p.probes[id] = r
	if r.Liveness == proc.Unknown {
		p.unknown++
		p.t.log.Warn("liveness probe failed", zap.Int("pid", id.PID), zap.String("reason", r.Reason))
	}
	return r
}

// pane is the tmux pane process id runs in: the one its TMUX_PANE names,
// if it is still in that pane's process tree, whose root is a child of
// the tmux server ($TMUX names its pid). A daemon started from a pane
// inherits the variables but leaves the tree (Codex's app-server, which
// serves the TUIs of every pane): it is in no pane.
func (p *pass) pane(id proc.Identity) *session.Pane {
	if p.snap == nil {
		return nil
	}
	pr := p.snap.Procs[id.PID]
	if pr == nil || pr.Identity != id || pr.Env == nil {
		return nil
	}
	pane, server := session.PaneFromEnv(pr.Env["TMUX"], pr.Env["TMUX_PANE"])
	if pane == nil || server <= 1 {
		return nil
	}
	for cur, hops := pr, 0; hops < 64; hops++ {
		if cur.PPID == server {
			return pane
		}
		if cur = p.snap.Procs[cur.PPID]; cur == nil || cur.Env["TMUX_PANE"] != pane.ID {
			return nil
		}
	}
	return nil
}

// countProbes adds the pass's probes to the stats.
func (p *pass) countProbes() {
	t := p.t
	t.statsMu.Lock()
	t.stats.Probes += uint64(len(p.probes))
	t.stats.ProbeUnknown += p.unknown
	t.statsMu.Unlock()
}

// plan lists the records, matches them to the observations, and finds
// what changes: the records whose decision changes them, and the
// observations with no record. It writes nothing.
func (p *pass) plan() error {
	recs, err := p.t.cfg.Store.ListShared()
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	p.recs = recs
	p.rep.Sessions = len(recs)
	p.match()
	p.decideRecords()
	p.decideCreates()
	return nil
}

// match ties records to observations: the upstream ids the records
// claim, and the launched records that have none yet (linkLaunched).
func (p *pass) match() {
	p.claims = p.t.claimsFor(p.recs)
	p.linkLaunched()
	p.markLoud()
	p.compareInputs()
}

// evidenceFor is what the pass knows about r: its observation, or why
// there is none; and the agent's quiet set when that is what it rests on
// (the observation came from it, or the session is in neither list).
func (p *pass) evidenceFor(r *session.Record) (evidence, *adapters.QuietSet) {
	ev := p.base
	o, ok := p.obs[r.Agent]
	if !ok {
		return ev, nil // no adapter for this agent: nothing is known
	}
	up := r.UpstreamID
	if up == "" {
		up = p.links[r.ID]
	}
	var quiet *adapters.QuietSet
	if up != "" {
		ev.hooks = p.hooks[hookKey{r.Agent, up}]
		ev.obs = o.byUp[up]
		if ev.obs == nil && o.quiet != nil {
			ev.obs, quiet = o.quiet.Find(up), o.quiet
		}
	}
	if ev.obs == nil {
		switch {
		case o.err != nil:
			ev.adapterErr = o.err
		case r.Source != "":
			if in := o.failedInput(r.Source); in != "" {
				ev.adapterErr = fmt.Errorf("cannot read %s", in)
			}
		}
	}
	return ev, quiet
}

// decideRecords finds the records that change, skipping those settled.go
// proves unchanged.
//
// Decide outside the write transaction; re-decide inside it on the fresh
// record only for the sessions that change, so the writer lock is short
// and a concurrent change (a launch, a link) is never overwritten.
func (p *pass) decideRecords() {
	t := p.t
	// Keyed by the record itself (the store replaces a record it
	// writes, so a pointer names one version of it), which also hashes
	// faster than an id.
	// The store hands out one slice of records until it writes: over
	// the same records the marks are updated in place (a changed
	// record's dropped), else made anew, holding only those listed.
	// Making it anew every pass was most of an idle pass's garbage.
	inPlace := t.settled != nil && sameList(t.settledRecs, p.recs)
	settled := t.settled
	if !inPlace {
		settled = make(map[*session.Record]settledMark, len(p.recs))
	}
	// The records a quiet set vouches for are skipped here; the rest are
	// looked at, on several cores when there are many (a restart, which
	// has no settled marks, looks at every record: 12,000 took 31-70 ms
	// on one core), then taken in order.
	look := make([]lookedAt, 0, min(len(p.recs), t.lastLooked+t.lastLooked/8+16))
	for _, r := range p.recs {
		linked := len(p.links) > 0 && p.links[r.ID] != ""
		last, hit := t.settled[r]
		if hit && p.skipQuiet(r, last, linked) {
			settled[r] = last
			p.rep.Skipped++
			p.rep.Unlooked++
			continue
		}
		look = append(look, lookedAt{r: r, linked: linked, last: last, hit: hit})
	}
	inParts(len(look), func(i int) { p.lookAt(&look[i]) })
	for i := range look {
		l := &look[i]
		switch {
		case l.skip:
			settled[l.r] = l.mark
			p.rep.Skipped++
		case l.changed:
			p.changed = append(p.changed, l.r.ID)
			delete(settled, l.r)
		case l.settle:
			settled[l.r] = l.mark
		default:
			delete(settled, l.r)
		}
	}
	t.settled, t.settledRecs, t.lastLooked = settled, p.recs, len(look)
}

// lookedAt is a record decideRecords looks at, and what it found.
type lookedAt struct {
	r      *session.Record
	linked bool
	last   settledMark // the record's settled mark, if hit
	hit    bool
	// Found: skip (the evidence is what the record was settled on),
	// changed (decide changes the record), or settle (it does not, and
	// mark is what it is settled on now).
	skip, changed, settle bool
	mark                  settledMark
}

// lookAt decides l's record. It only reads the pass (the probe memo is
// locked), so records are looked at on several goroutines at once.
func (p *pass) lookAt(l *lookedAt) {
	ev, quiet := p.evidenceFor(l.r)
	print, ok := settledPrint(p.t.settledSeed, l.r, ev, l.linked)
	if ok && l.hit && l.last.print == print {
		l.skip, l.mark = true, settledMark{print, quiet}
		return
	}
	next, evs := decide(l.r, ev)
	if len(evs) > 0 || recordMoved(l.r, next) || l.linked {
		l.changed = true
	} else if ok {
		l.settle, l.mark = true, settledMark{print, quiet}
	}
}

// decideCreates decides a first record for each observation no record
// claims.
func (p *pass) decideCreates() {
	for agent, o := range p.obs {
		for up, ob := range o.byUp {
			if !p.isClaimed(agent, up) {
				p.create(agent, up, ob)
			}
		}
		p.quietCreates(agent, o)
	}
	p.decideQueued()
}

// create queues an observed session for its first record.
func (p *pass) create(agent, up string, ob *adapters.Observed) {
	p.queued = append(p.queued, queued{agent, up, ob})
}

// parallelDecideMin is how many sessions make a pass decide them on more
// than one core (a first start decides thousands of new ones: 12,000 took
// 33 ms on one; a restart as many records), and maxDecideParts the most
// goroutines it uses.
var parallelDecideMin = 1000 // a variable for the tests

const maxDecideParts = 4

// inParts calls fn(i) for each i in [0, n): on one goroutine when n is
// under parallelDecideMin, else split into contiguous parts on up to
// maxDecideParts goroutines, one per core. It returns when all are done.
func inParts(n int, fn func(i int)) {
	parts := 1
	if n >= parallelDecideMin {
		parts = min(runtime.GOMAXPROCS(0), maxDecideParts)
	}
	if parts <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	per := (n + parts - 1) / parts
	var wg sync.WaitGroup
	for lo := 0; lo < n; lo += per {
		hi := min(lo+per, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// decideQueued decides the first record of each queued session. decide
// only reads the evidence, and the pass's probe memo is locked, so the
// sessions are split over the cores when there are many.
func (p *pass) decideQueued() {
	q := p.queued
	p.queued = nil
	// In the order commit writes them: sorting these small entries costs
	// less than sorting the decided ones (a first start's 10,000 took
	// 10 ms, moving their events).
	slices.SortFunc(q, func(a, b queued) int { return upstreamOrder(a.agent, a.up, b.agent, b.up) })
	out := make([]created, len(q))
	inParts(len(q), func(i int) { out[i] = p.decideNew(q[i]) })
	p.creates = append(p.creates, out...)
}

// upstreamOrder orders sessions by agent, then upstream id: the order of
// the store's upstream index, in which commit writes new records.
func upstreamOrder(agentA, upA, agentB, upB string) int {
	return cmp.Or(strings.Compare(agentA, agentB), strings.Compare(upA, upB))
}

// decideNew decides the first record of a queued session.
func (p *pass) decideNew(c queued) created {
	fresh := &session.Record{Agent: c.agent, UpstreamID: c.up, CreatedAt: p.base.now, Problems: []session.Problem{}}
	ev := p.base
	ev.obs = c.ob
	ev.hooks = p.hooks[hookKey{c.agent, c.up}]
	next, evs := decide(fresh, ev)
	return created{next, evs[0]}
}

// commit writes the changes, and the creations in chunks of createChunk
// per transaction: bbolt keeps a transaction's inserts into a bucket in
// one sorted slice per node until the commit splits it, so one
// transaction of n inserts at random keys costs O(n²) (a first start
// over 40,000 transcripts spent 3 s moving memory). Each creation
// stands alone (a crash between chunks leaves the rest for the next
// pass), and no client sees any before the startup pass is done.
func (p *pass) commit() error {
	t, creates := p.t, p.creates
	// New records go in in the order of the store's upstream index, and
	// get their ids now, drawn at random and handed out in that order
	// too: each insert then lands at the end of the sessions and of the
	// index, not at a random place (memory moved, pages split and
	// rewritten grow with the distance), and on a first start each chunk
	// lands past the last one, which the store turns into full pages and
	// no lookups (state's keyTrack).
	byUpstream := func(a, b created) int {
		return upstreamOrder(a.rec.Agent, a.rec.UpstreamID, b.rec.Agent, b.rec.UpstreamID)
	}
	if !slices.IsSortedFunc(creates, byUpstream) { // decideQueued sorts them
		slices.SortFunc(creates, byUpstream)
	}
	var ids []string
	for _, c := range creates {
		if c.rec.ID == "" {
			ids = append(ids, newID())
		}
	}
	slices.Sort(ids)
	for _, c := range creates {
		if c.rec.ID == "" {
			c.rec.ID, ids = ids[0], ids[1:]
		}
	}
	first := min(len(creates), createChunk)
	var made []*session.Record
	err := t.cfg.Store.Batch(func(tx *state.Tx) error {
		for _, id := range p.changed {
			_, err := tx.Update(id, func(r *session.Record) ([]session.Event, error) {
				if r.UpstreamID == "" && p.links[id] != "" {
					r.UpstreamID = p.links[id]
				}
				ev, _ := p.evidenceFor(r)
				next, evs := decide(r, ev)
				*r = *next
				return evs, nil
			})
			if errors.Is(err, state.ErrNotFound) {
				continue // removed meanwhile
			}
			if err != nil {
				return fmt.Errorf("update session %s: %w", id, err)
			}
			p.rep.Changed++
		}
		var err error
		made, err = createAll(tx, creates[:first], &p.rep)
		return err
	})
	p.created(err, made)
	for rest := creates[first:]; err == nil && len(rest) > 0; {
		n := min(len(rest), createChunk)
		err = t.cfg.Store.Batch(func(tx *state.Tx) (err error) {
			made, err = createAll(tx, rest[:n], &p.rep)
			return err
		})
		p.created(err, made)
		rest = rest[n:]
	}
	return err
}

// created hands the records of a committed transaction to OnCreated.
func (p *pass) created(err error, made []*session.Record) {
	if err == nil && len(made) > 0 && p.t.cfg.OnCreated != nil {
		p.t.cfg.OnCreated(made)
	}
}

// observation is one adapter's result for this pass.
type observation struct {
	err       error           // Discover failed: nothing is known this pass
	badInputs map[string]bool // inputs that failed while others were read
	// byUp are the sessions of the adapter's list; quiet its quiet set,
	// where byUp shadows it.
	byUp  map[string]*adapters.Observed
	quiet *adapters.QuietSet
}

// each calls fn for every session observed: the list's, then the quiet
// set's it does not shadow.
func (o *observation) each(fn func(up string, ob *adapters.Observed)) {
	for up, ob := range o.byUp {
		fn(up, ob)
	}
	o.quiet.Each(func(ob *adapters.Observed) bool {
		if o.byUp[ob.UpstreamID] == nil {
			fn(ob.UpstreamID, ob)
		}
		return true
	})
}

// failedInput returns the failed input that source is, or lies under (a
// failed root covers every project dir in it), or "".
func (o *observation) failedInput(source string) string {
	for in := range o.badInputs {
		if source == in || strings.HasPrefix(source, strings.TrimSuffix(in, "/")+"/") {
			return in
		}
	}
	return ""
}

// createChunk bounds the creations per transaction (see commit). A
// transaction holds a buffer for every page it dirties until it commits.
// When new records went in at random ids, each dirtied a page: 2,000 per
// transaction held ~6.5 MB of pages at a first start over 12,000
// sessions, so they went 500 at a time. Now that a pass's new records go
// in id order (they fill the last leaf, then the next), 2,000 per
// transaction dirty fewer pages than 500 did at random: measured on a cold
// first start over 10,000 Claude + 2,000 OpenCode sessions, 3 alternating
// runs, peak RSS 96-98 MiB with 500 and 86.5-88 MiB with 2,000, and the
// creations and commits after discovery 334-429 ms and 290-338 ms.
const createChunk = 2000

// newID draws a new record's id (a variable so a test can make two
// draws collide).
var newID = state.NewID

// created is a record a pass creates, with its first event.
type created struct {
	rec *session.Record
	ev  session.Event
}

// createAll creates cs in tx and returns the records created (those a
// launch did not link meanwhile), as the store keeps them.
func createAll(tx *state.Tx, cs []created, rep *PassReport) ([]*session.Record, error) {
	made := make([]*session.Record, 0, len(cs))
	for _, c := range cs {
		// The store keeps c.rec itself: decide made it for this pass
		// alone, sharing nothing, and nothing changes it after.
		err := tx.CreateOwned(c.rec, c.ev)
		for errors.Is(err, state.ErrIDInUse) {
			// commit drew the id at random: draw again.
			c.rec.ID = newID()
			err = tx.CreateOwned(c.rec, c.ev)
		}
		if errors.Is(err, state.ErrConflict) {
			continue // recorded meanwhile (a launch linked it)
		}
		if err != nil {
			return nil, fmt.Errorf("create session %s/%s: %w", c.rec.Agent, c.rec.UpstreamID, err)
		}
		rep.Created++
		made = append(made, c.rec)
	}
	return made, nil
}

// linkLaunched ties a launched record that has no upstream id yet (OpenCode
// shows its id only in its own data) to the unclaimed observation of its
// session, so the record never gets a duplicate. The evidence is the owner
// (the observation names the launched process, or a process it started:
// an npm-installed CLI's wrapper runs the native binary that holds the
// session, as Codex 0.169.0's does), else, for an agent that
// already exited, a session in the launch's cwd first written after the
// launch. Exactly one match on both sides, or none.
func (p *pass) linkLaunched() {
	p.links, p.linkedUp = map[string]string{}, map[string]map[string]bool{}
	claim := func(r *session.Record, up string) {
		p.links[r.ID] = up
		if p.linkedUp[r.Agent] == nil {
			p.linkedUp[r.Agent] = map[string]bool{}
		}
		p.linkedUp[r.Agent][up] = true
	}
	var pending []*session.Record
	for _, r := range p.recs {
		if r.UpstreamID != "" || r.Owner == nil || !r.Launched || p.obs[r.Agent] == nil {
			continue
		}
		var match []string
		p.obs[r.Agent].each(func(up string, ob *adapters.Observed) {
			if p.isClaimed(r.Agent, up) {
				return
			}
			for _, ow := range ob.Owners {
				if ow.Identity == *r.Owner || p.descends(ow.Identity, *r.Owner) {
					match = append(match, up)
					break
				}
			}
		})
		switch len(match) {
		case 1:
			claim(r, match[0])
		case 0:
			pending = append(pending, r)
		}
	}
	// By cwd and time: only where one record and one session pair up.
	fits := func(r *session.Record, ob *adapters.Observed) bool {
		return r.LaunchedAt != nil && ob.Cwd == r.Cwd && !ob.LastActivity.Before(r.LaunchedAt.Add(-time.Second))
	}
	for _, r := range pending {
		var match []string
		var matched *adapters.Observed
		p.obs[r.Agent].each(func(up string, ob *adapters.Observed) {
			if !p.isClaimed(r.Agent, up) && fits(r, ob) {
				match, matched = append(match, up), ob
			}
		})
		if len(match) != 1 {
			continue
		}
		rivals := 0
		for _, o := range pending {
			if o.Agent == r.Agent && fits(o, matched) {
				rivals++
			}
		}
		if rivals == 1 {
			claim(r, match[0])
		}
	}
}

// maxLaunchDepth bounds how far below a launched process its session's
// owner is looked for (wrapper, binary: one level in practice).
const maxLaunchDepth = 4

// descends reports whether the process id is, in this pass's snapshot, a
// child (or grandchild, up to maxLaunchDepth) of the process ancestor,
// that very process and not one that reused its pid.
func (p *pass) descends(id, ancestor proc.Identity) bool {
	if p.snap == nil {
		return false
	}
	cur := p.snap.Procs[id.PID]
	if cur == nil || cur.Identity != id {
		return false
	}
	for range maxLaunchDepth {
		if cur = p.snap.Procs[cur.PPID]; cur == nil {
			return false
		}
		if cur.Identity == ancestor {
			return true
		}
	}
	return false
}

// recordMoved reports changes that carry no event (last activity, title,
// cwd, last seen) but still belong in the record.
func recordMoved(a, b *session.Record) bool {
	return !timeEq(a.LastActivityAt, b.LastActivityAt) || a.Title != b.Title || a.Cwd != b.Cwd ||
		a.Source != b.Source || (a.LastSeenAt == nil) != (b.LastSeenAt == nil) ||
		a.StatusReason != b.StatusReason && a.Status != b.Status ||
		(a.Pane == nil) != (b.Pane == nil) || a.Pane != nil && *a.Pane != *b.Pane
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// discoverAll runs every adapter's Discover. restored, at the first pass,
// closes for each adapter once it has been handed its saved state: its
// Discover waits for that.
func (t *Tracker) discoverAll(ctx context.Context, snap *proc.Snapshot, restored []chan struct{}) map[string]*observation {
	// The adapters look at once, each on its own goroutine: their inputs
	// are their own (one reads files, the other a database), and a first
	// start or a restart waits for the slowest, not for the sum.
	type result struct {
		res  adapters.Observation
		err  error
		took time.Duration
	}
	results := make([]result, len(t.cfg.Adapters))
	var wg sync.WaitGroup
	for i, a := range t.cfg.Adapters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if restored != nil {
				<-restored[i]
			}
			dctx, cancel := context.WithTimeout(ctx, t.cfg.DiscoverTimeout)
			defer cancel()
			start := time.Now()
			res, err := a.Discover(dctx, snap)
			results[i] = result{res, err, time.Since(start)}
		}()
	}
	wg.Wait()
	out := map[string]*observation{}
	for i, a := range t.cfg.Adapters {
		name := a.Name()
		res, err := results[i].res, results[i].err
		o := &observation{err: err, badInputs: map[string]bool{}, byUp: make(map[string]*adapters.Observed, len(res.Sessions))}
		h := AdapterHealth{Name: name, LastScan: t.cfg.Now(), LastDuration: results[i].took}
		if err != nil {
			h.LastError = err.Error()
			t.log.Warn("adapter could not look; statuses kept", zap.String("adapter", name), zap.Error(err))
		} else {
			for i := range res.Sessions {
				s := &res.Sessions[i]
				if s.UpstreamID == "" {
					continue
				}
				o.byUp[s.UpstreamID] = s
			}
			o.quiet = res.Quiet
			for _, ie := range res.Errors {
				o.badInputs[ie.Input] = true
				h.InputErrors = append(h.InputErrors, ie.Error())
				t.log.Warn("adapter input unreadable", zap.String("adapter", name), zap.String("input", ie.Input), zap.Error(ie.Err))
			}
			for _, w := range res.Warnings {
				h.InputWarnings = append(h.InputWarnings, w.Error())
			}
			h.Drift = res.Drift
			h.Sessions = res.Len()
		}
		out[name] = o
		t.statsMu.Lock()
		if err != nil || len(res.Errors) > 0 {
			t.stats.AdapterErrors++
		}
		t.health[name] = h
		t.statsMu.Unlock()
	}
	return out
}

// syncWatches asks the exit source to watch every live owner and candidate
// of a non-terminal session, and to forget the rest.
func (t *Tracker) syncWatches(recs []*session.Record) {
	if t.cfg.Exits == nil {
		return
	}
	want := map[proc.Identity]bool{}
	for _, r := range recs {
		if r.Status.Terminal() {
			continue
		}
		if r.Owner != nil {
			want[*r.Owner] = true
		}
		for _, c := range r.Candidates {
			want[c] = true
		}
	}
	for id := range want {
		t.watch(id)
	}
	for id := range t.watched {
		if !want[id] {
			t.cfg.Exits.Unwatch(id)
			delete(t.watched, id)
		}
	}
}
