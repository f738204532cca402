package reactions

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// Defaults of Config.
const (
	DefaultTimeout     = 10 * time.Second
	defaultConcurrency = 4
	// queueLen is how many changes wait for one hook before the next is
	// dropped (and counted): a hook that hangs on every change falls
	// behind alone, and memory stays bounded.
	queueLen = 64
)

// Config says what to run.
type Config struct {
	// HooksDir holds the executables run on each change ("" = none).
	// It is listed again at each change: a hook added or removed takes
	// effect without a restart.
	HooksDir string
	// Notifier, when set, gets a desktop notification when a session
	// needs its user (see notification).
	Notifier Notifier
	// NotifyOff says why there is no Notifier when notifications were
	// asked for ("no notify-send or osascript on PATH"); "" = not asked.
	NotifyOff string
	// Timeout bounds one run of a hook (and of a notification): at the
	// limit its process group gets SIGTERM, and SIGKILL after killAfter.
	Timeout time.Duration
	// Concurrency bounds the processes running at once, all hooks
	// together.
	Concurrency int
	// Socket is passed to hooks as SESSIOND_SOCKET, so a hook's
	// sessionctl talks to this sessiond.
	Socket string
	Logger *zap.Logger
}

// Reactor turns committed events into hook runs and notifications.
type Reactor struct {
	cfg    Config
	ctx    context.Context
	cancel context.CancelFunc
	log    *zap.Logger
	sem    chan struct{}
	wg     sync.WaitGroup

	mu sync.Mutex
	// last is each session's state as of the last change handed over, so
	// an event that changed only what hooks are not about (an owner, a
	// problem, a cursor) runs nothing.
	last    map[string]State
	hooks   map[string]*worker // by file name
	skipped map[string]string  // file name -> why it is not run
	dirErr  string
	listed  bool // listHooks has run
	desktop *worker
	closed  bool
}

// New returns a reactor. Close stops it.
func New(cfg Config) *Reactor {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = defaultConcurrency
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Reactor{
		cfg: cfg, ctx: ctx, cancel: cancel, log: cfg.Logger, sem: make(chan struct{}, cfg.Concurrency),
		last: map[string]State{}, hooks: map[string]*worker{}, skipped: map[string]string{},
	}
	if cfg.Notifier != nil {
		n := cfg.Notifier
		r.desktop = r.start("notify ("+n.Name()+")", "", func(ctx context.Context, c *Change) (string, error) {
			msg, _ := notification(c)
			// A notifier that hangs (a desktop bus that does not answer)
			// is bounded like a hook.
			ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
			defer cancel()
			return "", n.Notify(ctx, msg.Summary, msg.Body)
		})
	}
	return r
}

// Seed sets sessions' states before any change is observed, so the first
// change of a session sessiond already knew is compared with what it was
// (the daemon seeds every record at start, all in one call: the map is
// sized once, not grown a dozen times for 12,000 sessions).
func (r *Reactor) Seed(recs ...*session.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.last) == 0 && len(recs) > 8 {
		r.last = make(map[string]State, len(recs))
	}
	for _, rec := range recs {
		r.last[rec.ID] = stateOf(rec)
	}
}

func stateOf(rec *session.Record) State {
	return State{Status: rec.Status, Activity: rec.Activity, WaitingFor: rec.WaitingFor}
}

// Observe hands over one committed event and the record as stored now
// (nil if it is gone). It queues what the change calls for and returns:
// it never waits for a hook.
func (r *Reactor) Observe(ev session.Event, rec *session.Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	c := r.change(ev, rec)
	if c == nil {
		return
	}
	if r.desktop != nil {
		if _, ok := notification(c); ok {
			r.desktop.offer(c, r.log)
		}
	}
	for _, w := range r.listHooks() {
		w.offer(c, r.log)
	}
}

