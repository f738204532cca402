package testenv

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// fatalTB records the failure Eventually reports and ends the goroutine
// that reported it, as testing.T's Fatalf does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls wait on its own goroutine, so that a Fatalf ends only that.
func run(wait func(testing.TB)) string {
	f := &fatalTB{}
	done := make(chan struct{})
	go func() { defer close(done); wait(f) }()
	<-done
	return f.msg
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	msg := run(func(tb testing.TB) {
		Eventually(tb, 5*time.Second, "the third look", func() bool { n++; return n == 3 })
	})
	if msg != "" || n != 3 {
		t.Fatalf("failed %q after %d looks, want success at the third", msg, n)
	}
}

func TestEventuallyFailsNamingWhatAndHowLong(t *testing.T) {
	start := time.Now()
	msg := run(func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, "the impossible", func() bool { return false })
	})
	if took := time.Since(start); took < 50*time.Millisecond {
		t.Errorf("gave up after %s, before its bound", took)
	}
	if msg != "the impossible: not within 50ms" {
		t.Errorf("failure %q", msg)
	}
}

func TestEventuallyOKQuotesTheLastSeen(t *testing.T) {
	n := 0
	msg := run(func(tb testing.TB) {
		EventuallyOK(tb, 50*time.Millisecond, "a count of -1", func() (bool, string) { n++; return false, fmt.Sprint("count ", n) })
	})
	if want := fmt.Sprintf("a count of -1: not within 50ms; last seen: count %d", n); msg != want || n < 2 {
		t.Errorf("failure %q after %d looks, want %q", msg, n, want)
	}
	msg = run(func(tb testing.TB) {
		EventuallyOK(tb, time.Second, "at once", func() (bool, string) { return true, "" })
	})
	if msg != "" {
		t.Errorf("failed %q", msg)
	}
}
