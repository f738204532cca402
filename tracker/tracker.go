// Package tracker is where a session's status is decided, and the only code
// that changes it.
//
// A pass observes (a process-table snapshot, each adapter's Discover), then
// decides each session with the pure function decide, then records every
// change through state with its event, in one transaction (new sessions of
// a first pass in transactions of 2,000: see pass.go). Passes run on a
// periodic tick, at once when a watched owner exits, and shortly after an
// adapter's change hint. The tracker does no I/O of its own: processes are
// read through Host, agent data through adapters, the store through state.
package tracker

import (
	"context"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
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
	// AfterDiscover, if set, is called in each pass once every adapter
	// has looked, before anything is decided. The daemon gives the
	// runtime its default Ps back there after a first start's reads.
	AfterDiscover func()
	// OnCreated, if set, is called after each transaction of a pass's new
	// sessions commits, with the records it created as the store now
	// keeps them (what ListShared hands out; nothing changes them). It
	// runs on the pass's goroutine, between transactions: it must not
	// block, nor change the records. The daemon encodes a first start's
	// sessions for its first list there while the next transaction
	// commits.
	OnCreated func([]*session.Record)
	Now       func() time.Time
	Logger    *zap.Logger
}

// Defaults for Config.
const (
	defaultInterval   = 5 * time.Second
	DefaultGrace      = 30 * time.Second
	defaultStallAfter = 20 * time.Minute
	defaultDebounce   = 200 * time.Millisecond
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
	Adapters         []AdapterHealth
}

// AdapterHealth is one adapter's last scan: what the last pass learned
// about it (the daemon serves it in GET /v1/health).
type AdapterHealth struct {
	Name         string
	LastScan     time.Time
	LastDuration time.Duration
	Sessions     int
	// LastError is the error of the last pass ("" when it looked fine);
	// InputErrors names each input that could not be read.
	LastError   string
	InputErrors []string
	// InputWarnings names each input read only in part (corrupt, glued or
	// too long lines, skipped links, unparseable entries); statuses are
	// unaffected.
	InputWarnings []string
	// Drift is what the adapter's reads did not understand, per agent
	// version (adapters.Drift); statuses are unaffected.
	Drift []adapters.Drift
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
	// Unlooked counts, of Skipped, the records skipped without a look at
	// their evidence: settled under a quiet set returned again (quiet.go).
	Unlooked int
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
	settled map[*session.Record]settledMark
	// settledRecs is the store's list settled was last made over, and
	// lastLooked how many of its records that pass looked at.
	settledRecs []*session.Record
	lastLooked  int
	settledSeed maphash.Seed
	// claims, quietClaimed and badInputs are what the last pass learned
	// that lets this one skip the sessions of a quiet set (quiet.go):
	// the records' upstream ids, the quiet set (by agent) every session
	// of which has a record, and the inputs that failed (by agent).
	claims       *claimIndex
	quietClaimed map[string]*adapters.QuietSet
	badInputs    map[string]string

	cpMu sync.Mutex // one Checkpoint at a time

	hooks hookBox // hooks received, until a pass decides them (hooks.go)

	hint chan struct{}
	kick chan struct{}

	statsMu sync.Mutex
	stats   Stats
	health  map[string]AdapterHealth

	// OnPass, if set before Run, is called after each successful pass (the
	// daemon sends WATCHDOG=1 and updates metrics from it).
	OnPass func(PassReport)
}

// New returns a Tracker. Call Reconcile once before serving (invariant 6 of
// docs/design.md),
// then Run.
func New(cfg Config) *Tracker {
	if cfg.Interval <= 0 {
		cfg.Interval = defaultInterval
	}
	if cfg.Grace <= 0 {
		cfg.Grace = DefaultGrace
	}
	if cfg.StallAfter <= 0 {
		cfg.StallAfter = defaultStallAfter
	}
	if cfg.Debounce <= 0 {
		cfg.Debounce = defaultDebounce
	}
	if cfg.DiscoverTimeout <= 0 {
		cfg.DiscoverTimeout = 30 * time.Second
	}
	if cfg.CheckpointEvery <= 0 {
		cfg.CheckpointEvery = defaultCheckpointEvery
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Tracker{
		cfg:          cfg,
		log:          cfg.Logger,
		watched:      map[proc.Identity]bool{},
		settledSeed:  maphash.MakeSeed(),
		quietClaimed: map[string]*adapters.QuietSet{},
		hint:         make(chan struct{}, 1),
		kick:         make(chan struct{}, 1),
		health:       map[string]AdapterHealth{},
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
	p := &pass{t: t, restore: !t.restored}
	t.restored = true
	rep, err := p.run(ctx)
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
			zap.Int("sessions", rep.Sessions), zap.Int("created", rep.Created), zap.Int("changed", rep.Changed),
			zap.Int("skipped", rep.Skipped), zap.Int("unlooked", rep.Unlooked))
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
			h = AdapterHealth{Name: a.Name()}
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
		if q := obs.Quiet.Find(upstreamID); q != nil {
			c := *q // the set's own must not change
			return &c, nil
		}
		return nil, nil
	}
	return nil, fmt.Errorf("no adapter for agent %q", agent)
}
