package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// fakeAdapter is an adapter made of function fields, for tests.
type fakeAdapter struct {
	name string
	mu   sync.Mutex
	obs  adapters.Observation
	err  error
}

func (f *fakeAdapter) Name() string         { return f.name }
func (f *fakeAdapter) WatchPaths() []string { return nil }
func (f *fakeAdapter) Discover(ctx context.Context, _ *proc.Snapshot) (adapters.Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.obs, f.err
}
func (f *fakeAdapter) set(obs adapters.Observation, err error) {
	f.mu.Lock()
	f.obs, f.err = obs, err
	f.mu.Unlock()
}

// clock is a settable test clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func openStore(t *testing.T, path string) *state.Store {
	t.Helper()
	st, err := state.Open(path, state.Options{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// startProcess starts a real process and returns its identity; the process
// is killed and reaped at cleanup.
func startProcess(t *testing.T, host *proc.Host) (*exec.Cmd, proc.Identity) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	id, err := host.Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatalf("identify pid %d: %v", cmd.Process.Pid, err)
	}
	return cmd, id
}

// deadIdentity returns the identity of a real process that has exited and
// been reaped.
func deadIdentity(t *testing.T, host *proc.Host) proc.Identity {
	t.Helper()
	cmd, id := startProcess(t, host)
	cmd.Process.Kill()
	cmd.Wait()
	return id
}

func get(t *testing.T, st *state.Store, ref string) *session.Record {
	t.Helper()
	r, err := st.Lookup(ref)
	if err != nil {
		t.Fatalf("lookup %s: %v", ref, err)
	}
	return r
}

// Invariant 6: startup reconciliation over a store holding stale records.
// Live owners are re-adopted; dead ones become stopped or interrupted, before
// anything else runs.
func TestStartupRecoveryOverStaleRecords(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	_, live := startProcess(t, host)
	dead := deadIdentity(t, host)
	busyDead := deadIdentity(t, host)
	now := time.Now()
	for _, r := range []*session.Record{
		{Agent: "claude", UpstreamID: "live", Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &live, CreatedAt: now},
		{Agent: "claude", UpstreamID: "dead-idle", Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &dead, CreatedAt: now},
		{Agent: "claude", UpstreamID: "dead-busy", Status: session.StatusRunning, Activity: session.ActivityBusy, Owner: &busyDead, CreatedAt: now},
	} {
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
			t.Fatal(err)
		}
	}
	// The adapter failed to look: recovery must still use the probes.
	ad := &fakeAdapter{name: "claude", err: errors.New("root unreadable")}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	if _, err := tr.Reconcile(context.Background(), "startup"); err != nil {
		t.Fatal(err)
	}
	if r := get(t, st, "live"); r.Status != session.StatusRunning || ownerPID(r) != live.PID {
		t.Errorf("live owner: %s pid %d (%s)", r.Status, ownerPID(r), r.StatusReason)
	}
	if r := get(t, st, "dead-idle"); r.Status != session.StatusStopped {
		t.Errorf("dead idle owner: %s (%s)", r.Status, r.StatusReason)
	}
	if r := get(t, st, "dead-busy"); r.Status != session.StatusInterrupted {
		t.Errorf("dead busy owner: %s (%s)", r.Status, r.StatusReason)
	}
	if r := get(t, st, "live"); r.Problem(session.ProblemAdapterError) == nil {
		t.Errorf("adapter error not reported on %+v", r.Problems)
	}
}

