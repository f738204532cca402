// Package daemon runs sessiond: it takes the store, listens on the local
// socket, reconciles every session once, reports ready, then serves the
// /v1 API while the tracker keeps statuses true.
//
// The order matters. The store lock comes first, so a second sessiond fails
// before it touches anything. The startup reconciliation comes before
// readiness, so no client ever sees a status sessiond has not checked
// (invariant 6 of docs/design.md).
package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/actions"
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/launch"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/reactions"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// Config configures the daemon. cmd/sessiond fills it from flags and the
// environment; tests fill it directly.
type Config struct {
	// StateDir holds the store (sessiond.db).
	StateDir string
	// Socket is the path of the API socket.
	Socket string
	// Adapters observe the agents. Adding an agent is one entry here.
	Adapters []adapters.Adapter
	// Interval, Grace and StallAfter configure the tracker (zero = defaults).
	Interval   time.Duration
	Grace      time.Duration
	StallAfter time.Duration
	// FirstStartMemoryLimit, when not zero, is the Go runtime's soft
	// memory limit (bytes) while a first start (an empty store) reads
	// every session: that pass allocates most of what sessiond ever
	// allocates, and the heap's headroom made its peak RSS (see
	// firstStartMemoryLimit). 0 leaves the runtime alone.
	FirstStartMemoryLimit int64
	// FirstStartProcs, when not zero, is GOMAXPROCS during a first
	// start's startup pass (see firstStartProcs); the runtime's default
	// comes back after it. 0 leaves the runtime alone.
	FirstStartProcs int
	// ProbeBackstop is how often watched owners are re-probed in case an
	// exit event was missed (default 30 s).
	ProbeBackstop time.Duration
	// NoExitEvents disables pidfd/kqueue exit events, leaving the periodic
	// probe (for measuring the polling fallback).
	NoExitEvents bool
	// Version is reported by /v1/health.
	Version string
	Logger  *zap.Logger
	// Host is the process table; nil means the real one.
	Host *proc.Host
	// ShutdownTimeout bounds how long in-flight requests may take to finish
	// after a stop signal (default 5 s).
	ShutdownTimeout time.Duration
	// AutoRepair names the actions the watchdog may apply on its own to
	// sessions interrupted longer than Grace (see ParsePolicies). Empty:
	// nothing is repaired or reaped without being asked.
	AutoRepair []string
	// AutoRepairRetry is how often an interrupted session is tried again
	// by the automatic repair, e.g. after a repair was pending on a
	// process holding the agent's data (default 1 min).
	AutoRepairRetry time.Duration
	// Ready, if set, is closed once the daemon serves (for tests).
	Ready chan<- struct{}
	// Hints, if set, triggers a rescan whenever a value arrives (SIGHUP).
	Hints <-chan struct{}
	// Reactions configures what runs on each change (the hooks directory,
	// desktop notifications); its Socket and Logger are filled in.
	Reactions reactions.Config
}

// AlreadyRunningError means another sessiond holds the store or the socket.
// cmd/sessiond exits with its own code for it, which the systemd unit lists
// in RestartPreventExitStatus so systemd does not restart-loop.
type AlreadyRunningError struct {
	What   string
	Detail string
}

func (e *AlreadyRunningError) Error() string {
	return fmt.Sprintf("another sessiond is already running (%s: %s); stop it first (`systemctl --user stop sessiond`), or give this one its own --state-dir and --socket", e.What, e.Detail)
}

// storeFile is the store's file inside a state directory.
func storeFile(stateDir string) string { return filepath.Join(stateDir, "sessiond.db") }

