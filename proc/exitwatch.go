package proc

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Prober answers liveness for one identity. Host satisfies it; the exit
// watcher takes the interface so tests (and a future Kubernetes pod
// prober) can stand in for the kernel.
type Prober interface {
	Probe(Identity) Result
}

var _ Prober = (*Host)(nil)

// errWatcherClosed is returned by Watch after Close.
var errWatcherClosed = errors.New("exit watcher closed")

// exitBuffer is the capacity of the Exits channel. Exits beyond it wait in
// an unbounded internal queue, so a slow consumer never stalls the kernel
// event loop and never loses an exit.
const exitBuffer = 64

// ExitWatcher tells, by event rather than polling, when watched processes
// exit: pidfd on Linux, kqueue EVFILT_PROC/NOTE_EXIT on macOS, plus a slow
// periodic re-probe as a backstop for anything the kernel mechanism cannot
// cover (no pidfd support, a missed event). Each watched identity's exit is
// delivered exactly once, whichever path notices it first.
type ExitWatcher struct {
	p        Prober
	backstop time.Duration
	log      *zap.Logger
	sys      *sysWatcher

	mu      sync.Mutex
	closed  bool
	watched map[Identity]*watch
	// byToken maps a kernel handle (pidfd on Linux, pid on macOS) to the
	// watches it covers; on macOS several identities may share one pid.
	byToken map[int][]*watch
	gen     uint32
	pending []Exit

	notify chan struct{} // wakes the pump when pending grows
	out    chan Exit
	done   chan struct{}
	wg     sync.WaitGroup
}

// watch is one watched identity. token is its kernel handle, -1 when only
// the backstop covers it.
type watch struct {
	id    Identity
	token int
	// gen tells a registration apart from an older one that used the same
	// token (a closed pidfd number is reused by the next open).
	gen uint32
}

// NewExitWatcher starts a watcher. backstop is the period of the re-probe
// of every watched identity (30s is a good value); 0 disables it. log
// receives debug and error messages; nil means no logging.
func NewExitWatcher(p Prober, backstop time.Duration, log *zap.Logger) (*ExitWatcher, error) {
	if p == nil {
		return nil, errors.New("new exit watcher: nil prober")
	}
	if backstop < 0 {
		return nil, fmt.Errorf("new exit watcher: negative backstop %v", backstop)
	}
	if log == nil {
		log = zap.NewNop()
	}
	sys, err := newSysWatcher()
	if err != nil {
		return nil, fmt.Errorf("new exit watcher: %w", err)
	}
	w := &ExitWatcher{
		p:        p,
		backstop: backstop,
		log:      log,
		sys:      sys,
		watched:  map[Identity]*watch{},
		byToken:  map[int][]*watch{},
		notify:   make(chan struct{}, 1),
		out:      make(chan Exit, exitBuffer),
		done:     make(chan struct{}),
	}
	w.wg.Add(2)
	go w.pump()
	go func() {
		defer w.wg.Done()
		if err := w.sys.run(w.fire); err != nil {
			w.log.Error("exit watcher event loop stopped; only the backstop remains", zap.Error(err))
		}
	}()
	if backstop > 0 {
		w.wg.Add(1)
		go w.backstopLoop()
	}
	return w, nil
}

// Exits delivers one Exit per watched identity that died. It is closed by
// Close.
func (w *ExitWatcher) Exits() <-chan Exit { return w.out }

// Watch starts watching id. Watching an identity already watched is a
// no-op. If the process is already dead (or its pid was reused), its Exit
// is delivered promptly. The kernel handle is taken before the identity is
// checked, so a process cannot die or be replaced unnoticed in between.
func (w *ExitWatcher) Watch(id Identity) error {
	if id.PID <= 0 {
		return fmt.Errorf("watch %v: invalid pid", id)
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return fmt.Errorf("watch %v: %w", id, errWatcherClosed)
	}
	if _, ok := w.watched[id]; ok {
		w.mu.Unlock()
		return nil
	}
	w.gen++
	if w.gen == 0 { // 0 means "any registration" to fire
		w.gen = 1
	}
	wt := &watch{id: id, token: -1, gen: w.gen}
	w.watched[id] = wt
	// Arm under the lock: on macOS the event may fire at once, and the
	// event loop must then find the watch.
	tok, err := w.sys.arm(id.PID)
	if err != nil {
		w.log.Debug("no kernel exit notification, relying on the backstop",
			zap.Stringer("identity", id), zap.Error(err))
	} else {
		wt.token = tok
		w.byToken[tok] = append(w.byToken[tok], wt)
	}
	w.mu.Unlock()

	// Probe after arming: if the identity is dead now, the handle may name
	// another process (or none), so deliver from the probe.
	res := w.p.Probe(id)

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[id] != wt {
		// Delivered, unwatched or closed while probing: nothing to do.
		return nil
	}
	if res.Liveness == Dead {
		w.log.Debug("watched process already dead", zap.Stringer("identity", id), zap.String("reason", res.Reason))
		w.deliverLocked(wt, "probe")
		return nil
	}
	if wt.token >= 0 {
		if err := w.sys.enable(wt.token, wt.gen); err != nil {
			w.log.Debug("cannot wait on exit notification, relying on the backstop",
				zap.Stringer("identity", id), zap.Error(err))
			w.dropTokenLocked(wt)
		}
	}
	return nil
}

