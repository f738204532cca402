package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// The automatic repair remembers when it last tried each session, so it
// retries at most once per interval. A long-running daemon sees many
// sessions interrupted and then resumed, repaired or stopped: what it
// remembers must be bounded by the sessions still waiting for a repair,
// not grow with every session it ever tried.
func TestAutoRepairForgetsSessionsNoLongerInterrupted(t *testing.T) {
	dir := shortDir(t)
	st, err := state.Open(filepath.Join(dir, "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stopped := time.Now().Add(-time.Hour)
	const n = 50
	for i := 0; i < n; i++ {
		rec := &session.Record{ID: fmt.Sprintf("b0d000%06d", i), Agent: "opencode", UpstreamID: fmt.Sprintf("ses_%d", i),
			Status: session.StatusInterrupted, StoppedAt: &stopped, CreatedAt: stopped}
		if err := st.Create(rec, session.Event{Type: session.EventCreated, To: rec.Status}); err != nil {
			t.Fatal(err)
		}
	}
	// No policy applies to these sessions: only the bookkeeping runs.
	ar := &autoRepair{policies: map[string]bool{}, grace: time.Minute, retry: time.Hour, store: st,
		log: zaptest.NewLogger(t), tried: map[string]time.Time{}}
	ar.once(context.Background())
	if len(ar.tried) != n {
		t.Fatalf("tried %d sessions, want %d", len(ar.tried), n)
	}
	// All but one leave interrupted (repaired, resumed, or stopped).
	for i := 1; i < n; i++ {
		_, err := st.Update(fmt.Sprintf("b0d000%06d", i), func(r *session.Record) ([]session.Event, error) {
			r.Status = session.StatusStopped
			return []session.Event{{Type: session.EventStatus, From: session.StatusInterrupted, To: r.Status}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	ar.once(context.Background())
	if len(ar.tried) != 1 {
		t.Fatalf("after %d sessions left interrupted, %d are still remembered, want 1", n-1, len(ar.tried))
	}
	if _, ok := ar.tried["b0d000000000"]; !ok {
		t.Fatal("the session still interrupted was forgotten: it would be retried before its interval")
	}
}
