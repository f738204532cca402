package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// pendingRepairer is an agent whose repair is pending (a live process holds
// its data) for the first plans, then possible: as an OpenCode database is
// held by a TUI until the user quits it.
type pendingRepairer struct {
	mu      sync.Mutex
	pending int // plans answered pending before the repair becomes possible
	plans   int
	applies int
	offline bool
}

func (p *pendingRepairer) Name() string { return "opencode" }
func (p *pendingRepairer) Discover(context.Context, *proc.Snapshot) (adapters.Observation, error) {
	return adapters.Observation{}, nil
}
func (p *pendingRepairer) WatchPaths() []string { return nil }

func (p *pendingRepairer) PlanRepair(_ context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans++
	p.offline = t.OfflineOnly
	if p.applies > 0 {
		return []session.Step{{Action: "nothing in flight", Target: "ses_1", Outcome: session.OutcomeSkipped}}, nil
	}
	if p.plans <= p.pending {
		return []session.Step{{Action: "repair database offline", Target: "opencode.db", Outcome: session.OutcomePending, Detail: "pending: held by pid 4242"}}, nil
	}
	return []session.Step{{Action: "mark tool part interrupted", Target: "prt_1", Outcome: session.OutcomePlanned}}, nil
}

func (p *pendingRepairer) ApplyRepair(_ context.Context, t adapters.RepairTarget) ([]session.Step, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.applies++
	return []session.Step{{Action: "mark tool part interrupted", Target: "prt_1", Outcome: session.OutcomeDone}}, nil
}

func (p *pendingRepairer) counts() (plans, applies int, offline bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.plans, p.applies, p.offline
}

// A repair pending on a process holding the data is tried again, and
// applied (once, offline only, recorded as an event) when it becomes
// possible.
func TestAutoRepairRetriesPending(t *testing.T) {
	dir := shortDir(t)
	stopped := time.Now().Add(-time.Hour)
	seed(t, filepath.Join(dir, "state"), &session.Record{ID: "oc0000000001", Agent: "opencode", UpstreamID: "ses_1",
		Status: session.StatusInterrupted, Cwd: "/w", StoppedAt: &stopped})
	rp := &pendingRepairer{pending: 3}
	r := startConfig(t, Config{
		StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "run", "s.sock"),
		Adapters: []adapters.Adapter{rp}, AutoRepair: []string{policyOpenCodeOffline}, AutoRepairRetry: 50 * time.Millisecond,
		Interval: 20 * time.Millisecond, Grace: 10 * time.Millisecond, Version: "test", Logger: zaptest.NewLogger(t),
	})
	var plans, applies int
	var offline bool
	testenv.EventuallyOK(t, 5*time.Second, "an apply", func() (bool, string) {
		plans, applies, offline = rp.counts()
		return applies > 0, fmt.Sprintf("%d plans", plans)
	})
	if plans < 4 || applies != 1 || !offline {
		t.Fatalf("plans %d, applies %d, offline only %v: want 3 pending plans, then one plan and one apply, offline", plans, applies, offline)
	}
	time.Sleep(200 * time.Millisecond) // further passes: a repaired session is not applied again
	if _, applies, _ := rp.counts(); applies != 1 {
		t.Errorf("%d applies", applies)
	}
	var reasons []string
	evctx, evcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer evcancel()
	err := r.client.Events(evctx, api.EventsOptions{}, func(e api.Event) error {
		reasons = append(reasons, e.Reason)
		return nil
	})
	if got := strings.Join(reasons, "|"); err != nil || !strings.Contains(got, "auto-repair: 1 done") || strings.Count(got, "auto-repair") != 1 {
		t.Errorf("events: %s (%v)", got, err)
	}
}
