package state

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/session"
)

// List serves from memory once loaded: a failed transaction leaves no trace
// in it, committed ones show at once, and a reopened store agrees with it.
func TestListCacheFollowsCommits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessiond.db")
	st, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(up string) *session.Record {
		return &session.Record{Agent: "claude", UpstreamID: up, Status: session.StatusRunning, CreatedAt: time.Now()}
	}
	if err := st.Create(mk("a"), session.Event{Type: session.EventCreated}); err != nil {
		t.Fatal(err)
	}
	if recs, _ := st.List(); len(recs) != 1 { // loads the cache
		t.Fatalf("%d records", len(recs))
	}
	boom := errors.New("boom")
	err = st.Batch(func(tx *Tx) error {
		if err := tx.Create(mk("b"), session.Event{Type: session.EventCreated}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if recs, _ := st.List(); len(recs) != 1 {
		t.Fatalf("a rolled-back create is listed: %d records", len(recs))
	}
	// Concurrent writers and readers: every List is a committed state.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				st.Create(mk(string(rune('c'+i))+string(rune('a'+j))), session.Event{Type: session.EventCreated})
				st.List()
			}
		}(i)
	}
	wg.Wait()
	recs, _ := st.List()
	first := recs[0]
	if _, err := st.Update(first.ID, func(r *session.Record) ([]session.Event, error) {
		r.Status = session.StatusStopped
		return []session.Event{{Type: session.EventStatus}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	// Callers may modify what List returns without touching the cache.
	recs, _ = st.List()
	recs[0].Status = "scribbled"
	st.Close()
	st, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	disk, _ := st.List()
	if len(disk) != 41 || disk[0].Status != session.StatusStopped {
		t.Fatalf("reopened: %d records, first %s", len(disk), disk[0].Status)
	}
}

// ListShared hands out the store's own records in List's order: never
// changed afterwards (a commit replaces a record, it does not edit it), and
// a later call shows the commit.
func TestListShared(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	a := mustCreate(t, st, rec("claude", "a"))
	mustCreate(t, st, rec("claude", "b"))
	shared, err := st.ListShared()
	if err != nil {
		t.Fatal(err)
	}
	copies, _ := st.List()
	if len(shared) != 2 || len(copies) != 2 || shared[0].ID != copies[0].ID || shared[1].ID != copies[1].ID {
		t.Fatalf("ListShared %v and List %v disagree", shared, copies)
	}
	if copies[0] == shared[0] {
		t.Fatal("List returned the shared record, not a copy")
	}
	var before *session.Record
	for _, r := range shared {
		if r.ID == a.ID {
			before = r
		}
	}
	if _, err := st.Update(a.ID, func(r *session.Record) ([]session.Event, error) {
		r.Status = session.StatusStopped
		return []session.Event{{Type: session.EventStatus}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if before.Status != session.StatusRunning {
		t.Fatalf("a handed-out record changed under its reader: %s", before.Status)
	}
	again, _ := st.ListShared()
	for _, r := range again {
		if r.ID == a.ID && r.Status != session.StatusStopped {
			t.Fatalf("ListShared after the commit: %s", r.Status)
		}
	}
}

// CreateOwned keeps the caller's record as the cache's own (no copy),
// Create keeps a copy, and a rolled-back CreateOwned leaves no trace; the
// file holds the same either way.
func TestCreateOwnedKeepsTheRecord(t *testing.T) {
	path := dbPath(t)
	st := openT(t, path, Options{})
	if _, err := st.ListShared(); err != nil { // loads the cache
		t.Fatal(err)
	}
	owned, copied, dropped := rec("claude", "owned"), rec("claude", "copied"), rec("claude", "dropped")
	err := st.Batch(func(tx *Tx) error {
		if err := tx.CreateOwned(owned, session.Event{Type: session.EventCreated}); err != nil {
			return err
		}
		return tx.Create(copied, session.Event{Type: session.EventCreated})
	})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = st.Batch(func(tx *Tx) error {
		if err := tx.CreateOwned(dropped, session.Event{Type: session.EventCreated}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	shared, err := st.ListShared()
	if err != nil {
		t.Fatal(err)
	}
	byUp := map[string]*session.Record{}
	for _, r := range shared {
		byUp[r.UpstreamID] = r
	}
	switch {
	case len(shared) != 2 || byUp["dropped"] != nil:
		t.Fatalf("after a rolled-back CreateOwned: %d records %v", len(shared), byUp)
	case byUp["owned"] != owned:
		t.Fatal("CreateOwned's record is not the cache's own")
	case byUp["copied"] == copied || byUp["copied"] == nil:
		t.Fatal("Create's record is the cache's own, not a copy")
	case owned.ID == "" || owned.V != recordVersion || owned.CreatedAt.IsZero() || owned.UpdatedAt.IsZero():
		t.Fatalf("CreateOwned did not fill the record: %+v", owned)
	}
	st.Close()
	disk, err := openT(t, path, Options{}).List()
	if err != nil || len(disk) != 2 {
		t.Fatalf("reopened: %d records, %v", len(disk), err)
	}
	for _, r := range disk {
		if r.UpstreamID != "owned" {
			continue
		}
		got, err1 := r.AppendJSON(nil)
		want, err2 := owned.AppendJSON(nil)
		if err1 != nil || err2 != nil || string(got) != string(want) {
			t.Fatalf("on disk %s, created %s (%v, %v)", got, want, err1, err2)
		}
	}
}

// A transaction whose new sessions all sort after the store's fills the
// sessions' pages (a first start creates in id order); one that creates a
// session among the old ones leaves bbolt's default fill.
func TestCreateFillsPagesWhenAppending(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	create := func(tx *Tx, id string) {
		t.Helper()
		r := rec("claude", "up-"+id)
		r.ID = id
		if err := tx.Create(r, session.Event{Type: session.EventCreated}); err != nil {
			t.Fatal(err)
		}
	}
	err := st.Batch(func(tx *Tx) error {
		for i := range 2000 {
			create(tx, fmt.Sprintf("b%011x", i))
		}
		if tx.sessions.FillPercent != appendFill {
			t.Errorf("appending into an empty store: fill %v", tx.sessions.FillPercent)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, bucket := range [][]byte{bucketSessions, bucketUpstream} {
		var fill float64
		if err := st.db.View(func(btx *bolt.Tx) error {
			s := btx.Bucket(bucketV1).Bucket(bucket).Stats()
			fill = float64(s.LeafInuse) / float64(s.LeafPageN*btx.DB().Info().PageSize)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if fill < 0.8 {
			t.Errorf("%s: leaf pages %.0f %% full after an appending first start", bucket, 100*fill)
		}
	}
	// An upstream key an update moved to in this transaction, past the
	// index's, is held: a creation of it past all keys is still refused.
	err = st.Batch(func(tx *Tx) error {
		create(tx, "f00000000000") // the index's keys are known from here on
		if _, err := tx.Update("b00000000000", func(r *session.Record) ([]session.Event, error) {
			r.UpstreamID = "zz-moved"
			return nil, nil
		}); err != nil {
			return err
		}
		r := rec("claude", "zz-moved")
		r.ID = "f00000000001"
		return tx.Create(r, session.Event{Type: session.EventCreated})
	})
	if !errors.Is(err, ErrConflict) {
		t.Errorf("creating an upstream key an update took in the same transaction: %v, want ErrConflict", err)
	}
	// Ids past the store's are not looked up, but one given twice, or one
	// among the old ones, is still refused.
	for _, ids := range [][]string{{"e00000000000", "e00000000000"}, {"e00000000001", "b00000000005"}} {
		err := st.Batch(func(tx *Tx) error {
			create(tx, ids[0])
			r := rec("claude", "again-"+ids[1])
			r.ID = ids[1]
			return tx.Create(r, session.Event{Type: session.EventCreated})
		})
		if !errors.Is(err, ErrIDInUse) {
			t.Errorf("%v: %v, want ErrIDInUse", ids, err)
		}
	}
	for _, tc := range []struct {
		ids  []string
		want float64
	}{
		{[]string{"c00000000000", "c00000000001"}, appendFill},
		{[]string{"d00000000000", "a00000000000", "d00000000001"}, bolt.DefaultFillPercent},
	} {
		err := st.Batch(func(tx *Tx) error {
			for _, id := range tc.ids {
				create(tx, id)
			}
			if tx.sessions.FillPercent != tc.want {
				t.Errorf("%v: fill %v, want %v", tc.ids, tx.sessions.FillPercent, tc.want)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
