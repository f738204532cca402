package daemon

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One action per session at a time; sessions do not wait on each other; a
// waiter whose request ends gives up; nothing is left behind.
func TestActionLocks(t *testing.T) {
	var l actionLocks
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			unlock, err := l.lock(context.Background(), []string{"a", "b"}[i%2])
			if err != nil {
				t.Error(err)
				return
			}
			if n := inside.Add(1); n > most.Load() {
				most.Store(n)
			}
			time.Sleep(time.Millisecond)
			inside.Add(-1)
			unlock()
		}()
	}
	wg.Wait()
	if m := most.Load(); m > 2 {
		t.Errorf("%d actions ran at once over two sessions", m)
	}

	unlock, err := l.lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := l.lock(context.Background(), "b")
	if err != nil {
		t.Fatalf("session b waited on session a: %v", err)
	}
	other()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.lock(ctx, "a"); err == nil {
		t.Fatal("a second action on session a got the lock while the first held it")
	}
	unlock()
	if n := l.busy(); n != 0 {
		t.Fatalf("%d locks left behind", n)
	}
}
