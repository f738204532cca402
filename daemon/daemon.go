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
	"sync"
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
	// MemoryTarget, when not zero, is the Go runtime's soft memory limit
	// (bytes) from the end of the startup pass (or a first start's
	// limit) on, for as long as the live heap leaves room under it (see
	// memoryTarget). 0 leaves the runtime alone.
	MemoryTarget int64
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

	// 4. Reconcile every session once before anyone can ask (startup.go:
	// what a start does beside it to be ready sooner).
	lists := new(listCache)
	boot := newStartup(cfg, st, lists, log)
	defer boot.end()
	tr := newTracker(cfg, st, host, exits, boot.afterDiscover, boot.onCreated, log)
	rep, err := boot.reconcile(ctx, tr)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("startup reconciliation: %w", err)
	}

	// 5. Serve the API, its first list encoded, and say so.
	d, err := newReadyAPI(cfg, st, tr, host, lists, started, rep, log)
	if err != nil {
		return err
	}
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
	announceReady(cfg, n, log)

	// 6. Run beside the API until a stop, then wind down.
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
	wg.Add(6)
	go func() { defer wg.Done(); d.lists.forgetWhenIdle(ctx, listCacheIdle, nil) }()
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