// Unwatch stops watching id; no Exit will be delivered for it afterwards
// (one already queued still is).
func (w *ExitWatcher) Unwatch(id Identity) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if wt, ok := w.watched[id]; ok {
		delete(w.watched, id)
		w.dropTokenLocked(wt)
	}
}

// Close stops every goroutine and releases every kernel handle. Exits not
// yet received are dropped, and the Exits channel is closed.
func (w *ExitWatcher) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	for id, wt := range w.watched {
		delete(w.watched, id)
		w.dropTokenLocked(wt)
	}
	w.pending = nil
	w.mu.Unlock()

	close(w.done)
	err := w.sys.wake()
	w.wg.Wait()
	if cerr := w.sys.close(); err == nil {
		err = cerr
	}
	close(w.out)
	if err != nil {
		return fmt.Errorf("close exit watcher: %w", err)
	}
	return nil
}

// fire is called by the event loop when the kernel reports token's
// process exited. gen identifies the registration where the platform can
// carry it (0 means "any").
func (w *ExitWatcher) fire(token int, gen uint32, reason string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, wt := range append([]*watch(nil), w.byToken[token]...) {
		if gen != 0 && wt.gen != gen {
			continue // a stale event for an earlier user of this token
		}
		w.deliverLocked(wt, reason)
	}
}

// deliverLocked queues wt's Exit once and forgets wt.
func (w *ExitWatcher) deliverLocked(wt *watch, reason string) {
	if w.closed || w.watched[wt.id] != wt {
		return
	}
	delete(w.watched, wt.id)
	w.dropTokenLocked(wt)
	w.pending = append(w.pending, Exit{Identity: wt.id, At: time.Now(), Reason: reason})
	select {
	case w.notify <- struct{}{}:
	default:
	}
}

// dropTokenLocked releases wt's kernel handle, if any.
func (w *ExitWatcher) dropTokenLocked(wt *watch) {
	if wt.token < 0 {
		return
	}
	tok := wt.token
	wt.token = -1
	list := w.byToken[tok]
	for i, o := range list {
		if o == wt {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(w.byToken, tok)
	} else {
		w.byToken[tok] = list
	}
	if err := w.sys.disarm(tok, len(list) > 0); err != nil {
		w.log.Debug("release exit notification", zap.Stringer("identity", wt.id), zap.Error(err))
	}
}

// pump moves queued exits to the Exits channel, so producers (the event
// loop, the backstop, Watch) never block on a slow consumer.
func (w *ExitWatcher) pump() {
	defer w.wg.Done()
	for {
		w.mu.Lock()
		if len(w.pending) == 0 {
			w.mu.Unlock()
			select {
			case <-w.notify:
				continue
			case <-w.done:
				return
			}
		}
		ex := w.pending[0]
		w.mu.Unlock()
		select {
		case w.out <- ex:
			w.mu.Lock()
			if len(w.pending) > 0 { // Close may have emptied it
				w.pending[0] = Exit{}
				w.pending = w.pending[1:]
			}
			w.mu.Unlock()
		case <-w.done:
			return
		}
	}
}

// backstopLoop re-probes every watched identity each period and delivers
// the dead ones. It covers kernels without pidfd, events lost to bugs, and
// identities whose pid was reused before Watch.
func (w *ExitWatcher) backstopLoop() {
	defer w.wg.Done()
	t := time.NewTicker(w.backstop)
	defer t.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-t.C:
			w.sweep()
		}
	}
}

func (w *ExitWatcher) sweep() {
	w.mu.Lock()
	list := make([]*watch, 0, len(w.watched))
	for _, wt := range w.watched {
		list = append(list, wt)
	}
	w.mu.Unlock()
	for _, wt := range list {
		select {
		case <-w.done:
			return
		default:
		}
		res := w.p.Probe(wt.id)
		if res.Liveness != Dead {
			continue
		}
		w.mu.Lock()
		if w.watched[wt.id] == wt {
			w.log.Debug("backstop found exit", zap.Stringer("identity", wt.id), zap.String("reason", res.Reason))
		}
		w.deliverLocked(wt, "probe")
		w.mu.Unlock()
	}
}
