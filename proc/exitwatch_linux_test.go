package proc

import (
	"errors"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
)

// verifyNoLeaks checks, after every other cleanup (the watcher's Close
// included), that the test left no goroutine behind.
func verifyNoLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// fakeProber answers from a table; identities it does not know are Alive.
type fakeProber struct {
	mu    sync.Mutex
	dead  map[Identity]bool
	calls int
}

func (f *fakeProber) Probe(id Identity) Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.dead[id] {
		return Result{Dead, "fake: dead"}
	}
	return Result{Alive, "fake: alive"}
}

func (f *fakeProber) kill(id Identity) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dead == nil {
		f.dead = map[Identity]bool{}
	}
	f.dead[id] = true
}

func newWatcher(t *testing.T, p Prober, backstop time.Duration) *ExitWatcher {
	t.Helper()
	w, err := NewExitWatcher(p, backstop, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("NewExitWatcher: %v", err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func wantExit(t *testing.T, w *ExitWatcher, id Identity, reason string, within time.Duration) {
	t.Helper()
	select {
	case ex := <-w.Exits():
		if ex.Identity != id || ex.Reason != reason || ex.At.IsZero() {
			t.Fatalf("Exit = %+v, want %v by %q", ex, id, reason)
		}
	case <-time.After(within):
		t.Fatalf("no Exit for %v within %v", id, within)
	}
}

func wantNoExit(t *testing.T, w *ExitWatcher, within time.Duration) {
	t.Helper()
	select {
	case ex := <-w.Exits():
		t.Fatalf("unexpected Exit %+v", ex)
	case <-time.After(within):
	}
}

// deadPID returns the pid of a child that has exited and been reaped, so
// pidfd_open on it fails with ESRCH.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := startSleep(t, "true")
	pid := cmd.Process.Pid
	cmd.Wait()
	return pid
}

func TestExitWatcherPidfd(t *testing.T) {
	verifyNoLeaks(t)
	h := NewHost()
	w := newWatcher(t, h, 0)
	cmd := startSleep(t)
	id := identify(t, h, cmd.Process.Pid)
	if err := w.Watch(id); err != nil {
		t.Fatal(err)
	}
	if err := w.Watch(id); err != nil { // idempotent
		t.Fatal(err)
	}
	wantNoExit(t, w, 50*time.Millisecond)
	start := time.Now()
	cmd.Process.Kill() // SIGKILL; not reaped yet: pidfd fires on the zombie
	wantExit(t, w, id, "pidfd", time.Second)
	t.Logf("exit noticed %v after SIGKILL", time.Since(start))
	cmd.Wait()
	wantNoExit(t, w, 50*time.Millisecond) // delivered once
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestExitWatcherAlreadyDead(t *testing.T) {
	verifyNoLeaks(t)
	h := NewHost()
	w := newWatcher(t, h, 0)

	reaped := startSleep(t)
	reapedID := identify(t, h, reaped.Process.Pid)
	reaped.Process.Kill()
	reaped.Wait()

	zombie := startSleep(t, "sleep", "0")
	zombieID := identify(t, h, zombie.Process.Pid)
	waitState(t, h, zombieID.PID, 'Z')

	reused := identify(t, h, startSleep(t).Process.Pid)
	reused.StartTicks-- // the pid now names another process

	for _, id := range []Identity{reapedID, zombieID, reused} {
		if err := w.Watch(id); err != nil {
			t.Fatal(err)
		}
		wantExit(t, w, id, "probe", time.Second)
	}
	w.Close()
}

func TestExitWatcherBackstop(t *testing.T) {
	verifyNoLeaks(t)
	fp := &fakeProber{}
	w := newWatcher(t, fp, 5*time.Millisecond)
	id := Identity{BootID: "b", PID: deadPID(t), StartTicks: 42} // no pidfd possible
	if err := w.Watch(id); err != nil {
		t.Fatal(err)
	}
	wantNoExit(t, w, 50*time.Millisecond)
	fp.kill(id)
	wantExit(t, w, id, "probe", time.Second)
	wantNoExit(t, w, 50*time.Millisecond) // once, though every sweep sees it dead
	w.Close()
}

func TestExitWatcherUnwatch(t *testing.T) {
	verifyNoLeaks(t)
	h := NewHost()
	w := newWatcher(t, h, 5*time.Millisecond)
	cmd := startSleep(t)
	id := identify(t, h, cmd.Process.Pid)
	if err := w.Watch(id); err != nil {
		t.Fatal(err)
	}
	w.Unwatch(id)
	w.Unwatch(id)
	cmd.Process.Kill()
	cmd.Wait()
	wantNoExit(t, w, 100*time.Millisecond)
	w.Close()
}

// TestExitWatcherSlowConsumer: far more exits than the channel holds are
// queued, none dropped, none duplicated.
func TestExitWatcherSlowConsumer(t *testing.T) {
	verifyNoLeaks(t)
	fp := &fakeProber{}
	w := newWatcher(t, fp, time.Millisecond)
	pid := deadPID(t)
	const n = 5 * exitBuffer
	want := map[Identity]bool{}
	for i := range n {
		id := Identity{BootID: "b", PID: pid, StartTicks: uint64(i)}
		want[id] = true
		fp.kill(id)
		if err := w.Watch(id); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond) // let the backstop sweep a few times
	for len(want) > 0 {
		select {
		case ex := <-w.Exits():
			if !want[ex.Identity] {
				t.Fatalf("unexpected or duplicate Exit %+v", ex)
			}
			delete(want, ex.Identity)
		case <-time.After(time.Second):
			t.Fatalf("%d exits never delivered", len(want))
		}
	}
	wantNoExit(t, w, 20*time.Millisecond)
	w.Close()
}

func TestExitWatcherClose(t *testing.T) {
	verifyNoLeaks(t)
	h := NewHost()
	w, err := NewExitWatcher(h, time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ids []Identity
	for range 3 {
		cmd := startSleep(t)
		id := identify(t, h, cmd.Process.Pid)
		ids = append(ids, id)
		if err := w.Watch(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, ok := <-w.Exits(); ok {
		t.Fatal("Exits not closed after Close")
	}
	if err := w.Watch(ids[0]); !errors.Is(err, errWatcherClosed) {
		t.Fatalf("Watch after Close: %v, want errWatcherClosed", err)
	}
	w.Unwatch(ids[1]) // harmless
}

func TestNewExitWatcherErrors(t *testing.T) {
	if _, err := NewExitWatcher(nil, 0, nil); err == nil {
		t.Fatal("nil prober accepted")
	}
	if _, err := NewExitWatcher(&fakeProber{}, -time.Second, nil); err == nil {
		t.Fatal("negative backstop accepted")
	}
	w := newWatcher(t, &fakeProber{}, 0)
	if err := w.Watch(Identity{}); err == nil {
		t.Fatal("zero identity accepted")
	}
}