// change is the Change ev makes, or nil when hooks are not about it.
// Called with mu held.
func (r *Reactor) change(ev session.Event, rec *session.Record) *Change {
	now := State{Status: ev.To, Activity: ev.Activity, WaitingFor: ev.WaitingFor}
	prev, known := r.last[ev.SessionID]
	c := &Change{Seq: ev.Seq, Time: ev.Time, SessionID: ev.SessionID, Agent: ev.Agent, State: now, Reason: ev.Reason}
	switch ev.Type {
	case session.EventCreated:
		c.Kind = KindCreated
	case session.EventStatus:
		c.Kind = KindStatus
		if !known {
			prev = State{Status: ev.From}
			known = true
		}
	case session.EventUpdated:
		if known && prev.same(now) {
			return nil
		}
		c.Kind = KindActivity
	default: // actions: their effect comes as its own status event
		return nil
	}
	if known {
		p := prev
		c.Previous = &p
	}
	if rec != nil {
		s := api.FromRecord(rec)
		c.Session = &s
		if c.Agent == "" {
			c.Agent = rec.Agent
		}
	}
	r.last[ev.SessionID] = now
	return c
}

// listHooks reads HooksDir and returns a worker for each executable in
// it, in name order. Called with mu held.
func (r *Reactor) listHooks() []*worker {
	if r.cfg.HooksDir == "" {
		return nil
	}
	r.listed = true
	entries, err := os.ReadDir(r.cfg.HooksDir)
	if err == nil {
		err = dirSafe(r.cfg.HooksDir)
		if err != nil {
			entries = nil
		}
	}
	hadErr := r.dirErr
	r.dirErr = ""
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if hadErr != err.Error() {
			r.log.Warn("no hook runs: the hooks directory is not usable", zap.String("dir", r.cfg.HooksDir), zap.Error(err))
		}
		r.dirErr = err.Error()
	}
	present := map[string]bool{}
	skipped := map[string]string{}
	var out []*worker
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") {
			continue // hidden files and editor backups, as run-parts does
		}
		path := filepath.Join(r.cfg.HooksDir, name)
		if why := notRunnable(path); why != "" {
			if r.skipped[name] != why {
				r.log.Warn("hook not run", zap.String("hook", path), zap.String("why", why))
			}
			skipped[name] = why
			continue
		}
		present[name] = true
		w, ok := r.hooks[name]
		if !ok {
			w = r.start(name, path, r.runHook(path))
			r.hooks[name] = w
		}
		out = append(out, w)
	}
	r.skipped = skipped
	for name, w := range r.hooks {
		if !present[name] {
			// Gone or no longer safe: what was queued for it is dropped,
			// and its worker exits.
			w.removed.Store(true)
			close(w.queue)
			delete(r.hooks, name)
		}
	}
	return out
}

// notRunnable says why the file at path is not run as a hook, or "".
// Like sshd with authorized_keys, sessiond will not run what someone
// else could have written: the file (a symlink's target) must belong to
// sessiond's user or root and be writable by its owner alone. It is
// checked when a change is queued and again just before the run.
func notRunnable(path string) string {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return err.Error()
	}
	fi, err := os.Stat(target)
	switch {
	case err != nil:
		return err.Error()
	case fi.IsDir():
		return "a directory"
	case fi.Mode()&0o111 == 0:
		return "not executable (chmod +x it to run it)"
	}
	if why := ownerOnly(fi); why != "" {
		if target != path {
			return "its target " + target + " is " + why
		}
		return why
	}
	return ""
}

// dirSafe is nil when only sessiond's user (or root) can change what is
// in dir, else why not.
func dirSafe(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if why := ownerOnly(fi); why != "" {
		return fmt.Errorf("%s is %s", dir, why)
	}
	return nil
}