// Invariant 2 over several passes: a session missing from scans, or behind
// an adapter error, keeps its status while its owner lives, and stops only
// when the probe says the owner died.
func TestAbsenceAndAdapterErrorsNeverStop(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	cmd, owner := startProcess(t, host)
	ad := &fakeAdapter{name: "claude"}
	seen := adapters.Observation{Sessions: []adapters.Observed{{
		UpstreamID: "u1", Cwd: "/w", Owners: []adapters.Owner{{Identity: owner, Evidence: "registry"}},
		Activity: session.ActivityBusy, LastActivity: time.Now(),
	}}}
	ad.set(seen, nil)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	ctx := context.Background()
	mustPass := func() {
		t.Helper()
		if _, err := tr.Reconcile(ctx, "test"); err != nil {
			t.Fatal(err)
		}
	}
	mustPass()
	if r := get(t, st, "u1"); r.Status != session.StatusRunning || r.Activity != session.ActivityBusy {
		t.Fatalf("discovered: %s/%s", r.Status, r.Activity)
	}
	ad.set(adapters.Observation{}, nil) // the scan misses it
	mustPass()
	if r := get(t, st, "u1"); r.Status != session.StatusRunning {
		t.Fatalf("absent from scan: %s (%s)", r.Status, r.StatusReason)
	}
	ad.set(adapters.Observation{}, errors.New("EACCES")) // the adapter cannot look
	mustPass()
	r := get(t, st, "u1")
	if r.Status != session.StatusRunning || r.Problem(session.ProblemAdapterError) == nil {
		t.Fatalf("adapter error: %s problems %+v", r.Status, r.Problems)
	}
	ad.set(seen, nil) // back to normal: the adapter error clears
	mustPass()
	if r := get(t, st, "u1"); r.Problem(session.ProblemAdapterError) != nil {
		t.Fatalf("adapter error not cleared: %+v", r.Problems)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ad.set(adapters.Observation{}, nil)
	mustPass()
	if r := get(t, st, "u1"); r.Status != session.StatusInterrupted {
		t.Fatalf("owner killed while busy: %s (%s)", r.Status, r.StatusReason)
	}
}

// Invariants 3 and 4 through the store: a launched session is starting in
// the grace period, running with not_discovered after it, stopped when its
// owner dies, and running again with the new owner when a live process
// claims its upstream id.
func TestGraceAndRevival(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	clk := &clock{now: time.Now()}
	cmd, owner := startProcess(t, host)
	launched := &session.Record{Agent: "claude", UpstreamID: "u2", Status: session.StatusStarting, Owner: &owner, Launched: true, CreatedAt: clk.Now()}
	if err := st.Create(launched, session.Event{Type: session.EventCreated, To: session.StatusStarting}); err != nil {
		t.Fatal(err)
	}
	ad := &fakeAdapter{name: "claude"}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Now: clk.Now, Grace: 30 * time.Second, Logger: zaptest.NewLogger(t)})
	ctx := context.Background()
	pass := func() *session.Record {
		t.Helper()
		if _, err := tr.Reconcile(ctx, "test"); err != nil {
			t.Fatal(err)
		}
		return get(t, st, "u2")
	}
	clk.Add(10 * time.Second)
	if r := pass(); r.Status != session.StatusStarting {
		t.Fatalf("inside grace: %s", r.Status)
	}
	clk.Add(25 * time.Second)
	r := pass()
	if r.Status != session.StatusRunning || r.Problem(session.ProblemNotDiscovered) == nil {
		t.Fatalf("past grace, never discovered: %s %+v", r.Status, r.Problems)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if r := pass(); r.Status != session.StatusStopped {
		t.Fatalf("owner dead: %s (%s)", r.Status, r.StatusReason)
	}
	// Another process resumes the same upstream session.
	_, second := startProcess(t, host)
	ad.set(adapters.Observation{Sessions: []adapters.Observed{{UpstreamID: "u2", Owners: []adapters.Owner{{Identity: second, Evidence: "argv --resume"}}, Activity: session.ActivityIdle}}}, nil)
	r = pass()
	if r.Status != session.StatusRunning || ownerPID(r) != second.PID || r.StoppedAt != nil {
		t.Fatalf("revival: %s pid %d stopped_at %v", r.Status, ownerPID(r), r.StoppedAt)
	}
	if r.ID != launched.ID {
		t.Fatalf("revival changed the id: %s -> %s", launched.ID, r.ID)
	}
	evs, err := st.Events(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var statuses []session.Status
	for _, e := range evs {
		if e.SessionID == r.ID && (e.Type == session.EventCreated || e.Type == session.EventStatus) {
			statuses = append(statuses, e.To)
		}
	}
	want := []session.Status{session.StatusStarting, session.StatusRunning, session.StatusStopped, session.StatusRunning}
	if !equalStatuses(statuses, want) {
		t.Fatalf("event trail %v, want %v", statuses, want)
	}
}

func equalStatuses(a, b []session.Status) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// An owner's death is noticed by its exit event, at once, not at the next
// tick (which is an hour away here).
func TestExitEventReconcilesAtOnce(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	cmd, owner := startProcess(t, host)
	ad := &fakeAdapter{name: "claude"}
	ad.set(adapters.Observation{Sessions: []adapters.Observed{{UpstreamID: "u3", Owners: []adapters.Owner{{Identity: owner, Evidence: "registry"}}, Activity: session.ActivityIdle}}}, nil)
	w, err := proc.NewExitWatcher(host, time.Hour, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Exits: w, Interval: time.Hour, Logger: zaptest.NewLogger(t)})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := tr.Reconcile(ctx, "startup"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	changed := st.Changed()
	killed := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case <-changed:
			changed = st.Changed()
			if r := get(t, st, "u3"); r.Status == session.StatusStopped {
				t.Logf("stopped %s after the kill", time.Since(killed))
				cancel()
				if err := <-done; err != nil {
					t.Fatalf("Run returned %v on cancel", err)
				}
				return
			}
		case <-deadline:
			t.Fatalf("no stop within 5s of the kill; status %s", get(t, st, "u3").Status)
		}
	}
}

