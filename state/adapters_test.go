package state

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/session"
)

func TestAdapterStateRoundTrip(t *testing.T) {
	path := dbPath(t)
	st := openT(t, path, Options{})
	if got, err := st.AdapterState("claude"); err != nil || len(got) != 0 {
		t.Fatalf("fresh store: %v, %v", got, err)
	}
	put := map[string][]byte{"/a/1.jsonl": []byte("one"), "/a/2.jsonl": []byte("two"), "/b/3.jsonl": {0, 1, 2}}
	if err := st.SaveAdapterState("claude", put, nil); err != nil {
		t.Fatal(err)
	}
	// Another adapter's entries are its own.
	if err := st.SaveAdapterState("opencode", map[string][]byte{"/a/1.jsonl": []byte("other")}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveAdapterState("claude", map[string][]byte{"/a/2.jsonl": []byte("two'")}, []string{"/a/1.jsonl", "/never"}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	// It survives a reopen: that is what it is for.
	st = openT(t, path, Options{})
	got, err := st.AdapterState("claude")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]byte{"/a/2.jsonl": []byte("two'"), "/b/3.jsonl": {0, 1, 2}}
	if len(got) != len(want) {
		t.Fatalf("got %d entries %q, want %q", len(got), got, want)
	}
	for k, v := range want {
		if !bytes.Equal(got[k], v) {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if o, _ := st.AdapterState("opencode"); string(o["/a/1.jsonl"]) != "other" {
		t.Errorf("opencode's entry: %q", o)
	}
	// Adapter state is not session data: no event, no record.
	if evs, _ := st.Events(0, 0); len(evs) != 0 {
		t.Errorf("saving adapter state wrote events: %+v", evs)
	}
	if recs, _ := st.List(); len(recs) != 0 {
		t.Errorf("saving adapter state wrote records: %+v", recs)
	}
}

func TestAdapterStateRefusesEmptyNames(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	if err := st.SaveAdapterState("", map[string][]byte{"k": nil}, nil); err == nil {
		t.Error("empty adapter name accepted")
	}
	if err := st.SaveAdapterState("claude", map[string][]byte{"": []byte("x"), "k": []byte("y")}, nil); err == nil {
		t.Error("empty key accepted")
	}
	// The refused save wrote nothing, not even its good entry.
	if got, _ := st.AdapterState("claude"); len(got) != 0 {
		t.Errorf("a refused save left %q", got)
	}
}

// A version 2 store gains the bucket at Open and keeps its records.
func TestMigrateV2AddsAdapters(t *testing.T) {
	path := dbPath(t)
	writeFixture(t, path, 2, nil, 0)
	// writeFixture writes the version 1 tree; give it the index of 2.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.Bucket(bucketV1).CreateBucketIfNotExists(bucketUpstream)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	st := openT(t, path, Options{})
	if v := schemaOf(t, st); v != currentSchema {
		t.Fatalf("schema %d, want %d", v, currentSchema)
	}
	if err := st.SaveAdapterState("claude", map[string][]byte{"k": []byte("v")}, nil); err != nil {
		t.Fatalf("save after migration: %v", err)
	}
}

func TestCommitStatsCountBatches(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	before := st.CommitStats()
	for range 3 {
		if err := st.Batch(func(tx *Tx) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	after := st.CommitStats()
	if after.Commits != before.Commits+3 || after.Time <= before.Time {
		t.Fatalf("commit stats %+v -> %+v", before, after)
	}
}

// A first save of many entries, and events appended one by one, fill
// their pages: bbolt's default half fill doubled the file and the
// daemon's resident memory, which counts the mapped pages it touches.
func TestBulkWritesFillPages(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	put := map[string][]byte{}
	for i := range 5000 {
		put[fmt.Sprintf("/home/u/.claude/projects/-home-u-p%d/%08x-0000-4000-8000-000000000000.jsonl", i%150, i*7919%5000)] = bytes.Repeat([]byte{byte(i)}, 120)
	}
	if err := st.SaveAdapterState("claude", put, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		r := &session.Record{Agent: "claude", UpstreamID: fmt.Sprintf("up-%d", i), Status: session.StatusStopped, CreatedAt: time.Now()}
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
			t.Fatal(err)
		}
	}
	err := st.db.View(func(tx *bolt.Tx) error {
		v1 := tx.Bucket(bucketV1)
		for name, b := range map[string]*bolt.Bucket{"adapters/claude": v1.Bucket(bucketAdapters).Bucket([]byte("claude")), "events": v1.Bucket(bucketEvents)} {
			s := b.Stats()
			if fill := float64(s.LeafInuse) / float64(s.LeafAlloc); fill < 0.85 {
				t.Errorf("%s: leaf pages %.0f %% full (%d of %d bytes)", name, fill*100, s.LeafInuse, s.LeafAlloc)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