// ownerOnly is "" when fi belongs to sessiond's user or root and only
// its owner may write it, else what is wrong, in words.
func ownerOnly(fi os.FileInfo) string {
	if fi.Mode()&0o022 != 0 {
		return fmt.Sprintf("writable by others (mode %s); sessiond runs only hooks its user alone can change", fi.Mode().Perm())
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Getuid() && uid != 0 {
		return fmt.Sprintf("owned by uid %d, not by sessiond's user", uid)
	}
	return ""
}

// Health is what the reactor did, per hook, for GET /v1/health.
func (r *Reactor) Health() *api.ReactionsHealth {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// Before the first change the directory has not been looked at: look
	// now, so a hook that will not run is named from the start.
	if !r.listed && !r.closed {
		r.listHooks()
	}
	h := &api.ReactionsHealth{HooksDir: r.cfg.HooksDir, HooksDirError: r.dirErr, Notify: "off", Hooks: []api.HookHealth{}}
	switch {
	case r.desktop != nil:
		h.Notify = r.cfg.Notifier.Name()
		h.Hooks = append(h.Hooks, r.desktop.health())
	case r.cfg.NotifyOff != "":
		h.Notify = "unavailable: " + r.cfg.NotifyOff
	}
	names := make([]string, 0, len(r.hooks)+len(r.skipped))
	for name := range r.hooks {
		names = append(names, name)
	}
	for name := range r.skipped {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if w, ok := r.hooks[name]; ok {
			h.Hooks = append(h.Hooks, w.health())
		} else {
			h.Hooks = append(h.Hooks, api.HookHealth{Name: name, Path: filepath.Join(r.cfg.HooksDir, name), Skipped: r.skipped[name]})
		}
	}
	return h
}

// Close stops the reactor: changes still queued are not run, and a hook
// still running is killed (SIGTERM to its group, SIGKILL after
// killAfter). It returns when every run has ended.
func (r *Reactor) Close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// worker runs one hook's changes one at a time, in order.
type worker struct {
	name, path string
	queue      chan *Change
	run        func(context.Context, *Change) (output string, err error)

	// removed: the hook left the directory or is no longer safe; what
	// is still queued for it is dropped.
	removed atomic.Bool

	mu        sync.Mutex
	runs      int64
	failures  int64
	dropped   int64
	lastRun   time.Time
	lastTook  time.Duration
	failing   bool
	lastErr   string
	lastErrAt time.Time
}

func (r *Reactor) start(name, path string, run func(context.Context, *Change) (string, error)) *worker {
	w := &worker{name: name, path: path, queue: make(chan *Change, queueLen), run: run}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.serve(w)
	}()
	return w
}

// offer queues c, or drops it when the worker is queueLen behind.
func (w *worker) offer(c *Change, log *zap.Logger) {
	select {
	case w.queue <- c:
	default:
		w.mu.Lock()
		w.dropped++
		w.mu.Unlock()
		log.Warn("hook is behind; change not given to it", zap.String("hook", w.name),
			zap.String("session", c.SessionID), zap.Uint64("seq", c.Seq))
	}
}

func (r *Reactor) serve(w *worker) {
	for {
		var c *Change
		var ok bool
		select {
		case <-r.ctx.Done():
			return
		case c, ok = <-w.queue:
			if !ok {
				return
			}
		}
		if w.removed.Load() {
			continue
		}
		select {
		case r.sem <- struct{}{}:
		case <-r.ctx.Done():
			return
		}
		started := time.Now()
		out, err := w.run(r.ctx, c)
		<-r.sem
		took := time.Since(started)
		w.record(started, took, err)
		fields := []zap.Field{zap.String("hook", w.name), zap.String("session", c.SessionID), zap.String("change", c.Kind),
			zap.Uint64("seq", c.Seq), zap.Duration("took", took)}
		if out != "" {
			fields = append(fields, zap.String("output", out))
		}
		if err != nil {
			r.log.Warn("hook failed", append(fields, zap.Error(err))...)
		} else {
			r.log.Debug("hook ran", fields...)
		}
	}
}

func (w *worker) record(at time.Time, took time.Duration, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.runs++
	w.lastRun, w.lastTook = at, took
	w.failing = err != nil
	if err != nil {
		w.failures++
		w.lastErr, w.lastErrAt = err.Error(), at
	}
}

func (w *worker) health() api.HookHealth {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := api.HookHealth{Name: w.name, Path: w.path, Runs: w.runs, Failures: w.failures, Dropped: w.dropped,
		Failing: w.failing, LastError: w.lastErr}
	if !w.lastRun.IsZero() {
		t := w.lastRun
		h.LastRun, h.LastTook = &t, w.lastTook.Round(time.Millisecond).String()
	}
	if !w.lastErrAt.IsZero() {
		t := w.lastErrAt
		h.LastErrorAt = &t
	}
	return h
}