// Run runs the daemon until ctx is done. A cancelled ctx is a normal stop
// and returns nil: cancellation is not an error.
func Run(ctx context.Context, cfg Config) error {
	cfg, log := withDefaults(cfg)
	started := time.Now()

	// 1. The store lock: a second sessiond stops here, having touched nothing.
	st, err := openStore(cfg.StateDir, log)
	if err != nil {
		return err
	}
	defer closeStore(st, storeFile(cfg.StateDir), log)

	// 2-3. The socket: replace a stale one only if nothing answers on it.
	ln, err := listenSocket(cfg.Socket)
	if err != nil {
		return err
	}
	defer ln.Close()

	host := cfg.Host
	if host == nil {
		host = proc.NewHost()
	}
	exits := newExitWatcher(cfg, host, log)
	if exits != nil {
		defer exits.Close()
	}
	// The first list is encoded while the startup pass decides and
	// commits, on another core (the commits run on one): the records a
	// restart loaded, once the adapters have looked (the pass changes few
	// of them), and a first start's new sessions as each transaction of
	// them commits. A first start also runs its reads with more Ps than
	// cores, and gets the default back once they are over
	// (firstStartProcs).
	lists := new(listCache)
	primer := &listPrimer{lists: lists}
	restoreProcs := func() {}
	procsBack := sync.OnceFunc(func() { restoreProcs() })
	afterDiscover := sync.OnceFunc(func() {
		procsBack()
		if recs, err := st.ListShared(); err == nil && len(recs) > 0 {
			primer.prime(recs)
		}
	})
	tr := newTracker(cfg, st, host, exits, afterDiscover, primer.prime, log)

	// 4. Reconcile every session once before anyone can ask.
	first := firstStart(st)
	restoreGC := firstStartMemoryLimit(cfg.FirstStartMemoryLimit, first, log)
	defer restoreGC()
	restoreProcs = firstStartProcs(cfg.FirstStartProcs, first, log)
	rep, err := tr.Reconcile(ctx, "startup")
	procsBack() // if the pass ended before its adapters had looked
	primer.stop()
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("startup reconciliation: %w", err)
	}
	log.Info("startup reconciliation done", zap.Int("sessions", rep.Sessions), zap.Int("created", rep.Created),
		zap.Int("changed", rep.Changed), zap.Duration("took", rep.Duration))
	// The pass read every record through the store's mapping; the cache
	// holds them decoded now.
	if err := st.ReleaseMapped(); err != nil {
		log.Debug("could not release the store's mapped pages", zap.Error(err))
	}

	d := newAPI(cfg, st, tr, host, lists, started, log)
	d.metrics.observePass(rep)
	// The reactor starts from the state the first pass left, before
	// anything else can commit: its first changes are the next ones. It
	// reads that state on another core while this one encodes the first
	// list (both only read the store's snapshot): at 12,000 sessions each
	// is milliseconds before the API can serve.
	var rx *reactionFeed
	rxErr := make(chan error, 1)
	go func() {
		var err error
		rx, err = startReactions(cfg, st, log)
		rxErr <- err
	}()
	// The first list is encoded before the API serves: a client's first
	// request is a list, and once serving, the first save of what the
	// adapters learned competes with it for the cores (a first list at
	// 12,000 sessions took 117 ms beside that save, 20 ms of CPU alone).
	d.warmLists()
	if err := <-rxErr; err != nil {
		return err
	}
	d.reactions = rx
	defer d.reactions.rx.Close()
	// The pass hook is set before the API serves: an applied action runs a
	// pass from its handler, which would otherwise race with this
	// assignment (the tracker reads OnPass without a lock).
	n := newNotifier()
	passes := make(chan struct{}, 1)
	tr.OnPass = passHook(d, n, passes, log)
	srv := newHTTPServer(d.handler(), log)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	// 5. Ready.
	announceReady(cfg, n, log)

	runCtx, stopRun := context.WithCancel(ctx)
	wg := runBackground(runCtx, cfg, st, tr, d, passes, log)

	result := serveUntilStop(ctx, serveErr, cfg.Socket, log)
	shutdown(srv, d, n, cfg.ShutdownTimeout, log)
	stopRun()
	wg.Wait()
	log.Info("sessiond stopped", zap.Duration("uptime", time.Since(started)))
	return result
}

// withDefaults fills in what cfg leaves zero, and returns the logger to use.
func withDefaults(cfg Config) (Config, *zap.Logger) {
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	if cfg.ProbeBackstop <= 0 {
		cfg.ProbeBackstop = 30 * time.Second
	}
	return cfg, log
}

// openStore creates the state directory and opens the store in it. A store
// whose lock another process holds is an *AlreadyRunningError.
func openStore(stateDir string, log *zap.Logger) (*state.Store, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", stateDir, err)
	}
	storePath := storeFile(stateDir)
	st, err := state.Open(storePath, state.Options{Logger: log.Named("state")})
	if errors.Is(err, state.ErrLocked) {
		return nil, &AlreadyRunningError{What: "store " + storePath, Detail: "its lock is held"}
	}
	if err != nil {
		return nil, err
	}
	return st, nil
}