// An input error names a path; sessions from that input, or from under it
// (a root covers its project dirs), get adapter_error; others do not.
func TestInputErrorsFlagTheirSessions(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	_, owner := startProcess(t, host)
	ad := &fakeAdapter{name: "claude"}
	mk := func(up, src string) adapters.Observed {
		return adapters.Observed{UpstreamID: up, Source: src, Owners: []adapters.Owner{{Identity: owner, Evidence: "registry"}}}
	}
	ad.set(adapters.Observation{Sessions: []adapters.Observed{
		mk("a", "/r1/projects/-p1"), mk("b", "/r1/projects/-p2"), mk("c", "/r2/projects/-p1"),
	}}, nil)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	ctx := context.Background()
	if _, err := tr.Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	// Next pass: /r1/projects/-p1 cannot be read, and all of /r2.
	ad.set(adapters.Observation{Sessions: []adapters.Observed{mk("b", "/r1/projects/-p2")}, Errors: []adapters.InputError{
		{Input: "/r1/projects/-p1", Err: errors.New("permission denied")},
		{Input: "/r2", Err: errors.New("permission denied")},
	}}, nil)
	if _, err := tr.Reconcile(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	for up, want := range map[string]bool{"a": true, "b": false, "c": true} {
		r := get(t, st, up)
		if got := r.Problem(session.ProblemAdapterError) != nil; got != want {
			t.Errorf("session %s: adapter_error %v, want %v (%+v)", up, got, want, r.Problems)
		}
		if r.Status != session.StatusRunning {
			t.Errorf("session %s: %s", up, r.Status)
		}
	}
	if h := tr.Stats().Adapters[0]; len(h.InputErrors) != 2 {
		t.Errorf("health input errors: %v", h.InputErrors)
	}
}

// A launched record whose agent picks its own id is linked to the session
// its data shows, even after the agent exited (by cwd and time), never
// duplicated; two launches in one directory are not guessed between.
func TestLinkLaunchedAfterExit(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	ad := &fakeAdapter{name: "opencode"}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	dead := deadIdentity(t, host)
	mk := func(cwd string) *session.Record {
		d := dead
		return &session.Record{Agent: "opencode", Owner: &d, Cwd: cwd}
	}
	one := mk("/w/one")
	twoA, twoB := mk("/w/two"), mk("/w/two")
	for _, r := range []*session.Record{one, twoA, twoB} {
		if err := recordLaunch(tr, r); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	ad.set(adapters.Observation{Sessions: []adapters.Observed{
		{UpstreamID: "ses_one", Cwd: "/w/one", LastActivity: now},
		{UpstreamID: "ses_two", Cwd: "/w/two", LastActivity: now},
		{UpstreamID: "ses_old", Cwd: "/w/one", LastActivity: now.Add(-time.Hour)},
	}}, nil)
	if _, err := tr.Reconcile(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Get(one.ID); r.UpstreamID != "ses_one" {
		t.Errorf("launch in /w/one linked to %q", r.UpstreamID)
	}
	for _, r := range []*session.Record{twoA, twoB} {
		if got, _ := st.Get(r.ID); got.UpstreamID != "" {
			t.Errorf("ambiguous launch linked to %q", got.UpstreamID)
		}
	}
	recs, _ := st.List()
	if len(recs) != 5 { // 3 launched + ses_two and ses_old discovered
		t.Errorf("%d records", len(recs))
	}
}

// A launched record is linked to the session whose owner is a child of
// the launched process: an npm-installed CLI's wrapper (the launched
// process) runs the native binary that holds the session, and a pass may
// see its data before the launch learns the id. No duplicate record.
func TestLinkLaunchedToItsChild(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	ad := &fakeAdapter{name: "codex"}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	wrapper := exec.Command("sh", "-c", "sleep 60 & echo $!; wait")
	out, err := wrapper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := wrapper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wrapper.Process.Kill(); wrapper.Wait() })
	var childPID int
	if _, err := fmt.Fscan(out, &childPID); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(childPID, syscall.SIGKILL) })
	parent, err := host.Identify(wrapper.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	child, err := host.Identify(childPID)
	if err != nil {
		t.Fatal(err)
	}
	rec := &session.Record{Agent: "codex", Owner: &parent, Cwd: "/w/p"}
	if err := recordLaunch(tr, rec); err != nil {
		t.Fatal(err)
	}
	// The session's data is older than the launch: only its owner ties it.
	ad.set(adapters.Observation{Sessions: []adapters.Observed{
		{UpstreamID: "thread-1", Cwd: "/w/p", LastActivity: time.Now().Add(-time.Hour), Owners: []adapters.Owner{{Identity: child, Evidence: "writer lock"}}},
	}}, nil)
	if _, err := tr.Reconcile(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Get(rec.ID); r.UpstreamID != "thread-1" {
		t.Errorf("launched record linked to %q, want thread-1", r.UpstreamID)
	}
	if recs, _ := st.List(); len(recs) != 1 {
		t.Errorf("%d records, want the launched one only", len(recs))
	}
}

// TestCreateRedrawsATakenID: a pass draws its new records' ids before it
// writes them (so they go in in order); an id another record has, or
// another draw of the same pass got, is drawn again, and every session
// is recorded.
func TestCreateRedrawsATakenID(t *testing.T) {
	st, err := state.Open(filepath.Join(t.TempDir(), "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Create(&session.Record{ID: "aaaaaaaaaaaa", Agent: "opencode", UpstreamID: "ses_other", Status: session.StatusStopped}, session.Event{}); err != nil {
		t.Fatal(err)
	}
	draws := []string{"aaaaaaaaaaaa", "bbbbbbbbbbbb", "bbbbbbbbbbbb", "cccccccccccc"}
	old := newID
	defer func() { newID = old }()
	newID = func() string {
		if len(draws) == 0 {
			return state.NewID()
		}
		id := draws[0]
		draws = draws[1:]
		return id
	}
	ad := &fakeAdapter{name: "claude"}
	last := time.Now().Add(-time.Hour)
	ad.set(adapters.Observation{Sessions: []adapters.Observed{
		{UpstreamID: "11111111-0000-4000-8000-000000000000", Cwd: "/p", LastActivity: last},
		{UpstreamID: "22222222-0000-4000-8000-000000000000", Cwd: "/p", LastActivity: last},
		{UpstreamID: "33333333-0000-4000-8000-000000000000", Cwd: "/p", LastActivity: last},
	}}, nil)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: &tableHost{}})
	rep, err := tr.Reconcile(context.Background(), "startup")
	if err != nil || rep.Created != 3 {
		t.Fatalf("created %d, err %v; want 3 records", rep.Created, err)
	}
	recs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, r := range recs {
		if prev, dup := ids[r.ID]; dup {
			t.Errorf("id %s given to %s and %s", r.ID, prev, r.UpstreamID)
		}
		ids[r.ID] = r.UpstreamID
	}
	if len(recs) != 4 || ids["aaaaaaaaaaaa"] != "ses_other" {
		t.Errorf("records %v: want the 3 new ones beside the one that had aaaaaaaaaaaa", ids)
	}
}

