package daemon

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/tracker"
)

// rescanCounter is an incremental adapter that counts rescan requests.
type rescanCounter struct{ n atomic.Int32 }

func (r *rescanCounter) Name() string { return "counter" }
func (r *rescanCounter) Discover(context.Context, *proc.Snapshot) (adapters.Observation, error) {
	return adapters.Observation{}, nil
}
func (r *rescanCounter) WatchPaths() []string { return nil }
func (r *rescanCounter) RequestRescan()       { r.n.Add(1) }

// SIGHUP is the user's way to force a rescan; it must keep working when
// the file watcher is gone (closed, or its reader ended on an error),
// since hints are then all the more needed.
func TestSighupRescansAfterWatcherCloses(t *testing.T) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Skipf("no file watcher here: %v", err)
	}
	w.Close() // its Events and Errors channels are closed now
	ad := &rescanCounter{}
	hup := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		watchLoop(ctx, w, []adapters.Adapter{ad}, tracker.New(tracker.Config{}), hup, zaptest.NewLogger(t))
	}()
	defer func() { cancel(); <-done }()
	for i := 1; i <= 3; i++ {
		select {
		case hup <- struct{}{}:
		case <-done:
			t.Fatalf("the watch loop ended with its watcher; SIGHUP %d has no one to rescan", i)
		case <-time.After(5 * time.Second):
			t.Fatalf("SIGHUP %d not taken within 5s", i)
		}
	}
	// One rescan for the events the ended watcher may have lost, and one
	// per SIGHUP (the last may still be under way).
	testenv.EventuallyOK(t, 5*time.Second, "4 rescans after the watcher ended and 3 SIGHUPs", func() (bool, string) {
		n := ad.n.Load()
		return n >= 4, fmt.Sprintf("%d rescans", n)
	})
}

// Only changes that may show new data are hints: not a change of
// attributes alone, nor a write to a SQLite -shm index (both caused by
// sessiond's own reads of OpenCode's database).
func TestMeansNewData(t *testing.T) {
	for _, c := range []struct {
		ev   fsnotify.Event
		want bool
	}{
		{fsnotify.Event{Name: "/d/opencode.db-wal", Op: fsnotify.Write}, true},
		{fsnotify.Event{Name: "/d/opencode.db", Op: fsnotify.Write}, true},
		{fsnotify.Event{Name: "/d/p/s.jsonl", Op: fsnotify.Write}, true},
		{fsnotify.Event{Name: "/d/p/s.jsonl", Op: fsnotify.Create}, true},
		{fsnotify.Event{Name: "/d/p/s.jsonl", Op: fsnotify.Remove}, true},
		{fsnotify.Event{Name: "/d/p/s.jsonl", Op: fsnotify.Rename}, true},
		{fsnotify.Event{Name: "/d/p/s.jsonl", Op: fsnotify.Write | fsnotify.Chmod}, true},
		{fsnotify.Event{Name: "/d/opencode.db-shm", Op: fsnotify.Write}, false},
		{fsnotify.Event{Name: "/d/opencode.db-shm", Op: fsnotify.Create}, false},
		{fsnotify.Event{Name: "/d/opencode.db-wal", Op: fsnotify.Chmod}, false},
		{fsnotify.Event{Name: "/d/p/s.jsonl", Op: fsnotify.Chmod}, false},
	} {
		if got := meansNewData(c.ev); got != c.want {
			t.Errorf("%v: %v, want %v", c.ev, got, c.want)
		}
	}
}
