package opencode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

// Follow subscribes to the event stream of each server a pass found and
// wakes the tracker for the events that change a decision (a permission
// asked, a status), not for the stream of text deltas or an event too
// long to read; it lets a server go when a pass no longer finds it, and
// returns when its context ends.
func TestFollowWakesOnServerEvents(t *testing.T) {
	f := newFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	snap := opencodetest.Snapshot(f.server(400, time.Hour, false, "/srv", srv.Port()))
	a := f.adapter(nil)
	mustDiscover(t, a, snap)

	wakes := make(chan struct{}, 16)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Follow(ctx, func() { wakes <- struct{}{} })
	}()
	testenv.Eventually(t, 10*time.Second, "the stream is open", func() bool { return srv.Subscribers() == 1 })

	srv.Emit("/w", "message.part.updated", map[string]any{"sessionID": "ses_1", "delta": "session.status is just text here"})
	srv.Emit("/w", "permission.asked", map[string]any{"sessionID": "ses_1", "blob": strings.Repeat("x", maxEventLine)})
	srv.Emit("/w", "permission.asked", map[string]any{"id": "per_1", "sessionID": "ses_1", "permission": "bash", "patterns": []string{"ls"}})
	srv.Emit("/w", "session.status", map[string]any{"sessionID": "ses_1", "status": map[string]any{"type": "idle"}})
	// A delta after them, then one more waking event: the stream is read
	// in order, so once its wake has had time to come, any wake beyond
	// the three is one the delta or the long line made.
	srv.Emit("/w", "message.part.updated", map[string]any{"sessionID": "ses_1", "delta": "more text"})
	srv.Emit("/w", "question.asked", map[string]any{"id": "que_1", "sessionID": "ses_1"})
	for i := 0; i < 3; i++ {
		select {
		case <-wakes:
		case <-time.After(10 * time.Second):
			t.Fatalf("wake %d did not come", i+1)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := len(wakes); n != 0 {
		t.Errorf("%d wakes too many: a text delta or an over-long line woke the tracker", n)
	}

	// A pass that no longer finds the server lets it go.
	mustDiscover(t, a, opencodetest.Snapshot())
	testenv.Eventually(t, 10*time.Second, "the stream is closed", func() bool { return srv.Subscribers() == 0 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Follow did not return after its context ended")
	}
	if log := strings.Join(srv.RequestLog(), "\n"); !strings.Contains(log, "GET /global/event") {
		t.Errorf("requests:\n%s", log)
	}
}

func TestWakingEvent(t *testing.T) {
	for line, want := range map[string]string{
		`data: {"directory":"/w","payload":{"id":"evt_1","type":"question.asked","properties":{}}}`:                   "question.asked",
		`data: {"directory":"/w","payload":{"id":"evt_1","type":"message.part.delta","properties":{"t":"session."}}}`: "",
		`data: {"payload":{"type":"session.idle"}}`:                                                                   "session.idle",
		`: ping`:                             "",
		`data: {"payload":{"type":"session.`: "",
	} {
		if got := wakingEvent([]byte(line)); got != want {
			t.Errorf("wakingEvent(%s) = %q, want %q", line, got, want)
		}
	}
}
