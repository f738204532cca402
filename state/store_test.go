package state

import (
	"bytes"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// clock is a settable fake Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "sessiond.db") }

func openT(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = zaptest.NewLogger(t)
	}
	st, err := Open(path, opts)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func rec(agent, upstream string) *session.Record {
	return &session.Record{
		Agent: agent, UpstreamID: upstream, Status: session.StatusRunning,
		Activity: session.ActivityIdle, Cwd: "/home/u/project",
		Owner: &proc.Identity{BootID: "b00t", PID: 4242, StartTicks: 99},
	}
}

func mustCreate(t testing.TB, st *Store, r *session.Record) *session.Record {
	t.Helper()
	if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
		t.Fatalf("create %s/%s: %v", r.Agent, r.UpstreamID, err)
	}
	return r
}

// rawRecord returns a copy of the stored bytes of a session.
func rawRecord(t *testing.T, st *Store, id string) []byte {
	t.Helper()
	var out []byte
	st.db.View(func(tx *bolt.Tx) error {
		out = bytes.Clone(tx.Bucket(bucketV1).Bucket(bucketSessions).Get([]byte(id)))
		return nil
	})
	return out
}

func lastSeq(t testing.TB, st *Store) uint64 {
	t.Helper()
	seq, err := st.LastSeq()
	if err != nil {
		t.Fatal(err)
	}
	return seq
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID()
		if !re.MatchString(id) {
			t.Fatalf("NewID() = %q, want 12 lowercase hex", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestCreateGetAndEvent(t *testing.T) {
	clk := newClock()
	st := openT(t, dbPath(t), Options{Now: clk.Now})
	r := mustCreate(t, st, rec("claude", "u-1"))
	if len(r.ID) != 12 || r.V != recordVersion || !r.CreatedAt.Equal(clk.Now()) || !r.UpdatedAt.Equal(clk.Now()) {
		t.Fatalf("create did not fill id/v/times: %+v", r)
	}
	got, err := st.Get(r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.UpstreamID != "u-1" || got.Owner == nil || *got.Owner != *r.Owner || got.V != recordVersion {
		t.Fatalf("get = %+v", got)
	}
	if got, err := st.ByUpstream("claude", "u-1"); err != nil || got.ID != r.ID {
		t.Fatalf("by upstream = %v, %v", got, err)
	}
	if _, err := st.ByUpstream("opencode", "u-1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("by upstream of another agent: %v, want ErrNotFound", err)
	}
	evs, err := st.Events(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].Seq != 1 || evs[0].SessionID != r.ID || evs[0].Agent != "claude" ||
		evs[0].Type != session.EventCreated || !evs[0].Time.Equal(clk.Now()) {
		t.Fatalf("events = %+v", evs)
	}
	if _, err := st.Get("nope"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("get missing: %v", err)
	}
}

func TestCreateRejects(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	a := mustCreate(t, st, rec("claude", "dup"))
	before := lastSeq(t, st)

	b := rec("claude", "dup")
	err := st.Create(b, session.Event{Type: session.EventCreated})
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "dup") {
		t.Fatalf("duplicate (agent, upstream): %v, want ErrConflict naming it", err)
	}
	if b.ID != "" {
		t.Errorf("a refused create assigned id %q", b.ID)
	}
	// The same upstream id under another agent is a different session.
	mustCreate(t, st, rec("opencode", "dup"))
	// Launched sessions without an upstream id yet take no index entry.
	mustCreate(t, st, rec("opencode", ""))
	mustCreate(t, st, rec("opencode", ""))

	c := rec("claude", "other")
	c.ID = a.ID
	if err := st.Create(c, session.Event{}); err == nil || !strings.Contains(err.Error(), a.ID) {
		t.Fatalf("create with a used id: %v", err)
	}
	if err := st.Create(rec("", "x"), session.Event{}); err == nil {
		t.Fatal("create without agent succeeded")
	}
	if got := lastSeq(t, st); got != before+3 {
		t.Fatalf("last seq %d, want %d (refused creates append nothing)", got, before+3)
	}
	recs, _ := st.List()
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4", len(recs))
	}
}

func TestLookup(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	mk := func(id, agent, up string) *session.Record {
		r := rec(agent, up)
		r.ID = id
		return mustCreate(t, st, r)
	}
	a := mk("abc111111111", "claude", "3f2a9c1e-aaaa")
	mk("abc222222222", "claude", "77d0e5b2-bbbb")
	d := mk("def333333333", "opencode", "ses_9XyZ")
	mk("fed444444444", "claude", "same")
	mk("fed555555555", "opencode", "same")

	for _, tc := range []struct{ ref, want string }{
		{"abc111111111", a.ID},  // exact id
		{"3f2a9c1e-aaaa", a.ID}, // exact upstream id
		{"ses_9XyZ", d.ID},      // exact upstream id, other agent
		{"def", d.ID},           // unique id prefix
		{"abc1", a.ID},          // unique id prefix
		{"3f2a", a.ID},          // unique upstream prefix
		{"ses_", d.ID},          // unique upstream prefix
	} {
		got, err := st.Lookup(tc.ref)
		if err != nil || got.ID != tc.want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", tc.ref, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		ref  string
		want []string
	}{
		{"abc", []string{"abc111111111", "abc222222222"}},
		{"same", []string{"fed444444444", "fed555555555"}}, // one upstream id under two agents
		{"fed", []string{"fed444444444", "fed555555555"}},
	} {
		_, err := st.Lookup(tc.ref)
		var amb *AmbiguousError
		if !errors.As(err, &amb) {
			t.Fatalf("Lookup(%q): %v, want *AmbiguousError", tc.ref, err)
		}
		if amb.Ref != tc.ref || strings.Join(amb.Candidates, ",") != strings.Join(tc.want, ",") {
			t.Errorf("Lookup(%q) ambiguity = %+v, want %v", tc.ref, amb, tc.want)
		}
		for _, c := range tc.want {
			if !strings.Contains(err.Error(), c) {
				t.Errorf("%q does not list %s", err, c)
			}
		}
	}
	for _, ref := range []string{"zzz", "", "abc3"} {
		_, err := st.Lookup(ref)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `"`+ref+`"`) {
			t.Errorf("Lookup(%q): %v, want ErrNotFound naming the ref", ref, err)
		}
	}
}

func TestList(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, spec := range []struct {
		id string
		at time.Duration
	}{{"cccccccccccc", 2}, {"aaaaaaaaaaaa", 1}, {"bbbbbbbbbbbb", 1}, {"000000000000", 3}} {
		r := rec("claude", "u"+spec.id)
		r.ID, r.CreatedAt = spec.id, t0.Add(spec.at*time.Hour)
		mustCreate(t, st, r)
	}
	recs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.ID)
	}
	if want := "aaaaaaaaaaaa bbbbbbbbbbbb cccccccccccc 000000000000"; strings.Join(got, " ") != want {
		t.Fatalf("List order = %v, want %s", got, want)
	}
}