// closeStore closes the store at path; a failure can only be logged.
func closeStore(st *state.Store, path string, log *zap.Logger) {
	if err := st.Close(); err != nil {
		log.Error("close store", zap.String("path", path), zap.Error(err))
	}
}

// newExitWatcher returns the pidfd/kqueue exit events, or nil when they
// are turned off or unavailable (deaths are then noticed by the periodic
// probe).
func newExitWatcher(cfg Config, host *proc.Host, log *zap.Logger) *proc.ExitWatcher {
	if cfg.NoExitEvents {
		return nil
	}
	exits, err := proc.NewExitWatcher(host, cfg.ProbeBackstop, log.Named("exits"))
	if err != nil {
		log.Warn("exit events unavailable; deaths are noticed by the periodic probe", zap.Error(err))
		return nil
	}
	return exits
}

// newTracker returns the tracker over the store, the adapters and the
// process table; exits may be nil.
func newTracker(cfg Config, st *state.Store, host *proc.Host, exits *proc.ExitWatcher, afterDiscover func(), onCreated func([]*session.Record), log *zap.Logger) *tracker.Tracker {
	tcfg := tracker.Config{
		Store: st, Adapters: cfg.Adapters, Host: host,
		Interval: cfg.Interval, Grace: cfg.Grace, StallAfter: cfg.StallAfter,
		AfterDiscover: afterDiscover, OnCreated: onCreated,
		Logger: log.Named("tracker"),
	}
	if exits != nil { // a nil *ExitWatcher in the interface would not be nil
		tcfg.Exits = exits
	}
	return tracker.New(tcfg)
}

