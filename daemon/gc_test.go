package daemon

import (
	"context"
	"math"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// The memory limit is set for a first start only, and set back after.
func TestFirstStartMemoryLimitOnlyOnEmptyStore(t *testing.T) {
	const none = math.MaxInt64
	orig := debug.SetMemoryLimit(none)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	current := func() int64 { return debug.SetMemoryLimit(-1) } // -1 reads it
	st, err := state.Open(filepath.Join(t.TempDir(), "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := zaptest.NewLogger(t)

	restore := firstStartMemoryLimit(70<<20, firstStart(st), log, func() {})
	if got := current(); got != 70<<20 {
		t.Fatalf("empty store: memory limit %d during the first start, want %d", got, 70<<20)
	}
	restore()
	if got := current(); got != none {
		t.Fatalf("after the first start: memory limit %d, want none back", got)
	}

	r := &session.Record{Agent: "claude", UpstreamID: "u1", Status: session.StatusStopped, CreatedAt: time.Now()}
	if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
		t.Fatal(err)
	}
	firstStartMemoryLimit(70<<20, firstStart(st), log, func() {})()
	if got := current(); got != none {
		t.Fatalf("a restart (store not empty): memory limit %d, want none", got)
	}
	firstStartMemoryLimit(0, firstStart(st), log, func() {})()
	if got := current(); got != none {
		t.Fatalf("limit 0: memory limit %d, want none", got)
	}
}

// More Ps are set for a first start only, and the runtime's default comes
// back after.
func TestFirstStartProcsOnlyOnEmptyStore(t *testing.T) {
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	t.Cleanup(runtime.SetDefaultGOMAXPROCS)
	st, err := state.Open(filepath.Join(t.TempDir(), "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := zaptest.NewLogger(t)

	restore := firstStartProcs(def+8, firstStart(st), log)
	if got := runtime.GOMAXPROCS(0); got != def+8 {
		t.Fatalf("empty store: GOMAXPROCS %d during the first start, want %d", got, def+8)
	}
	restore()
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("after the first start: GOMAXPROCS %d, want the default %d", got, def)
	}

	r := &session.Record{Agent: "claude", UpstreamID: "u1", Status: session.StatusStopped, CreatedAt: time.Now()}
	if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
		t.Fatal(err)
	}
	restore = firstStartProcs(def+8, firstStart(st), log)
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("a restart (store not empty): GOMAXPROCS %d, want the default %d", got, def)
	}
	restore()
	firstStartProcs(0, firstStart(st), log)()
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Fatalf("procs 0: GOMAXPROCS %d, want the default %d", got, def)
	}
}

// A first start's memory limit goes by itself once the live heap nears it
// (a home too large for it only made the collector run back to back),
// and restore after that changes nothing.
func TestFirstStartMemoryLimitLiftedWhenTheHeapNearsIt(t *testing.T) {
	const none = math.MaxInt64
	orig := debug.SetMemoryLimit(none)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	current := func() int64 { return debug.SetMemoryLimit(-1) }
	log := zaptest.NewLogger(t)

	const limit = 64 << 20
	runtime.GC() // the live heap as it is now, not a test's before
	restore := firstStartMemoryLimit(limit, true, log, func() {})
	defer restore()
	time.Sleep(300 * time.Millisecond)
	if got := current(); got != limit {
		t.Fatalf("a small live heap: memory limit %d, want %d kept", got, limit)
	}
	live := make([][]byte, 0, 80)
	for range 80 { // 80 MiB live, past the limit
		live = append(live, make([]byte, 1<<20))
	}
	runtime.GC()
	deadline := time.Now().Add(5 * time.Second)
	for current() != none {
		if time.Now().After(deadline) {
			t.Fatalf("the live heap is past the limit: memory limit still %d", current())
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.KeepAlive(live)
	live = nil
	runtime.GC()
	restore()
	if got := current(); got != none {
		t.Fatalf("after restore: memory limit %d, want none", got)
	}
}

// procsAdapter notes GOMAXPROCS at each Discover.
type procsAdapter struct {
	mu   sync.Mutex
	seen []int
}

func (a *procsAdapter) Name() string         { return "claude" }
func (a *procsAdapter) WatchPaths() []string { return nil }
func (a *procsAdapter) Discover(context.Context, *proc.Snapshot) (adapters.Observation, error) {
	a.mu.Lock()
	a.seen = append(a.seen, runtime.GOMAXPROCS(0))
	a.mu.Unlock()
	return adapters.Observation{Sessions: []adapters.Observed{{UpstreamID: "11111111-0000-4000-8000-000000000000", Cwd: "/p", LastActivity: time.Now().Add(-time.Hour)}}}, nil
}

// A first start reads with the extra Ps and serves with the default:
// the default is back once its adapters have looked (the tracker's
// AfterDiscover; tracker tests hold when that runs).
func TestFirstStartProcsEndWithTheReads(t *testing.T) {
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	t.Cleanup(runtime.SetDefaultGOMAXPROCS)
	dir := shortDir(t)
	ad := &procsAdapter{}
	startConfig(t, Config{
		StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "run", "s.sock"),
		Interval: time.Hour, Logger: zaptest.NewLogger(t),
		Adapters: []adapters.Adapter{ad}, FirstStartProcs: def + 8,
	})
	if got := runtime.GOMAXPROCS(0); got != def {
		t.Errorf("serving with GOMAXPROCS %d, want the default %d", got, def)
	}
	ad.mu.Lock()
	defer ad.mu.Unlock()
	if len(ad.seen) == 0 || ad.seen[0] != def+8 {
		t.Errorf("GOMAXPROCS at the first start's Discover: %v, want %d first", ad.seen, def+8)
	}
}

// The memory target is set while the live heap leaves room under it,
// lifted once the live heap passes 60 % of it, set again once it is under
// that and the re-arm delay has passed, and lifted for good by stop.
func TestMemoryTargetFollowsTheLiveHeap(t *testing.T) {
	const none = math.MaxInt64
	orig := debug.SetMemoryLimit(none)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	current := func() int64 { return debug.SetMemoryLimit(-1) }
	waitFor := func(want int64, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for current() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: memory limit %d, want %d", what, current(), want)
			}
			runtime.GC()
			time.Sleep(20 * time.Millisecond)
		}
	}
	const target = 64 << 20
	runtime.GC()
	m := newMemoryTarget(target, zaptest.NewLogger(t))
	m.rearm = 500 * time.Millisecond
	m.start()
	waitFor(target, "a small live heap")
	live := make([][]byte, 0, 60)
	for range 60 { // 60 MiB live: past 60 % of the target
		live = append(live, make([]byte, 1<<20))
	}
	waitFor(none, "the live heap past 60 % of the target")
	runtime.KeepAlive(live)
	live = live[:20] // 20 MiB: under 60 %, but within the re-arm delay
	runtime.GC()
	runtime.GC()
	if got := current(); got != none {
		t.Fatalf("20 MiB live right after a lift: memory limit %d, want none until the delay passed", got)
	}
	runtime.KeepAlive(live)
	live = nil
	waitFor(target, "the live heap small again, the delay passed")
	if m.lifted != 1 {
		t.Fatalf("lifted %d times, want 1", m.lifted)
	}
	m.stop()
	if got := current(); got != none {
		t.Fatalf("after stop: memory limit %d, want none", got)
	}
	m.start() // a stopped target stays stopped
	if got := current(); got != none {
		t.Fatalf("start after stop: memory limit %d, want none", got)
	}
}