func TestUpdate(t *testing.T) {
	clk := newClock()
	st := openT(t, dbPath(t), Options{Now: clk.Now})
	r := mustCreate(t, st, rec("claude", "u-1"))
	created := r.UpdatedAt
	clk.Add(time.Minute)

	t.Run("rewrites with its event", func(t *testing.T) {
		got, err := st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
			from := r.Status
			r.Status, r.StatusReason = session.StatusStopped, "owner exited"
			return []session.Event{{Type: session.EventStatus, From: from, To: r.Status, Reason: r.StatusReason}}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != session.StatusStopped || !got.UpdatedAt.Equal(clk.Now()) {
			t.Fatalf("returned %+v", got)
		}
		stored, _ := st.Get(r.ID)
		if stored.Status != session.StatusStopped || !stored.UpdatedAt.Equal(clk.Now()) || !stored.CreatedAt.Equal(created) {
			t.Fatalf("stored %+v", stored)
		}
		evs, _ := st.Events(1, 0)
		if len(evs) != 1 || evs[0].Seq != 2 || evs[0].SessionID != r.ID || evs[0].Agent != "claude" ||
			evs[0].From != session.StatusRunning || evs[0].To != session.StatusStopped || !evs[0].Time.Equal(clk.Now()) {
			t.Fatalf("event %+v", evs)
		}
	})

	t.Run("no change writes nothing", func(t *testing.T) {
		before, seq := rawRecord(t, st, r.ID), lastSeq(t, st)
		clk.Add(time.Minute)
		changed := st.Changed()
		got, err := st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
			r.Status = session.StatusStopped // already so
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if after := rawRecord(t, st, r.ID); !bytes.Equal(before, after) {
			t.Fatalf("record rewritten:\n%s\n%s", before, after)
		}
		if got.UpdatedAt.Equal(clk.Now()) {
			t.Error("UpdatedAt moved without a change")
		}
		if lastSeq(t, st) != seq {
			t.Error("an event was appended without a change")
		}
		select {
		case <-changed:
			t.Error("Changed fired for a transaction without events")
		default:
		}
	})

	t.Run("fn error writes nothing", func(t *testing.T) {
		before, seq := rawRecord(t, st, r.ID), lastSeq(t, st)
		boom := errors.New("boom")
		_, err := st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
			r.Status = session.StatusRunning
			return []session.Event{{Type: session.EventStatus}}, boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
		if !bytes.Equal(before, rawRecord(t, st, r.ID)) || lastSeq(t, st) != seq {
			t.Fatal("a failed update wrote")
		}
	})

	t.Run("missing", func(t *testing.T) {
		_, err := st.Update("ffffffffffff", func(r *session.Record) ([]session.Event, error) { return nil, nil })
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "ffffffffffff") {
			t.Fatalf("err = %v", err)
		}
	})

	t.Run("id is fixed", func(t *testing.T) {
		_, err := st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
			r.ID = "other"
			return nil, nil
		})
		if err == nil {
			t.Fatal("changing the id succeeded")
		}
	})
}

