package daemon

// What a start does, beside reconciling every session before it serves,
// to be ready sooner and to keep a first start's memory down: the runtime
// tuned for a first start's reads, the first list encoded while the
// startup pass still decides and commits, and before the API serves.
// None of it changes what is served: checkLists (listcache_test.go) holds
// every list the cache answers to one made from the store, and the tuning
// only sets the runtime's knobs.

import (
	"context"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// startup runs the startup pass with a first start's runtime tuning, and
// primes the list cache as it goes.
//
// The first list is encoded while the startup pass decides and commits,
// on another core (the commits run on one): the records a restart loaded,
// once the adapters have looked (the pass changes few of them), and a
// first start's new sessions as each transaction of them commits. A first
// start also runs its reads with more Ps than cores, and gets the default
// back once they are over (firstStartProcs).
type startup struct {
	cfg    Config
	st     *state.Store
	log    *zap.Logger
	primer *listPrimer
	// restoreProcs gives the runtime its default GOMAXPROCS back;
	// procsBack calls it once, after discovery or after the pass.
	restoreProcs, procsBack func()
	// restoreGC lifts a first start's memory limit.
	restoreGC func()
	// target is the memory target, set once a first start's limit is
	// lifted (or after a restart's pass) and lifted when Run returns.
	target *memoryTarget
	// afterDiscover is the tracker's AfterDiscover: it runs once, in the
	// startup pass.
	afterDiscover func()
}

func newStartup(cfg Config, st *state.Store, lists *listCache, log *zap.Logger) *startup {
	s := &startup{cfg: cfg, st: st, log: log, primer: &listPrimer{lists: lists},
		restoreProcs: func() {}, restoreGC: func() {}, target: newMemoryTarget(cfg.MemoryTarget, log)}
	s.procsBack = sync.OnceFunc(func() { s.restoreProcs() })
	s.afterDiscover = sync.OnceFunc(func() {
		s.procsBack()
		if recs, err := st.ListShared(); err == nil && len(recs) > 0 {
			s.primer.prime(recs)
		}
	})
	return s
}

// onCreated is the tracker's OnCreated: a transaction's new sessions, to
// be encoded for the first list.
func (s *startup) onCreated(recs []*session.Record) { s.primer.prime(recs) }

// reconcile runs the startup pass, tuned for a first start, and logs it.
func (s *startup) reconcile(ctx context.Context, tr *tracker.Tracker) (tracker.PassReport, error) {
	first := firstStart(s.st)
	s.restoreGC = firstStartMemoryLimit(s.cfg.FirstStartMemoryLimit, first, s.log, s.target.start)
	s.restoreProcs = firstStartProcs(s.cfg.FirstStartProcs, first, s.log)
	rep, err := tr.Reconcile(ctx, "startup")
	s.procsBack() // if the pass ended before its adapters had looked
	s.primer.stop()
	if err != nil {
		return rep, err
	}
	s.log.Info("startup reconciliation done", zap.Int("sessions", rep.Sessions), zap.Int("created", rep.Created),
		zap.Int("changed", rep.Changed), zap.Duration("took", rep.Duration))
	// The pass read every record through the store's mapping; the cache
	// holds them decoded now.
	if err := s.st.ReleaseMapped(); err != nil {
		s.log.Debug("could not release the store's mapped pages", zap.Error(err))
	}
	return rep, nil
}

// end lifts a first start's memory limit if it is still on, and the
// memory target (when Run returns).
func (s *startup) end() {
	s.target.stop()
	s.restoreGC()
}

// newReadyAPI returns the /v1 API over what the startup pass left, its
// reactor started and its first list encoded.
//
// The reactor starts from the state the first pass left, before anything
// else can commit: its first changes are the next ones. It reads that
// state on another core while this one encodes the first list (both only
// read the store's snapshot): at 12,000 sessions each is milliseconds
// before the API can serve. The first list is encoded before the API
// serves: a client's first request is a list, and once serving, the first
// save of what the adapters learned competes with it for the cores (a
// first list at 12,000 sessions took 117 ms beside that save, 20 ms of
// CPU alone).
func newReadyAPI(cfg Config, st *state.Store, tr *tracker.Tracker, host *proc.Host, lists *listCache, started time.Time, rep tracker.PassReport, log *zap.Logger) (*server, error) {
	d := newAPI(cfg, st, tr, host, lists, started, log)
	d.metrics.observePass(rep)
	var rx *reactionFeed
	rxErr := make(chan error, 1)
	go func() {
		var err error
		rx, err = startReactions(cfg, st, log)
		rxErr <- err
	}()
	d.warmLists()
	if err := <-rxErr; err != nil {
		return nil, err
	}
	d.reactions = rx
	return d, nil
}

// listPrimer hands records to the list cache's prime during the startup
// pass, one batch after the other on a goroutine of its own, in the order
// they came (the order a first start's answer is made of), until stop.
type listPrimer struct {
	lists *listCache
	mu    sync.Mutex
	queue [][]*session.Record
	busy  bool // a goroutine drains the queue
	done  bool
	wg    sync.WaitGroup
}

// prime queues recs: it never blocks the pass.
func (p *listPrimer) prime(recs []*session.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return // past the startup pass: a list encodes its few new ones
	}
	p.queue = append(p.queue, recs)
	if !p.busy {
		p.busy = true
		p.wg.Add(1)
		go p.drain()
	}
}