// A first pass over many new sessions decides them on several cores
// (decideQueued): the records are those a one-core pass makes, with live,
// dead and unknown owners shared between sessions, so the probe memo is
// used at once from several goroutines (run with -race).
func TestFirstPassDecidesInParallelAsInSequence(t *testing.T) {
	const n = 2500
	now := time.Now() // both runs at the same moment
	data, host := decisionData(n, now.Add(-time.Hour), false)
	run := func(min int) map[string]string {
		t.Helper()
		defer func(old int) { parallelDecideMin = old }(parallelDecideMin)
		parallelDecideMin = min
		ad := &fakeAdapter{name: "claude"}
		ad.set(data, nil)
		st, err := state.Open(filepath.Join(t.TempDir(), "sessiond.db"), state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Now: func() time.Time { return now }})
		rep, err := tr.Reconcile(context.Background(), "startup")
		if err != nil || rep.Created != n {
			t.Fatalf("created %d of %d: %v", rep.Created, n, err)
		}
		return storeView(t, st)
	}
	one, many := run(n+1), run(100)
	if len(one) != n || len(many) != n {
		t.Fatalf("%d and %d records", len(one), len(many))
	}
	statuses := map[session.Status]int{}
	for up, want := range one {
		if many[up] != want {
			t.Fatalf("session %s decided on several cores:\n%s\non one:\n%s", up, many[up], want)
		}
		var r session.Record
		json.Unmarshal([]byte(want), &r)
		statuses[r.Status]++
	}
	if statuses[session.StatusRunning] == 0 || len(statuses) < 2 {
		t.Fatalf("statuses %v: the data should give running sessions and others", statuses)
	}
}

