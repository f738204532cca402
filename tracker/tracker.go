// Package tracker is where a session's status is decided, and the only code
// that changes it.
//
// A pass observes (a process-table snapshot, each adapter's Discover), then
// decides each session with the pure function decide, then records every
// change through state in one transaction with its event. Passes run on a
// periodic tick, at once when a watched owner exits, and shortly after an
// adapter's change hint. The tracker does no I/O of its own: processes are
// read through Host, agent data through adapters, the store through state.
package tracker

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// Host is the process table: liveness probes and snapshots. proc.Host is the
// real one; tests use fakes.
type Host interface {
	Probe(proc.Identity) proc.Result
	Snapshot() (*proc.Snapshot, error)
}

// ExitSource delivers owner exits as events (pidfd, kqueue), so a death is
// noticed at once rather than at the next tick. proc.ExitWatcher is the real one.
type ExitSource interface {
	Watch(proc.Identity) error
	Unwatch(proc.Identity)
	Exits() <-chan proc.Exit
}

// Config configures a Tracker. Zero durations take the defaults.
type Config struct {
	Store    *state.Store
	Adapters []adapters.Adapter
	Host     Host
	// Exits is optional: without it deaths are noticed at the next tick.
	Exits ExitSource
	// Interval between periodic passes (default 5 s).
	Interval time.Duration
	// Grace is the launch grace period, and how long the data of a session
	// with no candidate owner must be still before it counts as dead
	// (default 30 s).
	Grace time.Duration
	// StallAfter flags a live, busy session with no progress (default 20 min).
	StallAfter time.Duration
	// Debounce delays a pass after a change hint so bursts coalesce
	// (default 200 ms).
	Debounce time.Duration
	// DiscoverTimeout bounds one adapter's Discover (default 30 s).
	DiscoverTimeout time.Duration
	// CheckpointEvery is how often, at most, Run saves what the adapters
	// learned (default DefaultCheckpointEvery).
	CheckpointEvery time.Duration
	Now             func() time.Time
	Logger          *zap.Logger
}

// Defaults for Config.
const (
	DefaultInterval   = 5 * time.Second
	DefaultGrace      = 30 * time.Second
	DefaultStallAfter = 20 * time.Minute
	DefaultDebounce   = 200 * time.Millisecond
)

// Stats are counters for health and metrics.
type Stats struct {
	Passes        uint64
	LastPass      time.Time
	LastDuration  time.Duration
	LastError     string
	Probes        uint64
	ProbeUnknown  uint64
	AdapterErrors uint64
	Transitions   uint64
	Created       uint64
	// Checkpoints counts saves of what the adapters learned, and
	// CheckpointErrors those that failed.
	Checkpoints      uint64
	CheckpointErrors uint64
	Adapters         []api.AdapterHealth
}

// PassReport summarizes one pass.
type PassReport struct {
	Trigger  string
	Duration time.Duration
	Sessions int
	Created  int
	Changed  int
	// Skipped counts the records not decided again: unchanged, with the
	// same evidence, and past what time alone could change (settled.go).
	Skipped int
}

// Tracker runs reconcile passes. Safe for concurrent use; passes serialize.
type Tracker struct {
	cfg Config
	log *zap.Logger

	passMu   sync.Mutex // one pass at a time
	watched  map[proc.Identity]bool
	restored bool // the first pass handed the adapters their saved state
	// settled are the records the last pass found unchanged and that time
	// alone cannot change, with their evidence's fingerprint (settled.go).
	settled     map[*session.Record]uint64
	settledSeed maphash.Seed

	cpMu sync.Mutex // one Checkpoint at a time

	hint chan struct{}
	kick chan struct{}

	statsMu sync.Mutex
	stats   Stats
	health  map[string]api.AdapterHealth

	// OnPass, if set before Run, is called after each successful pass (the
	// daemon sends WATCHDOG=1 and updates metrics from it).
	OnPass func(PassReport)
}

// New returns a Tracker. Call Reconcile once before serving (invariant 6),
// then Run.
func New(cfg Config) *Tracker {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = DefaultStallAfter
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = DefaultDebounce
	}
	if cfg.DiscoverTimeout <= 0 {
		cfg.DiscoverTimeout = 30 * time.Second
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = DefaultCheckpointEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Tracker{
		cfg:         cfg,
		log:         cfg.Logger,
		watched:     map[proc.Identity]bool{},
		settledSeed: maphash.MakeSeed(),
		hint:        make(chan struct{}, 1),
		kick:        make(chan struct{}, 1),
		health:      map[string]api.AdapterHealth{},
	}
}

// Hint says an adapter's data changed; a pass follows after the debounce.
// It never blocks.
func (t *Tracker) Hint() {
	select {
	case t.hint <- struct{}{}:
	default:
	}
}

