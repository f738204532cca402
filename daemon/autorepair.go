package daemon

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/actions"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// Auto-repair policies: each names one safe action the watchdog may apply
// on its own. Nothing is automatic unless named.
const (
	// policyClaudeRegistry removes Claude Code registry entries of dead
	// processes.
	policyClaudeRegistry = "claude-registry"
	// policyOpenCodeOffline repairs OpenCode data no process holds open.
	policyOpenCodeOffline = "opencode-offline"
	// policyReap terminates orphaned tool processes of dead sessions.
	policyReap = "reap"
)

// ParsePolicies checks a comma-separated --auto-repair value: the policies
// claude-registry, opencode-offline and reap; "", "off" and "none" name none.
func ParsePolicies(v string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(v, ",") {
		p = strings.TrimSpace(p)
		switch p {
		case "", "off", "none":
			continue
		case policyClaudeRegistry, policyOpenCodeOffline, policyReap:
			out = append(out, p)
		default:
			return nil, fmt.Errorf("unknown auto-repair policy %q (want %s, %s or %s)", p, policyClaudeRegistry, policyOpenCodeOffline, policyReap)
		}
	}
	return out, nil
}

// defaultAutoRepairRetry is how often a session is tried again.
const defaultAutoRepairRetry = time.Minute

// autoRepair applies the enabled policies to sessions interrupted longer
// than the grace period, after passes. Each applied action is planned
// first and recorded as an event. A session stays a candidate as long as
// it is interrupted, and is tried at most once per retry interval: a
// repair pending on a live process holding the data (an OpenCode TUI on
// the same database) plans nothing now and goes through on a later try,
// once that process is gone.
type autoRepair struct {
	policies map[string]bool
	grace    time.Duration
	retry    time.Duration
	store    *state.Store
	tracker  *tracker.Tracker
	server   *server
	log      *zap.Logger
	tried    map[string]time.Time // last try of each session still interrupted; see forget
}

// startAutoRepair starts the automatic repair of cfg.AutoRepair's
// policies, after each pass, until ctx ends; with no policy, nothing.
func startAutoRepair(ctx context.Context, wg *sync.WaitGroup, cfg Config, st *state.Store, tr *tracker.Tracker, d *server, passes <-chan struct{}, log *zap.Logger) {
	if len(cfg.AutoRepair) == 0 {
		return
	}
	grace := cfg.Grace
	if grace <= 0 {
		grace = tracker.DefaultGrace
	}
	retry := cfg.AutoRepairRetry
	if retry <= 0 {
		retry = defaultAutoRepairRetry
	}
	ar := &autoRepair{policies: map[string]bool{}, grace: grace, retry: retry, store: st, tracker: tr, server: d, log: log.Named("auto-repair"), tried: map[string]time.Time{}}
	for _, p := range cfg.AutoRepair {
		ar.policies[p] = true
	}
	log.Info("auto-repair enabled", zap.Strings("policies", cfg.AutoRepair))
	wg.Add(1)
	go func() { defer wg.Done(); ar.run(ctx, passes) }()
}

func (a *autoRepair) run(ctx context.Context, passes <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-passes:
		}
		a.once(ctx)
	}
}

func (a *autoRepair) once(ctx context.Context) {
	// The store's own records, read only (act reads its record again,
	// a copy, under the action lock): a copy of every record after every
	// pass was 4 MB of garbage each 5 s at 10,000 sessions.
	recs, err := a.store.ListShared()
	if err != nil {
		return
	}
	now := time.Now()
	a.forget(recs, now)
	for _, rec := range recs {
		if rec.Status != session.StatusInterrupted || rec.StoppedAt == nil || now.Sub(*rec.StoppedAt) < a.grace {
			continue
		}
		if t, ok := a.tried[rec.ID]; ok && now.Sub(t) < a.retry {
			continue
		}
		a.tried[rec.ID] = now
		a.act(ctx, rec)
	}
}

