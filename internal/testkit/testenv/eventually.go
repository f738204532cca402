package testenv

import (
	"testing"
	"time"
)

// poll is how long Eventually sleeps between looks: short next to the
// bounds tests wait with (seconds), long enough not to load a daemon that
// answers each look with a request.
const poll = 20 * time.Millisecond

// Eventually polls cond until it holds, and fails t if it does not hold
// within the bound. what names the condition awaited ("the child dead",
// "session 3 stopped"), so the failure says what was waited for and how
// long. cond runs at least once, and on the test's goroutine.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Poll(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}

// Poll polls cond until it holds or the bound passes, and reports whether
// it held: for the few waits whose caller does something else than fail
// at once when it does not (skip the test, report an error and go on).
// cond runs at least once.
func Poll(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(poll)
	}
	return true
}

// EventuallyOK is Eventually for conditions whose failure needs what was
// last seen: cond reports whether it holds and, if not, what it saw
// instead, which the failure message quotes.
func EventuallyOK(t testing.TB, within time.Duration, what string, cond func() (ok bool, seen string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, seen := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last seen: %s", what, within, seen)
		}
		time.Sleep(poll)
	}
}
