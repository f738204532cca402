package tracker

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

// Hints that keep coming faster than the debounce (an agent writing all
// the time) still get passes: the first hint of a burst arms the debounce
// and the rest do not push it back. Found by sessiond-bench's load run,
// where new sessions waited for the tick.
func TestHintsFasterThanDebounceStillPass(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{&fakeAdapter{name: "claude"}}, Host: proc.NewHost(),
		Logger: zaptest.NewLogger(t), Interval: time.Hour, Debounce: 50 * time.Millisecond})
	var mu sync.Mutex
	hintPasses := 0
	tr.OnPass = func(rep PassReport) {
		if rep.Trigger == "hint" {
			mu.Lock()
			hintPasses++
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Hints every 5 ms, ten times faster than the debounce, until a pass
	// runs (or, with the old reset-on-every-hint, forever: give up at 5 s).
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		tr.Hint()
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		n := hintPasses
		mu.Unlock()
		if n >= 2 {
			return
		}
	}
	t.Fatalf("%d hint passes in 5 s of hints every 5 ms with a 50 ms debounce", hintPasses)
}
