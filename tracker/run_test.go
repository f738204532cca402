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

	"github.com/sessiond/sessiond/internal/testkit/testenv"
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

	// Hints at every look (every 20 ms), faster than the debounce, until a
	// pass runs (or, with the old reset-on-every-hint, forever: give up at
	// 5 s).
	testenv.Eventually(t, 5*time.Second, "two hint passes under hints faster than the 50 ms debounce", func() bool {
		tr.Hint()
		mu.Lock()
		defer mu.Unlock()
		return hintPasses >= 2
	})
}