// A first start's limit hands over to what comes after it when lifted;
// without one, at once.
func TestFirstStartLimitHandsOver(t *testing.T) {
	orig := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	log := zaptest.NewLogger(t)
	n := 0
	firstStartMemoryLimit(0, true, log, func() { n++ })
	if n != 1 {
		t.Fatalf("no limit: then ran %d times, want 1 at once", n)
	}
	restore := firstStartMemoryLimit(64<<20, true, log, func() { n++ })
	if n != 1 {
		t.Fatal("then ran before the limit was lifted")
	}
	restore()
	restore()
	if n != 2 {
		t.Fatalf("after restore: then ran %d times in all, want 2", n)
	}
}

// With the limit off, the target looks again by itself once the delay
// passed: an idle daemon may not collect for a long while.
func TestMemoryTargetLooksAgainWhenIdle(t *testing.T) {
	orig := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	current := func() int64 { return debug.SetMemoryLimit(-1) }
	const target = 64 << 20
	runtime.GC()
	m := newMemoryTarget(target, zaptest.NewLogger(t))
	m.rearm, m.backoff = 200*time.Millisecond, 200*time.Millisecond
	m.start()
	defer m.stop()
	if got := current(); got != target {
		t.Fatalf("a small live heap: memory limit %d, want %d", got, target)
	}
	m.check(60 << 20) // a passing peak
	m.check(10 << 20) // within the delay: still off
	if got := current(); got != math.MaxInt64 {
		t.Fatalf("after a peak: memory limit %d, want none", got)
	}
	deadline := time.Now().Add(3 * time.Second)
	for current() != target {
		if time.Now().After(deadline) {
			t.Fatal("the limit was not set again after the delay, with nothing collecting")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The target is lifted when the collector costs too much under it, and
// kept when it costs little.
func TestMemoryTargetLiftedWhenTheCollectorCostsTooMuch(t *testing.T) {
	orig := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	current := func() int64 { return debug.SetMemoryLimit(-1) }
	const target = 64 << 20
	gc := 0.0
	m := newMemoryTarget(target, zaptest.NewLogger(t))
	m.gcCPU = func() float64 { return gc }
	defer m.stop()
	m.check(10 << 20)
	if current() != target {
		t.Fatal("not set for a small live heap")
	}
	m.since = m.since.Add(-memoryTargetWindow) // a window passed
	gc += 0.001 * memoryTargetWindow.Seconds() // 0.1 % of a core
	m.check(10 << 20)
	if current() != target || m.lifted != 0 {
		t.Fatal("lifted at 0.1 % of a core")
	}
	m.since = m.since.Add(-memoryTargetWindow)
	gc += 0.02 * memoryTargetWindow.Seconds() // 2 %
	m.check(10 << 20)
	if current() != math.MaxInt64 || m.lifted != 1 {
		t.Fatalf("kept at 2 %% of a core: limit %d, lifted %d", current(), m.lifted)
	}
}