// A restart's first pass looks at every record (no settled marks yet),
// on several cores when there are many: it must decide each record as a
// pass on one core does, for changed evidence (newer activity, an owner
// now dead, one now alive, a session gone from the adapter's data) and
// unchanged alike.
func TestRestartDecidesRecordsInParallelAsInSequence(t *testing.T) {
	const n = 2500
	start := time.Now() // both runs at the same moments
	last := start.Add(-time.Hour)
	run := func(min int) (map[string]string, PassReport) {
		t.Helper()
		defer func(old int) { parallelDecideMin = old }(parallelDecideMin)
		st, err := state.Open(filepath.Join(t.TempDir(), "sessiond.db"), state.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		now := start
		clock := func() time.Time { return now }
		before, host := decisionData(n, last, false)
		ad := &fakeAdapter{name: "claude"}
		ad.set(before, nil)
		parallelDecideMin = n + 1
		if rep, err := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Now: clock}).Reconcile(context.Background(), "startup"); err != nil || rep.Created != n {
			t.Fatalf("created %d of %d: %v", rep.Created, n, err)
		}
		// The restart: a new tracker over the same store, an hour on.
		now = now.Add(time.Hour)
		after, host := decisionData(n, last, true)
		ad.set(after, nil)
		parallelDecideMin = min
		rep, err := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Now: clock}).Reconcile(context.Background(), "startup")
		if err != nil {
			t.Fatal(err)
		}
		rep.Duration = 0
		return storeView(t, st), rep
	}
	one, oneRep := run(n + 1)
	many, manyRep := run(100)
	if oneRep != manyRep {
		t.Fatalf("the restart's pass on several cores reports %+v, on one %+v", manyRep, oneRep)
	}
	if oneRep.Changed == 0 || oneRep.Changed == n {
		t.Fatalf("%d of %d records changed: the data should change some and not others", oneRep.Changed, n)
	}
	for up, want := range one {
		if many[up] != want {
			t.Fatalf("session %s decided on several cores:\n%s\non one:\n%s", up, many[up], want)
		}
	}
}

// decisionData is the data of the tests that decide on several cores and
// on one: n sessions, a fifth of them with an owner (some alive, some
// dead, shared between sessions), half in the adapter's list and half in
// its quiet set, last active at last. restarted is the same data as a
// restart finds it: a session in 11 gone, one in 7 active a minute later,
// and some owners' liveness turned over.
func decisionData(n int, last time.Time, restarted bool) (adapters.Observation, *tableHost) {
	host := &tableHost{live: map[proc.Identity]bool{}}
	var obs, quiet []adapters.Observed
	for i := range n {
		if restarted && i%11 == 0 {
			continue // gone from the agent's data while down
		}
		o := adapters.Observed{UpstreamID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i*7919%n), Cwd: fmt.Sprintf("/p/%d", i%40), LastActivity: last}
		if restarted && i%7 == 0 {
			o.LastActivity = last.Add(time.Minute)
		}
		if i%5 == 0 {
			owner := proc.Identity{BootID: "boot-a", PID: 100 + i%17, StartTicks: uint64(i % 17)}
			host.live[owner] = (i%3 != 0) != (restarted && i%17 < 6)
			o.Owners = []adapters.Owner{{Identity: owner, Evidence: "registry"}}
			o.Activity = session.ActivityBusy
		}
		if i%2 == 0 {
			obs = append(obs, o)
		} else {
			quiet = append(quiet, o)
		}
	}
	slices.SortFunc(quiet, func(a, b adapters.Observed) int { return strings.Compare(a.UpstreamID, b.UpstreamID) })
	return adapters.Observation{Sessions: obs, Quiet: adapters.NewQuietSet(quiet)}, host
}

