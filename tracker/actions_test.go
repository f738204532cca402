package tracker

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/session"
)

// An action is one event on its session, its status unchanged; a store
// that cannot take it answers an error that names the action.
func TestAppendAction(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	now := time.Now()
	rec := &session.Record{ID: "act000000001", Agent: "claude", UpstreamID: "up-1", Status: session.StatusInterrupted, CreatedAt: now}
	if err := st.Create(rec, session.Event{Type: session.EventCreated, To: rec.Status, Time: now}); err != nil {
		t.Fatal(err)
	}
	tr := New(Config{Store: st, Logger: zaptest.NewLogger(t)})
	if err := tr.AppendAction(rec, "repair: 1 done"); err != nil {
		t.Fatal(err)
	}
	evs, err := st.Events(0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 {
		t.Fatalf("%d events, want the creation and the action: %+v", len(evs), evs)
	}
	got := evs[1]
	want := session.Event{Seq: got.Seq, Time: got.Time, Type: session.EventAction, SessionID: rec.ID, Agent: "claude",
		From: session.StatusInterrupted, To: session.StatusInterrupted, Reason: "repair: 1 done"}
	if !reflect.DeepEqual(got, want) || got.Time.Before(now) {
		t.Errorf("action event %+v, want %+v", got, want)
	}
	if after, err := st.Get(rec.ID); err != nil || after.Status != session.StatusInterrupted || !after.UpdatedAt.Equal(rec.UpdatedAt) {
		t.Errorf("the record changed: %+v (%v)", after, err)
	}

	st.Close()
	err = tr.AppendAction(rec, "reap: 2 done")
	if err == nil || !strings.Contains(err.Error(), `record action "reap: 2 done" on session act000000001`) {
		t.Errorf("append to a closed store: %v", err)
	}
}