// act applies the policies to rec under its action lock, as the API's
// actions run: the record is read again once the lock is held, and what
// a user's action left behind is what the policy looks at.
func (a *autoRepair) act(ctx context.Context, rec *session.Record) {
	repair := func(rec *session.Record) bool {
		return (rec.Agent == "claude" && a.policies[policyClaudeRegistry]) || (rec.Agent == "opencode" && a.policies[policyOpenCodeOffline])
	}
	reap := func(rec *session.Record) bool {
		return a.policies[policyReap] && rec.Problem(session.ProblemOrphanProcesses) != nil
	}
	if !repair(rec) && !reap(rec) {
		return
	}
	unlock, err := a.server.acting.lock(ctx, rec.ID)
	if err != nil {
		return
	}
	defer unlock()
	if rec, err = a.store.Get(rec.ID); err != nil || rec.Status != session.StatusInterrupted {
		return
	}
	if repair(rec) {
		a.repair(ctx, rec)
	}
	if reap(rec) {
		a.reap(ctx, rec)
	}
}

// forget drops what tried remembers of sessions that need no retry: gone,
// no longer interrupted (repaired, resumed, stopped), or last tried a
// retry interval ago (an entry that old holds nothing back). So tried
// stays bounded by the sessions interrupted now, however long the daemon
// runs.
func (a *autoRepair) forget(recs []*session.Record, now time.Time) {
	waiting := make(map[string]bool, len(a.tried))
	for _, rec := range recs {
		if _, ok := a.tried[rec.ID]; ok && rec.Status == session.StatusInterrupted {
			waiting[rec.ID] = true
		}
	}
	for id, t := range a.tried {
		if !waiting[id] || now.Sub(t) >= a.retry {
			delete(a.tried, id)
		}
	}
}

func (a *autoRepair) repair(ctx context.Context, rec *session.Record) {
	rp, ok := a.server.repairers[rec.Agent]
	if !ok {
		return
	}
	t := repairTarget(rec)
	t.OfflineOnly = true
	plan, err := rp.PlanRepair(ctx, t)
	if err != nil {
		a.log.Debug("auto-repair plan failed; retried later", zap.String("session", rec.ID), zap.Duration("retry", a.retry), zap.Error(err))
		return
	}
	if !anyPlanned(plan) {
		for _, st := range plan {
			if st.Outcome == session.OutcomePending {
				a.log.Debug("auto-repair pending; retried later", zap.String("session", rec.ID), zap.String("target", st.Target),
					zap.String("detail", st.Detail), zap.Duration("retry", a.retry))
			}
		}
		return
	}
	steps, err := rp.ApplyRepair(ctx, t)
	if err != nil {
		a.log.Warn("auto-repair failed", zap.String("session", rec.ID), zap.Error(err))
		return
	}
	sum := "auto-" + summarize("repair", true, steps)
	a.log.Info("auto-repair applied", zap.String("session", rec.ID), zap.String("summary", sum))
	a.tracker.AppendAction(rec, sum)
	a.tracker.Kick()
}

func (a *autoRepair) reap(ctx context.Context, rec *session.Record) {
	obs, err := a.tracker.Observe(ctx, rec.Agent, rec.UpstreamID)
	if err != nil || obs == nil {
		return
	}
	var targets []actions.Target
	for _, p := range obs.Problems {
		if p.Kind == session.ProblemOrphanProcesses && p.Process != nil {
			targets = append(targets, actions.Target{ID: *p.Process, What: p.Detail})
		}
	}
	if len(targets) == 0 || a.server.liveOwner(rec) != 0 {
		return
	}
	steps := a.server.terminator.Terminate(ctx, targets, 10*time.Second, false)
	sum := "auto-" + summarize("reap", true, steps)
	a.log.Info("auto-reap applied", zap.String("session", rec.ID), zap.String("summary", sum))
	a.tracker.AppendAction(rec, sum)
	a.tracker.Kick()
}

func anyPlanned(steps []session.Step) bool {
	for _, s := range steps {
		if s.Outcome == session.OutcomePlanned {
			return true
		}
	}
	return false
}
