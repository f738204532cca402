// Package daemon runs sessiond: it takes the store, listens on the local
// socket, reconciles every session once, reports ready, then serves the
// /v1 API while the tracker keeps statuses true.
//
// The order matters. The store lock comes first, so a second sessiond fails
// before it touches anything. The startup reconciliation comes before
// readiness, so no client ever sees a status sessiond has not checked
// (DESIGN.md invariant 6).
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

// StorePath is the store's file inside a state directory.
func StorePath(stateDir string) string { return filepath.Join(stateDir, "sessiond.db") }

// Run runs the daemon until ctx is done. A cancelled ctx is a normal stop
// and returns nil: cancellation is not an error.
func Run(ctx context.Context, cfg Config) error {
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
	started := time.Now()

	// 1. The store lock: a second sessiond stops here, having touched nothing.
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("create state directory %s: %w", cfg.StateDir, err)
	}
	storePath := StorePath(cfg.StateDir)
	st, err := state.Open(storePath, state.Options{Logger: log.Named("state")})
	if errors.Is(err, state.ErrLocked) {
		return &AlreadyRunningError{What: "store " + storePath, Detail: "its lock is held"}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("close store", zap.String("path", storePath), zap.Error(err))
		}
	}()

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
	tcfg := tracker.Config{
		Store: st, Adapters: cfg.Adapters, Host: host,
		Interval: cfg.Interval, Grace: cfg.Grace, StallAfter: cfg.StallAfter,
		Logger: log.Named("tracker"),
	}
	var exits *proc.ExitWatcher
	if !cfg.NoExitEvents {
		exits, err = proc.NewExitWatcher(host, cfg.ProbeBackstop, log.Named("exits"))
		if err != nil {
			log.Warn("exit events unavailable; deaths are noticed by the periodic probe", zap.Error(err))
		} else {
			defer exits.Close()
			tcfg.Exits = exits
		}
	}
	tr := tracker.New(tcfg)

	// 4. Reconcile every session once before anyone can ask.
	rep, err := tr.Reconcile(ctx, "startup")
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("startup reconciliation: %w", err)
	}
	log.Info("startup reconciliation done", zap.Int("sessions", rep.Sessions), zap.Int("created", rep.Created),
		zap.Int("changed", rep.Changed), zap.Duration("took", rep.Duration))

	launchers := map[string]adapters.Launcher{}
	repairers := map[string]adapters.Repairer{}
	aborters := map[string]adapters.Aborter{}
	for _, a := range cfg.Adapters {
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
	d := newServer(serverConfig{
		store: st, tracker: tr, log: log.Named("api"), version: cfg.Version,
		started: started, socket: cfg.Socket, uid: os.Getuid(),
		launcher: lc, launchers: launchers, repairers: repairers, aborters: aborters,
		terminator: &actions.Terminator{Probe: host},
	})
	d.metrics.observePass(rep)
	// The pass hook is set before the API serves: an applied action runs a
	// pass from its handler, which would otherwise race with this
	// assignment (the tracker reads OnPass without a lock).
	n := newNotifier()
	passes := make(chan struct{}, 1)
	tr.OnPass = func(p tracker.PassReport) {
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
	srv := &http.Server{
		Handler:           d.handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ConnContext:       connContext,
		ErrorLog:          zap.NewStdLog(log.Named("http")),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()

	// 5. Ready.
	if err := n.send("READY=1\nSTATUS=serving on " + cfg.Socket); err != nil {
		log.Warn("sd_notify READY failed", zap.Error(err))
	}
	log.Info("sessiond ready", zap.String("socket", cfg.Socket), zap.String("store", storePath),
		zap.String("version", cfg.Version), zap.Int("adapters", len(cfg.Adapters)))
	if cfg.Ready != nil {
		close(cfg.Ready)
	}

	var wg sync.WaitGroup
	runCtx, stopRun := context.WithCancel(ctx)
	if len(cfg.AutoRepair) > 0 {
		grace := cfg.Grace
		if grace <= 0 {
			grace = tracker.DefaultGrace
		}
		retry := cfg.AutoRepairRetry
		if retry <= 0 {
			retry = DefaultAutoRepairRetry
		}
		ar := &autoRepair{policies: map[string]bool{}, grace: grace, retry: retry, store: st, tracker: tr, server: d, log: log.Named("auto-repair"), tried: map[string]time.Time{}}
		for _, p := range cfg.AutoRepair {
			ar.policies[p] = true
		}
		log.Info("auto-repair enabled", zap.Strings("policies", cfg.AutoRepair))
		wg.Add(1)
		go func() { defer wg.Done(); ar.run(runCtx, passes) }()
	}
	wg.Add(3)
	go func() { defer wg.Done(); tr.Run(runCtx) }()
	go func() { defer wg.Done(); capLogs(runCtx, st, lc, log) }()
	go func() { defer wg.Done(); watchAdapters(runCtx, cfg.Adapters, tr, cfg.Hints, log.Named("watch")) }()

	var result error
	select {
	case <-ctx.Done():
		log.Info("stopping: finishing in-flight requests")
	case err := <-serveErr:
		result = fmt.Errorf("serve %s: %w", cfg.Socket, err)
	}
	_ = n.send("STOPPING=1")
	d.stop() // ends event streams, which would otherwise hold Shutdown
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("shutdown: requests still open were cut", zap.Error(err))
		srv.Close()
	}
	cancel()
	stopRun()
	wg.Wait()
	log.Info("sessiond stopped", zap.Duration("uptime", time.Since(started)))
	return result
}

type ctxKey int

const peerKey ctxKey = 0

// peer is the caller's identity, resolved once per connection.
type peer struct {
	uid int
	err error
}

func connContext(ctx context.Context, c net.Conn) context.Context {
	p := peer{uid: -1}
	if uc, ok := c.(*net.UnixConn); ok {
		p.uid, p.err = peerUID(uc)
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