func TestUpdateUpstreamIndex(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	launched := mustCreate(t, st, rec("opencode", ""))
	other := mustCreate(t, st, rec("opencode", "ses_taken"))

	// Taken by another session: conflict, nothing written.
	before, seq := rawRecord(t, st, launched.ID), lastSeq(t, st)
	_, err := st.Update(launched.ID, func(r *session.Record) ([]session.Event, error) {
		r.UpstreamID = "ses_taken"
		return []session.Event{{Type: session.EventUpdated}}, nil
	})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	if !bytes.Equal(before, rawRecord(t, st, launched.ID)) || lastSeq(t, st) != seq {
		t.Fatal("a conflicting update wrote")
	}
	if got, _ := st.ByUpstream("opencode", "ses_taken"); got.ID != other.ID {
		t.Fatal("index entry of the other session changed")
	}

	// Linking a launched session to its upstream id indexes it.
	if _, err := st.Update(launched.ID, func(r *session.Record) ([]session.Event, error) {
		r.UpstreamID = "ses_new"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.ByUpstream("opencode", "ses_new"); err != nil || got.ID != launched.ID {
		t.Fatalf("by new upstream: %v, %v", got, err)
	}
	// Moving it drops the old entry.
	if _, err := st.Update(launched.ID, func(r *session.Record) ([]session.Event, error) {
		r.UpstreamID = "ses_newer"
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ByUpstream("opencode", "ses_new"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old entry kept: %v", err)
	}
	if got, err := st.Lookup("ses_newer"); err != nil || got.ID != launched.ID {
		t.Fatalf("lookup new upstream: %v, %v", got, err)
	}
	checkIndex(t, st)
}

// checkIndex verifies that v1/upstream holds exactly one entry per record
// with an upstream id, pointing at it.
func checkIndex(t testing.TB, st *Store) {
	t.Helper()
	recs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, r := range recs {
		if r.UpstreamID != "" {
			want[string(upstreamKey(r.Agent, r.UpstreamID))] = r.ID
		}
	}
	got := map[string]string{}
	st.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketV1).Bucket(bucketUpstream).ForEach(func(k, v []byte) error {
			got[string(k)] = string(v)
			return nil
		})
	})
	if len(got) != len(want) {
		t.Errorf("index has %d entries, records %d", len(got), len(want))
	}
	for k, id := range want {
		if got[k] != id {
			t.Errorf("index %q -> %q, want %q", k, got[k], id)
		}
	}
}

func TestBatch(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	a := mustCreate(t, st, rec("claude", "a"))
	b := mustCreate(t, st, rec("claude", "b"))
	seq := lastSeq(t, st)
	var actionSeq uint64
	err := st.Batch(func(tx *Tx) error {
		n := 0
		err := tx.forEach(func(r *session.Record) error {
			n++
			_, err := tx.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
				r.Activity = session.ActivityBusy
				return []session.Event{{Type: session.EventUpdated, Activity: r.Activity}}, nil
			})
			return err
		})
		if err != nil || n != 2 {
			t.Errorf("ForEach saw %d records: %v", n, err)
		}
		// A conflict inside a batch leaves the rest of it alone.
		if err := tx.Create(rec("claude", "a"), session.Event{}); !errors.Is(err, ErrConflict) {
			t.Errorf("conflict in batch: %v", err)
		}
		if _, err := tx.Update("missing00000", func(*session.Record) ([]session.Event, error) { return nil, nil }); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing in batch: %v", err)
		}
		if err := tx.Create(rec("claude", "c"), session.Event{}); err != nil {
			t.Error(err)
		}
		if got, err := tx.byUpstream("claude", "c"); err != nil || got.Agent != "claude" {
			t.Errorf("batch does not see its own create: %v", err)
		}
		actionSeq, err = tx.Append(session.Event{Type: session.EventAction, SessionID: a.ID, Reason: "repair"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if actionSeq != seq+4 || lastSeq(t, st) != seq+4 {
		t.Fatalf("action seq %d, last %d, want %d", actionSeq, lastSeq(t, st), seq+4)
	}
	evs, _ := st.Events(seq+3, 0)
	if len(evs) != 1 || evs[0].Agent != "claude" || evs[0].Type != session.EventAction || evs[0].Time.IsZero() {
		t.Fatalf("action event %+v", evs)
	}
	for _, id := range []string{a.ID, b.ID} {
		if r, _ := st.Get(id); r.Activity != session.ActivityBusy {
			t.Errorf("%s not updated", id)
		}
	}

	// An error from fn rolls everything back.
	seq = lastSeq(t, st)
	boom := errors.New("boom")
	err = st.Batch(func(tx *Tx) error {
		tx.Create(rec("claude", "d"), session.Event{})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if _, err := st.ByUpstream("claude", "d"); !errors.Is(err, ErrNotFound) || lastSeq(t, st) != seq {
		t.Fatal("a failed batch wrote")
	}
	checkIndex(t, st)
}

func TestEventSeqAcrossReopenAndPruning(t *testing.T) {
	path := dbPath(t)
	const maxEvents = 10
	opts := Options{MaxEvents: maxEvents}
	var last uint64
	for round := range 4 {
		st := openT(t, path, opts)
		if got := lastSeq(t, st); got != last {
			t.Fatalf("round %d: LastSeq after reopen %d, want %d", round, got, last)
		}
		for range 37 {
			err := st.Batch(func(tx *Tx) error {
				seq, err := tx.Append(session.Event{Type: session.EventAction, Reason: "test"})
				if err == nil && seq != last+1 {
					t.Errorf("appended seq %d after %d", seq, last)
				}
				last = seq
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		first, _ := st.FirstSeq()
		evs, _ := st.Events(0, 0)
		if len(evs) > maxEvents+int(st.pruneStep) || len(evs) == 0 {
			t.Fatalf("round %d: %d events retained with MaxEvents %d", round, len(evs), maxEvents)
		}
		if first != evs[0].Seq || first <= last-uint64(maxEvents)-st.pruneStep {
			t.Fatalf("round %d: FirstSeq %d, first event %d, last %d", round, first, evs[0].Seq, last)
		}
		for i := 1; i < len(evs); i++ {
			if evs[i].Seq <= evs[i-1].Seq {
				t.Fatalf("round %d: seq %d after %d", round, evs[i].Seq, evs[i-1].Seq)
			}
		}
		st.Close()
	}
	if last != 4*37 {
		t.Fatalf("last seq %d, want %d", last, 4*37)
	}
}

func TestEventsPaging(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	r := mustCreate(t, st, rec("claude", "p"))
	for i := range 49 {
		if _, err := st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
			r.Title = string(rune('a' + i%26))
			return []session.Event{{Type: session.EventUpdated, Reason: r.Title}}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	var since uint64
	var pages, n int
	for {
		evs, err := st.Events(since, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) == 0 {
			break
		}
		if len(evs) > 7 {
			t.Fatalf("page of %d events, limit 7", len(evs))
		}
		for _, ev := range evs {
			if ev.Seq != since+1 {
				t.Fatalf("seq %d after %d", ev.Seq, since)
			}
			since = ev.Seq
			n++
		}
		pages++
	}
	if n != 50 || pages != 8 {
		t.Fatalf("%d events in %d pages, want 50 in 8", n, pages)
	}
	if evs, _ := st.Events(45, 0); len(evs) != 5 || evs[0].Seq != 46 {
		t.Fatalf("Events(45, 0) = %d events", len(evs))
	}
	if evs, _ := st.Events(50, 10); len(evs) != 0 {
		t.Fatal("events past the end")
	}
	if first, _ := st.FirstSeq(); first != 1 {
		t.Fatalf("FirstSeq = %d", first)
	}
}

func TestAgePruning(t *testing.T) {
	clk := newClock()
	path := dbPath(t)
	opts := Options{Now: clk.Now, MaxEventAge: time.Hour}
	st := openT(t, path, opts)
	if first, _ := st.FirstSeq(); first != 0 {
		t.Fatalf("FirstSeq of an empty log = %d", first)
	}
	appendN := func(st *Store, n int) {
		t.Helper()
		err := st.Batch(func(tx *Tx) error {
			for range n {
				if _, err := tx.Append(session.Event{Type: session.EventAction}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	appendN(st, 10)
	clk.Add(2 * time.Hour)
	// The next prune (at seq 256) drops the ten old events, not the new.
	appendN(st, 250)
	if first, _ := st.FirstSeq(); first != 11 {
		t.Fatalf("FirstSeq after age pruning = %d, want 11", first)
	}
	st.Close()

	// Open prunes too: after a long downtime everything is old, yet the
	// sequence goes on.
	clk.Add(2 * time.Hour)
	st = openT(t, path, opts)
	if first, _ := st.FirstSeq(); first != 0 {
		t.Fatalf("FirstSeq after everything aged out = %d, want 0", first)
	}
	if got := lastSeq(t, st); got != 260 {
		t.Fatalf("LastSeq = %d, want 260", got)
	}
	appendN(st, 1)
	if evs, _ := st.Events(0, 0); len(evs) != 1 || evs[0].Seq != 261 {
		t.Fatalf("events after pruning everything: %+v", evs)
	}
}

func TestChangedAfterCommit(t *testing.T) {
	st := openT(t, dbPath(t), Options{})

	// A reader woken by Changed sees the record.
	r := rec("claude", "c-1")
	r.ID = NewID()
	changed := st.Changed()
	seen := make(chan error, 1)
	go func() {
		<-changed
		_, err := st.Get(r.ID)
		seen <- err
	}()
	mustCreate(t, st, r)
	select {
	case err := <-seen:
		if err != nil {
			t.Fatalf("woken reader: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Changed did not fire after Create")
	}

	// Update fires too, and a fresh channel is handed out.
	changed2 := st.Changed()
	if changed2 == changed {
		t.Fatal("Changed returned a closed channel")
	}
	st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
		r.Activity = session.ActivityBusy
		return []session.Event{{Type: session.EventUpdated}}, nil
	})
	select {
	case <-changed2:
	default:
		t.Fatal("Changed did not fire after Update")
	}

	// Not before the commit: while a batch is open, nothing fires and no
	// reader sees its writes.
	changed3 := st.Changed()
	inside, release, done := make(chan struct{}), make(chan struct{}), make(chan error)
	r2 := rec("claude", "c-2")
	r2.ID = NewID()
	go func() {
		done <- st.Batch(func(tx *Tx) error {
			if err := tx.Create(r2, session.Event{}); err != nil {
				return err
			}
			close(inside)
			<-release
			return nil
		})
	}()
	<-inside
	select {
	case <-changed3:
		t.Fatal("Changed fired before the commit")
	default:
	}
	if _, err := st.Get(r2.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("uncommitted record visible: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed3:
	case <-time.After(5 * time.Second):
		t.Fatal("Changed did not fire after the batch")
	}
	if _, err := st.Get(r2.ID); err != nil {
		t.Fatal(err)
	}
}

func TestConcurrentUse(t *testing.T) {
	st := openT(t, dbPath(t), Options{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 25 {
				r := mustCreate(t, st, rec("claude", "w"+string(rune('0'+w))+"-"+string(rune('a'+i))))
				st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
					r.Status = session.StatusStopped
					return []session.Event{{Type: session.EventStatus}}, nil
				})
			}
		}()
		go func() {
			defer wg.Done()
			var since uint64
			for range 50 {
				evs, err := st.Events(since, 0)
				if err != nil {
					t.Error(err)
					return
				}
				for _, ev := range evs {
					if ev.Seq <= since {
						t.Errorf("seq %d after %d", ev.Seq, since)
					}
					since = ev.Seq
				}
				st.List()
			}
		}()
	}
	wg.Wait()
	if got := lastSeq(t, st); got != 200 {
		t.Fatalf("LastSeq %d, want 200", got)
	}
	checkIndex(t, st)
}
