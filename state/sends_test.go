package state

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/session"
)

// A queued send survives a reopen, and of many racing deliveries exactly
// one moves it from queued to delivering.
func TestSendsQueueOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	st := openT(t, path, Options{})
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	for i, id := range []string{"q2", "q1"} {
		if err := st.PutSend(session.Send{ID: id, SessionID: "abc", Prompt: "next " + id, State: session.SendQueued, CreatedAt: t0.Add(time.Duration(-i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PutSend(session.Send{ID: "q1", SessionID: "abc"}); !errors.Is(err, ErrConflict) {
		t.Errorf("put over an existing send: %v, want ErrConflict", err)
	}
	st.Close()
	st = openT(t, path, Options{})
	got, bad, err := st.Sends()
	if err != nil || len(bad) != 0 || len(got) != 2 || got[0].ID != "q1" || got[1].Prompt != "next q2" || got[0].State != session.SendQueued {
		t.Fatalf("after reopen: %+v %v", got, err)
	}
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := st.UpdateSend("q1", func(x *session.Send) error {
				if x.State != session.SendQueued {
					return ErrSendState
				}
				x.State = session.SendDelivering
				return nil
			})
			if err == nil {
				won.Add(1)
			} else if !errors.Is(err, ErrSendState) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d deliveries took the send, want 1", won.Load())
	}
	if _, err := st.UpdateSend("nosuch", func(*session.Send) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("update of a missing send: %v", err)
	}
	if err := st.DeleteSends([]string{"q1", "q2"}); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := st.Sends(); len(got) != 0 {
		t.Errorf("after delete: %+v", got)
	}
}

// A send that does not decode is named and kept, and the others are
// listed and can be taken as before: one bad record used to make every
// Sends fail, which stalled the whole queue.
func TestSendsPassOverOneThatDoesNotDecode(t *testing.T) {
	st := openT(t, filepath.Join(t.TempDir(), "s.db"), Options{})
	t0 := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	for i, id := range []string{"a1", "c3"} {
		if err := st.PutSend(session.Send{ID: id, SessionID: "abc", Prompt: id, State: session.SendQueued, CreatedAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range map[string]string{"b2": `{"id":"b2","session_id":"abc","state":`, "b3": `{"id":"other","session_id":"abc"}`} {
		if err := st.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketV1).Bucket(bucketSends).Put([]byte(k), []byte(v)) }); err != nil {
			t.Fatal(err)
		}
	}
	got, bad, err := st.Sends()
	if err != nil || len(got) != 2 || got[0].ID != "a1" || got[1].ID != "c3" {
		t.Fatalf("Sends = %+v, %v; want a1 and c3", got, err)
	}
	if len(bad) != 2 || bad[0].ID != "b2" || bad[1].ID != "b3" || !strings.Contains(bad[0].Err.Error(), `decode send "b2"`) {
		t.Fatalf("bad sends = %+v, want b2 and b3 named", bad)
	}
	if _, err := st.UpdateSend("c3", func(x *session.Send) error { x.State = session.SendDelivering; return nil }); err != nil {
		t.Fatalf("update a good send beside a bad one: %v", err)
	}
	if err := st.db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketV1).Bucket(bucketSends).Get([]byte("b2")) == nil {
			return errors.New("the bad send was dropped")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