// Kick asks Run for a pass now, without the hint debounce (an exit the
// launcher collected). It never blocks.
func (t *Tracker) Kick() {
	select {
	case t.kick <- struct{}{}:
	default:
	}
}

// Run drives passes until ctx is done: every Interval, at once on an owner's
// exit, and after hints. It saves what the adapters learned at its start
// (after the startup pass), every CheckpointEvery, and when it stops.
// Cancellation is not an error: Run returns nil.
func (t *Tracker) Run(ctx context.Context) error {
	var lastCheckpoint time.Time
	t.checkpointIfDue(&lastCheckpoint, true)
	defer t.checkpointIfDue(&lastCheckpoint, true)
	tick := time.NewTicker(t.cfg.Interval)
	defer tick.Stop()
	var exits <-chan proc.Exit
	if t.cfg.Exits != nil {
		exits = t.cfg.Exits.Exits()
	}
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	defer debounce.Stop()
	// The debounce is armed by the first hint of a burst and not pushed
	// back by the rest: data that changes more often than the debounce
	// (a busy agent) must still get a pass every Debounce, not wait for the
	// tick.
	armed := false
	for {
		var trigger string
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			trigger = "tick"
		case ex := <-exits:
			t.log.Debug("owner exited", zap.Int("pid", ex.Identity.PID), zap.String("noticed_by", ex.Reason))
			trigger = "exit"
		case <-t.kick:
			trigger = "exit"
		case <-t.hint:
			if !armed {
				debounce.Reset(t.cfg.Debounce)
				armed = true
			}
			continue
		case <-debounce.C:
			armed = false
			trigger = "hint"
		}
		if _, err := t.Reconcile(ctx, trigger); err != nil && ctx.Err() == nil {
			t.log.Error("reconcile pass failed", zap.String("trigger", trigger), zap.Error(err))
		}
		t.checkpointIfDue(&lastCheckpoint, false)
	}
}

// Reconcile runs one pass now: observe, decide, record. It is also the
// startup reconciliation that must finish before the daemon reports ready.
func (t *Tracker) Reconcile(ctx context.Context, trigger string) (PassReport, error) {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	start := time.Now()
	if !t.restored {
		t.restored = true
		t.restore()
	}
	rep, err := t.pass(ctx)
	rep.Trigger = trigger
	rep.Duration = time.Since(start)

	t.statsMu.Lock()
	t.stats.Passes++
	t.stats.LastPass = t.cfg.Now()
	t.stats.LastDuration = rep.Duration
	t.stats.Transitions += uint64(rep.Changed)
	t.stats.Created += uint64(rep.Created)
	if err != nil {
		t.stats.LastError = err.Error()
	} else {
		t.stats.LastError = ""
	}
	t.statsMu.Unlock()

	if err == nil {
		t.log.Debug("reconciled", zap.String("trigger", trigger), zap.Duration("took", rep.Duration),
			zap.Int("sessions", rep.Sessions), zap.Int("created", rep.Created), zap.Int("changed", rep.Changed))
		if t.OnPass != nil {
			t.OnPass(rep)
		}
	}
	return rep, err
}

// Stats returns a copy of the counters and each adapter's health.
func (t *Tracker) Stats() Stats {
	t.statsMu.Lock()
	defer t.statsMu.Unlock()
	s := t.stats
	s.Adapters = nil
	for _, a := range t.cfg.Adapters {
		h, ok := t.health[a.Name()]
		if !ok {
			h = api.AdapterHealth{Name: a.Name()}
		}
		s.Adapters = append(s.Adapters, h)
	}
	return s
}

// Probe answers liveness through the tracker's host (the API's single
// writer check uses it).
func (t *Tracker) Probe(id proc.Identity) proc.Result { return t.cfg.Host.Probe(id) }

// watch asks the exit source for id's exit. Callers hold passMu.
func (t *Tracker) watch(id proc.Identity) {
	if t.cfg.Exits == nil || t.watched[id] {
		return
	}
	if err := t.cfg.Exits.Watch(id); err != nil {
		t.log.Debug("cannot watch owner exit; the periodic probe covers it", zap.Int("pid", id.PID), zap.Error(err))
		return
	}
	t.watched[id] = true
}

// Observe takes a fresh snapshot and asks the agent's adapter about one
// session now, for actions that must act on current evidence (reap). It
// runs under the pass lock: adapters keep state between passes.
func (t *Tracker) Observe(ctx context.Context, agent, upstreamID string) (*adapters.Observed, error) {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	snap, err := t.cfg.Host.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("process snapshot: %w", err)
	}
	for _, a := range t.cfg.Adapters {
		if a.Name() != agent {
			continue
		}
		obs, err := a.Discover(ctx, snap)
		if err != nil {
			return nil, fmt.Errorf("%s adapter: %w", agent, err)
		}
		for i := range obs.Sessions {
			if obs.Sessions[i].UpstreamID == upstreamID {
				return &obs.Sessions[i], nil
			}
		}
		return nil, nil
	}
	return nil, fmt.Errorf("no adapter for agent %q", agent)
}