func (p *listPrimer) drain() {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.busy = false
			p.mu.Unlock()
			return
		}
		recs := p.queue[0]
		p.queue = p.queue[1:]
		p.mu.Unlock()
		p.lists.prime(recs)
	}
}

// stop waits for the batches queued and ignores later ones.
func (p *listPrimer) stop() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	p.wg.Wait()
}

// firstStart reports whether the store holds no session yet: a first
// start, which reads every transcript and database row and creates every
// session. A store that cannot say is taken as not empty.
func firstStart(st *state.Store) bool {
	empty, err := st.Empty()
	return err == nil && empty
}

// firstStartProcs sets GOMAXPROCS to procs for a first start's reads (the
// startup pass's discovery), and returns what gives the runtime its
// default back.
//
// A first start reads every transcript, and a cold read blocks its thread
// in pread (or in a fault on a mapped file) while it holds one of the
// runtime's Ps, which only the scheduler's monitor takes back, tens of
// microseconds to milliseconds later. With as many Ps as cores, the
// readers' blocked reads kept the parsing off the cores. Measured on 2
// cores, page cache dropped, 2 alternating runs each: 10,000 Claude
// transcripts + 2,000 OpenCode sessions 2.64-2.65 s with 2 Ps, 1.80-1.88 s
// with 8, 1.58-1.77 s with 16, and less CPU with more Ps; the standard
// home 413-449 ms with 2, 281-331 ms with 8. A restart reads few files and
// is CPU-bound (more Ps than cores made it no faster), so it is left
// alone.
//
// The default comes back when the adapters have looked (the tracker's
// AfterDiscover), not at the end of the pass: what follows, the decisions
// and the commits of every new session, runs on the cores, and with 10 Ps
// the collector's dedicated workers (a quarter of the Ps) took both cores
// from the commits during each cycle. Measured on a warm first start over
// 10,000 Claude + 2,000 OpenCode sessions, 10 alternating runs each, the
// time from the last adapter's answer to the first list encoded: 170-242
// ms (median 210) with 10 Ps to the end, 162-228 ms (median 195) with the
// default back after discovery.
func firstStartProcs(procs int, first bool, log *zap.Logger) (restore func()) {
	if procs <= 0 || !first {
		return func() {}
	}
	old := runtime.GOMAXPROCS(procs)
	log.Debug("first start: more Ps than cores while every session is read", zap.Int("gomaxprocs", procs), zap.Int("default", old))
	return func() { runtime.SetDefaultGOMAXPROCS() }
}

// firstStartWindow is how long a first start keeps its memory limit at
// most: its startup pass, the first save of what the adapters learned
// (right after it), and the first lists clients ask for, which encode
// every session once.
const firstStartWindow = time.Minute

// firstStartMemoryLimit sets the runtime's soft memory limit to limit
// bytes for a first start (the store holds no session: every transcript
// and database row is read and every session created), and returns what
// sets it back. It also sets it back by itself after firstStartWindow, or
// as soon as the live heap reaches 90 % of it.
//
// A limit, not a lower GC target: the collector then runs at Go's usual
// pace while the heap is small (a home of 2,000 sessions never nears it)
// and more often only as the heap nears the limit. Measured on a cold
// first start over 10,000 Claude transcripts and 2,000 OpenCode sessions
// (page cache dropped, 2 cores, 4 alternating runs each): a GC target of
// 35 % gave 2.69–2.80 s and a peak RSS of 100–105 MiB; a 70 MiB limit
// 2.36–2.69 s and 96–98 MiB. A live heap that outgrows the limit only
// makes the collector run back to back (the runtime lets it take about
// half the CPU): 100,000 sessions, 400 MB live, kept an idle daemon at 26 %
// of a core for the rest of the window, so the limit goes as soon as the
// live heap nears it. A restart reads little and is left alone.
//
// then runs once the limit is lifted, at once when there is none.
func firstStartMemoryLimit(limit int64, first bool, log *zap.Logger, then func()) (restore func()) {
	if limit <= 0 || !first {
		then()
		return func() {}
	}
	old := debug.SetMemoryLimit(limit)
	log.Debug("first start: a soft memory limit while every session is read", zap.Int64("memory_limit_bytes", limit))
	var once sync.Once
	var lifted atomic.Bool
	lift := func(why string) {
		once.Do(func() {
			lifted.Store(true)
			debug.SetMemoryLimit(old)
			log.Debug("first start: memory limit lifted", zap.String("why", why))
			then()
		})
	}
	// The live heap is looked at after each collection, not on a timer:
	// a ticker of 100 ms cost an idle daemon 0.4 % of a core on this VM.
	live := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	afterEachGC(func() bool {
		if lifted.Load() {
			return false
		}
		rtmetrics.Read(live)
		if live[0].Value.Kind() == rtmetrics.KindUint64 && live[0].Value.Uint64() >= uint64(limit)/10*9 {
			lift("the live heap nears the limit")
			return false
		}
		return true
	})
	end := time.AfterFunc(firstStartWindow, func() { lift("the first start's window is over") })
	return func() {
		end.Stop()
		lift("done")
	}
}

// gcSentinel is an object made to be collected: its finalizer runs after
// the collection that finds it unreachable. Not tiny (the runtime may
// never run the finalizer of an object in a tiny allocation block).
type gcSentinel struct{ _ [16]byte }

// afterEachGC runs f on the runtime's finalizer goroutine after each
// garbage collection, for as long as f returns true. Nothing runs while
// the collector does not.
func afterEachGC(f func() bool) {
	runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
		if f() {
			afterEachGC(f)
		}
	})
}