// TestAfterDiscoverRunsBetweenLookingAndDeciding: the hook runs once per
// pass, after every adapter has looked and before anything is written;
// a pass whose adapter cannot look still calls it, and statuses hold.
func TestAfterDiscoverRunsBetweenLookingAndDeciding(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	claude, opencode := &countingAdapter{fakeAdapter: fakeAdapter{name: "claude"}}, &countingAdapter{fakeAdapter: fakeAdapter{name: "opencode"}}
	last := time.Now().Add(-time.Hour)
	claude.set(adapters.Observation{Sessions: []adapters.Observed{{UpstreamID: "11111111-0000-4000-8000-000000000000", Cwd: "/p", LastActivity: last}}}, nil)
	opencode.set(adapters.Observation{Sessions: []adapters.Observed{{UpstreamID: "ses_a", Cwd: "/p", LastActivity: last}}}, nil)
	var calls []string
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{claude, opencode}, Host: &tableHost{}, AfterDiscover: func() {
		recs, err := st.List()
		calls = append(calls, fmt.Sprintf("looked %d+%d, %d records, %v", claude.n.Load(), opencode.n.Load(), len(recs), err))
	}})
	if rep, err := tr.Reconcile(context.Background(), "startup"); err != nil || rep.Created != 2 {
		t.Fatalf("first pass: created %d, %v", rep.Created, err)
	}
	opencode.set(adapters.Observation{}, errors.New("database is locked"))
	if _, err := tr.Reconcile(context.Background(), "tick"); err != nil {
		t.Fatal(err)
	}
	want := []string{"looked 1+1, 0 records, <nil>", "looked 2+2, 2 records, <nil>"}
	if !slices.Equal(calls, want) {
		t.Errorf("AfterDiscover saw %q, want %q", calls, want)
	}
}

// countingAdapter counts its Discover calls.
type countingAdapter struct {
	fakeAdapter
	n atomic.Int64
}

func (c *countingAdapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	c.n.Add(1)
	return c.fakeAdapter.Discover(ctx, snap)
}

// TestOnCreatedGetsEachCommittedBatch: a first pass over more sessions
// than one transaction takes hands each transaction's new records to
// OnCreated once it has committed (the store has them then), and they are
// the very records the store lists.
func TestOnCreatedGetsEachCommittedBatch(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	n := createChunk + 500
	ad := &fakeAdapter{name: "claude"}
	last := time.Now().Add(-time.Hour)
	var obs []adapters.Observed
	for i := range n {
		obs = append(obs, adapters.Observed{UpstreamID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i), Cwd: "/p", LastActivity: last})
	}
	ad.set(adapters.Observation{Sessions: obs}, nil)
	var batches []int
	given := map[*session.Record]bool{}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: &tableHost{}, OnCreated: func(recs []*session.Record) {
		batches = append(batches, len(recs))
		for _, r := range recs {
			if _, err := st.Get(r.ID); err != nil {
				t.Errorf("%s handed over before its commit: %v", r.ID, err)
			}
			given[r] = true
		}
	}})
	if rep, err := tr.Reconcile(context.Background(), "startup"); err != nil || rep.Created != n {
		t.Fatalf("created %d, %v; want %d", rep.Created, err, n)
	}
	if !slices.Equal(batches, []int{createChunk, 500}) {
		t.Errorf("batches handed over: %v, want [%d 500]", batches, createChunk)
	}
	listed, err := st.ListShared()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range listed {
		if !given[r] {
			t.Fatalf("the store lists %s as a record OnCreated was not given", r.ID)
		}
	}
	if len(listed) != len(given) {
		t.Errorf("%d records handed over, the store lists %d", len(given), len(listed))
	}
	// A later pass that creates nothing hands nothing over.
	if _, err := tr.Reconcile(context.Background(), "tick"); err != nil || len(batches) != 2 {
		t.Errorf("second pass: %v, batches %v", err, batches)
	}
}