// observation is one adapter's result for this pass.
type observation struct {
	err       error           // Discover failed: nothing is known this pass
	badInputs map[string]bool // inputs that failed while others were read
	byUp      map[string]*adapters.Observed
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

func (t *Tracker) pass(ctx context.Context) (PassReport, error) {
	var rep PassReport
	snap, err := t.cfg.Host.Snapshot()
	if err != nil {
		// Adapters still run: they must cope with a nil snapshot (no owners
		// inferred this pass); stored owners are still probed directly.
		t.log.Warn("process snapshot failed", zap.Error(err))
		snap = nil
	}
	// The store's records load (once, at the first pass: a restart's
	// largest cost after discovery) while the adapters look. They are
	// listed for the pass below, after discovery, as always.
	loaded := make(chan struct{})
	go func() { defer close(loaded); _, _ = t.cfg.Store.ListShared() }()
	obs := t.discoverAll(ctx, snap)
	<-loaded
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}

	probes := map[proc.Identity]proc.Result{}
	var unknown uint64
	probe := func(id proc.Identity) proc.Result {
		if r, ok := probes[id]; ok {
			return r
		}
		r := t.cfg.Host.Probe(id)
		probes[id] = r
		if r.Liveness == proc.Unknown {
			unknown++
			t.log.Warn("liveness probe failed", zap.Int("pid", id.PID), zap.String("reason", r.Reason))
		}
		return r
	}
	defer func() {
		t.statsMu.Lock()
		t.stats.Probes += uint64(len(probes))
		t.stats.ProbeUnknown += unknown
		t.statsMu.Unlock()
	}()
	now := t.cfg.Now()
	base := evidence{probe: probe, now: now, grace: t.cfg.Grace, stallAfter: t.cfg.StallAfter}

	// Shared, not copied: the pass only reads them (decide copies the ones
	// it changes), and the writes below go through Update.
	recs, err := t.cfg.Store.ListShared()
	if err != nil {
		return rep, fmt.Errorf("list sessions: %w", err)
	}
	rep.Sessions = len(recs)

	// Match records to observations, and find observations with no record.
	claimed := map[string]map[string]bool{} // agent -> upstream ids with a record
	for _, r := range recs {
		if r.UpstreamID == "" {
			continue
		}
		if claimed[r.Agent] == nil {
			claimed[r.Agent] = make(map[string]bool, len(recs))
		}
		claimed[r.Agent][r.UpstreamID] = true
	}
	links := t.linkLaunched(recs, obs, claimed)

	evidenceFor := func(r *session.Record) evidence {
		ev := base
		o, ok := obs[r.Agent]
		if !ok {
			return ev // no adapter for this agent: nothing is known
		}
		up := r.UpstreamID
		if up == "" {
			up = links[r.ID]
		}
		if up != "" {
			ev.obs = o.byUp[up]
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
		return ev
	}

	// Decide outside the write transaction; re-decide inside it on the fresh
	// record only for the sessions that change, so the writer lock is short
	// and a concurrent change (a launch, a link) is never overwritten.
	var changed []string
	// Keyed by the record itself (the store replaces a record it
	// writes, so a pointer names one version of it), which also hashes
	// faster than an id.
	settled := make(map[*session.Record]uint64, max(len(t.settled), len(recs)))
	for _, r := range recs {
		ev := evidenceFor(r)
		linked := len(links) > 0 && links[r.ID] != ""
		print, ok := settledPrint(t.settledSeed, r, ev, linked)
		if p, hit := t.settled[r]; ok && hit && p == print {
			settled[r] = p
			rep.Skipped++
			continue
		}
		next, evs := decide(r, ev)
		if len(evs) > 0 || recordMoved(r, next) || linked {
			changed = append(changed, r.ID)
		} else if ok {
			settled[r] = print
		}
	}
	t.settled = settled
	var creates []created
	for agent, o := range obs {
		for up, ob := range o.byUp {
			if claimed[agent][up] {
				continue
			}
			fresh := &session.Record{Agent: agent, UpstreamID: up, CreatedAt: now, Problems: []session.Problem{}}
			ev := base
			ev.obs = ob
			next, evs := decide(fresh, ev)
			creates = append(creates, created{next, evs[0]})
		}
	}
	if len(changed) == 0 && len(creates) == 0 {
		t.syncWatches(recs)
		return rep, nil
	}

	// The changes, and the creations in chunks of createChunk per
	// transaction: bbolt keeps a transaction's inserts into a bucket in
	// one sorted slice per node until the commit splits it, so one
	// transaction of n inserts at random keys costs O(n²) (a first start
	// over 40,000 transcripts spent 3 s moving memory). Each creation
	// stands alone (a crash between chunks leaves the rest for the next
	// pass), and no client sees any before the startup pass is done.
	first := min(len(creates), createChunk)
	err = t.cfg.Store.Batch(func(tx *state.Tx) error {
		for _, id := range changed {
			_, err := tx.Update(id, func(r *session.Record) ([]session.Event, error) {
				if r.UpstreamID == "" && links[id] != "" {
					r.UpstreamID = links[id]
				}
				next, evs := decide(r, evidenceFor(r))
				*r = *next
				return evs, nil
			})
			if errors.Is(err, state.ErrNotFound) {
				continue // removed meanwhile
			}
			if err != nil {
				return fmt.Errorf("update session %s: %w", id, err)
			}
			rep.Changed++
		}
		return createAll(tx, creates[:first], &rep)
	})
	for rest := creates[first:]; err == nil && len(rest) > 0; {
		n := min(len(rest), createChunk)
		err = t.cfg.Store.Batch(func(tx *state.Tx) error { return createAll(tx, rest[:n], &rep) })
		rest = rest[n:]
	}
	if err != nil {
		return rep, err
	}
	if recs, err = t.cfg.Store.ListShared(); err == nil {
		t.syncWatches(recs)
	}
	return rep, nil
}

// createChunk bounds the creations per transaction (see pass).
const createChunk = 2000

// created is a record a pass creates, with its first event.
type created struct {
	rec *session.Record
	ev  session.Event
}

func createAll(tx *state.Tx, cs []created, rep *PassReport) error {
	for _, c := range cs {
		err := tx.Create(c.rec, c.ev)
		if errors.Is(err, state.ErrConflict) {
			continue // recorded meanwhile (a launch linked it)
		}
		if err != nil {
			return fmt.Errorf("create session %s/%s: %w", c.rec.Agent, c.rec.UpstreamID, err)
		}
		rep.Created++
	}
	return nil
}

// linkLaunched ties a launched record that has no upstream id yet (OpenCode
// shows its id only in its own data) to the unclaimed observation of its
// session, so the record never gets a duplicate. The evidence is the owner
// (the observation names the launched process), else, for an agent that
// already exited, a session in the launch's cwd first written after the
// launch. Exactly one match on both sides, or none.
func (t *Tracker) linkLaunched(recs []*session.Record, obs map[string]*observation, claimed map[string]map[string]bool) map[string]string {
	links := map[string]string{}
	claim := func(r *session.Record, up string) {
		links[r.ID] = up
		if claimed[r.Agent] == nil {
			claimed[r.Agent] = map[string]bool{}
		}
		claimed[r.Agent][up] = true
	}
	var pending []*session.Record
	for _, r := range recs {
		if r.UpstreamID != "" || r.Owner == nil || !r.Launched || obs[r.Agent] == nil {
			continue
		}
		var match []string
		for up, ob := range obs[r.Agent].byUp {
			if claimed[r.Agent][up] {
				continue
			}
			for _, ow := range ob.Owners {
				if ow.Identity == *r.Owner {
					match = append(match, up)
					break
				}
			}
		}
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
		for up, ob := range obs[r.Agent].byUp {
			if !claimed[r.Agent][up] && fits(r, ob) {
				match = append(match, up)
			}
		}
		if len(match) != 1 {
			continue
		}
		rivals := 0
		for _, o := range pending {
			if o.Agent == r.Agent && fits(o, obs[r.Agent].byUp[match[0]]) {
				rivals++
			}
		}
		if rivals == 1 {
			claim(r, match[0])
		}
	}
	return links
}

// recordMoved reports changes that carry no event (last activity, title,
// cwd, last seen) but still belong in the record.
func recordMoved(a, b *session.Record) bool {
	return !timeEq(a.LastActivityAt, b.LastActivityAt) || a.Title != b.Title || a.Cwd != b.Cwd ||
		a.Source != b.Source || (a.LastSeenAt == nil) != (b.LastSeenAt == nil) ||
		a.StatusReason != b.StatusReason && a.Status != b.Status
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func (t *Tracker) discoverAll(ctx context.Context, snap *proc.Snapshot) map[string]*observation {
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
		h := api.AdapterHealth{Name: name, LastScan: t.cfg.Now(), LastDuration: results[i].took.String()}
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
			for _, ie := range res.Errors {
				o.badInputs[ie.Input] = true
				h.InputErrors = append(h.InputErrors, ie.Error())
				t.log.Warn("adapter input unreadable", zap.String("adapter", name), zap.String("input", ie.Input), zap.Error(ie.Err))
			}
			for _, w := range res.Warnings {
				h.InputWarnings = append(h.InputWarnings, w.Error())
			}
			h.Sessions = len(o.byUp)
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