// newAPI returns the /v1 API over the store and the tracker, with the
// adapters that can launch, repair and abort their agent's sessions.
func newAPI(cfg Config, st *state.Store, tr *tracker.Tracker, host *proc.Host, lists *listCache, started time.Time, log *zap.Logger) *server {
	launchers := map[string]adapters.Launcher{}
	repairers := map[string]adapters.Repairer{}
	aborters := map[string]adapters.Aborter{}
	hookReaders := map[string]adapters.HookReader{}
	prompters := map[string]adapters.Prompter{}
	toolVars := map[string]string{}
	for _, a := range cfg.Adapters {
		if m, ok := a.(adapters.ToolMarker); ok {
			toolVars[a.Name()] = m.ToolSessionVar()
		}
		if p, ok := a.(adapters.Prompter); ok {
			prompters[a.Name()] = p
		}
		if h, ok := a.(adapters.HookReader); ok {
			hookReaders[a.Name()] = h
		}
		if l, ok := a.(adapters.Launcher); ok {
			launchers[a.Name()] = l
		}
		if r, ok := a.(adapters.Repairer); ok {
			repairers[a.Name()] = r
		}
		if ab, ok := a.(adapters.Aborter); ok {
			aborters[a.Name()] = ab
		}
	}
	lc := launch.New(launch.Config{LogDir: filepath.Join(cfg.StateDir, "logs"), Host: host, Logger: log.Named("launch")})
	return newServer(serverConfig{
		store: st, tracker: tr, log: log.Named("api"), version: cfg.Version,
		started: started, socket: cfg.Socket, uid: os.Getuid(),
		launcher: lc, launchers: launchers, repairers: repairers, aborters: aborters, prompters: prompters,
		hookReaders: hookReaders, ancestors: host.Ancestors, toolVars: toolVars, markerEnv: host.MarkerEnv,
		terminator: &actions.Terminator{Probe: host}, lists: lists,
	})
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

// passHook is what follows each pass: the metrics, a signal on passes for
// the automatic repair (dropped when one is already waiting), and the
// systemd watchdog ping after the passes that show the daemon alive.
func passHook(d *server, n *notifier, passes chan<- struct{}, log *zap.Logger) func(tracker.PassReport) {
	return func(p tracker.PassReport) {
		d.metrics.observePass(p)
		select {
		case passes <- struct{}{}:
		default:
		}
		if n.watchdog > 0 && (p.Trigger == "tick" || p.Trigger == "hint") {
			if err := n.send("WATCHDOG=1"); err != nil {
				log.Warn("sd_notify WATCHDOG failed", zap.Error(err))
			}
		}
	}
}

// newHTTPServer serves h with timeouts that keep a slow or idle client
// from holding a connection.
func newHTTPServer(h http.Handler, log *zap.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext:       connContext,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
}

// announceReady tells systemd, the log and a waiting test that the daemon
// serves.
func announceReady(cfg Config, n *notifier, log *zap.Logger) {
	if err := n.send("READY=1\nSTATUS=serving on " + cfg.Socket); err != nil {
		log.Warn("sd_notify READY failed", zap.Error(err))
	}
	log.Info("sessiond ready", zap.String("socket", cfg.Socket), zap.String("store", storeFile(cfg.StateDir)),
		zap.String("version", cfg.Version), zap.Int("adapters", len(cfg.Adapters)))
	if cfg.Ready != nil {
		close(cfg.Ready)
	}
}

// runBackground starts what runs beside the API until ctx ends: the
// automatic repair when enabled, the tracker's passes, the log caps and
// the file change hints. The returned group is done when all have ended.
func runBackground(ctx context.Context, cfg Config, st *state.Store, tr *tracker.Tracker, d *server, passes <-chan struct{}, log *zap.Logger) *sync.WaitGroup {
	var wg sync.WaitGroup
	startAutoRepair(ctx, &wg, cfg, st, tr, d, passes, log)
	for _, a := range cfg.Adapters {
		if f, ok := a.(adapters.Follower); ok {
			wg.Add(1)
			go func() { defer wg.Done(); f.Follow(ctx, tr.Hint) }()
		}
	}
	wg.Add(5)
	go func() { defer wg.Done(); d.reactions.follow(ctx) }()
	go func() { defer wg.Done(); d.sendQueue.run(ctx) }()
	go func() { defer wg.Done(); tr.Run(ctx) }()
	go func() { defer wg.Done(); capLogs(ctx, st, d.launcher, log) }()
	go func() { defer wg.Done(); watchAdapters(ctx, cfg.Adapters, tr, cfg.Hints, log.Named("watch")) }()
	return &wg
}

// serveUntilStop waits for ctx to end (a normal stop: nil) or for the
// server to fail (its error).
func serveUntilStop(ctx context.Context, serveErr <-chan error, socket string, log *zap.Logger) error {
	select {
	case <-ctx.Done():
		log.Info("stopping: finishing in-flight requests")
		return nil
	case err := <-serveErr:
		return fmt.Errorf("serve %s: %w", socket, err)
	}
}

// shutdown stops serving: it tells systemd, ends the event streams, and
// gives in-flight requests up to timeout to finish before cutting them.
func shutdown(srv *http.Server, d *server, n *notifier, timeout time.Duration, log *zap.Logger) {
	_ = n.send("STOPPING=1")
	d.stop() // ends event streams, which would otherwise hold Shutdown
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: requests still open were cut", zap.Error(err))
		srv.Close()
	}
	cancel()
}

type ctxKey int

const peerKey ctxKey = 0

// peer is the caller's identity, resolved once per connection.
type peer struct {
	uid int
	// pid is the client process as of connect, 0 if unknown.
	pid int
	err error
}

func connContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{uid: -1}
	if uc, ok := c.(*net.UnixConn); ok {
		p.uid, p.pid, p.err = peerCred(uc)
	} else {
		p.err = fmt.Errorf("not a unix socket connection")
	}
	return context.WithValue(ctx, peerKey, p)
}

// capLogs keeps the logs of running launched sessions under their cap.
func capLogs(ctx context.Context, st *state.Store, lc *launch.Launcher, log *zap.Logger) {
	t := time.NewTicker(30 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		recs, err := st.ListShared() // read only: no copy of every record
		if err != nil {
			continue
		}
		for _, r := range recs {
			if r.LogPath != "" && !r.Status.Terminal() {
				if err := lc.CapLog(r.LogPath); err != nil {
					log.Warn("cap session log", zap.String("path", r.LogPath), zap.Error(err))
				}
			}
		}
	}
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
func firstStartMemoryLimit(limit int64, first bool, log *zap.Logger) (restore func()) {
	if limit <= 0 || !first {
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
