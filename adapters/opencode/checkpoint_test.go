package opencode

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
)

var _ adapters.Checkpointer = (*Adapter)(nil)

// store is what the tracker keeps for the adapter: the entries of every
// committed Checkpoint.
type store map[string][]byte

// save applies a's Checkpoint to s and commits it, and returns it.
func (s store) save(a *Adapter) adapters.Checkpoint {
	cp := a.Checkpoint()
	for _, k := range cp.Del {
		delete(s, k)
	}
	for k, v := range cp.Put {
		s[k] = v
	}
	cp.Commit()
	return cp
}

func (s store) clone() store {
	out := store{}
	for k, v := range s {
		out[k] = slices.Clone(v)
	}
	return out
}

// restarted is a new adapter on dir handed what s holds, as the tracker
// does before the first pass after a restart.
func restarted(t testing.TB, dir string, s store) *Adapter {
	t.Helper()
	a := newTestAdapter(t, dir, nil)
	a.Restore(s.clone())
	return a
}

// sameAsFresh checks that a restored adapter's pass observed and holds
// what an adapter that never saw the database reads.
func sameAsFresh(t *testing.T, dir string, got adapters.Observation, a *Adapter) {
	t.Helper()
	fresh := newTestAdapter(t, dir, nil)
	want := discover(t, fresh)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("restored pass observed\n%s\nwant (a fresh read)\n%s", dumpObs(got), dumpObs(want))
	}
	for path, r := range fresh.dbs {
		if !reflect.DeepEqual(a.dbs[path].sessions, r.sessions) {
			t.Errorf("%s: the restored adapter holds other session data than a fresh read", path)
			for id, s := range r.sessions {
				if !reflect.DeepEqual(a.dbs[path].sessions[id], s) {
					t.Errorf("session %s:\n got %+v\nwant %+v", id, a.dbs[path].sessions[id], s)
				}
			}
		}
	}
}

func dumpObs(obs adapters.Observation) string {
	var b strings.Builder
	for _, o := range obs.All() {
		fmt.Fprintf(&b, "  %s %s %s last %s inflight %d: %s\n", o.UpstreamID, o.Cwd, o.Activity, o.LastActivity.UTC().Format(time.RFC3339Nano), len(o.InFlight), o.ActivityEvidence)
	}
	fmt.Fprintf(&b, "  errors %v warnings %v", obs.Errors, obs.Warnings)
	return b.String()
}

// shapes writes one session of every shape the adapter tells apart.
func shapes(t *testing.T, db *opencodetest.DB, at time.Time) map[string]opencodetest.Shape {
	t.Helper()
	out := map[string]opencodetest.Shape{}
	var err error
	for name, f := range map[string]func(string, time.Time) (opencodetest.Shape, error){
		"finished": db.Finished, "interrupted": db.InterruptedMidTool, "question": db.WaitingOnQuestion,
	} {
		if out[name], err = f("/w/"+name, at); err != nil {
			t.Fatal(err)
		}
	}
	if out["child"], err = db.Child("/w/child", at, "running"); err != nil {
		t.Fatal(err)
	}
	// An aborted turn (OpenCode marked it), archived, with a parent.
	ab := opencodetest.Session{Directory: "/w/aborted", Title: "aborted", ParentID: out["finished"].SessionID, Created: at.Add(-time.Hour), Updated: at, Archived: at}
	if err := db.Session(ab); err != nil {
		t.Fatal(err)
	}
	ab.ID = sessionIDByTitle(t, db, "aborted")
	m := opencodetest.Message{SessionID: ab.ID, Cwd: "/w/aborted", Created: at.Add(-time.Minute), Completed: at,
		Error: &opencodetest.MessageError{Name: "MessageAbortedError", Message: "aborted by the user"}}
	if err := db.Message(m); err != nil {
		t.Fatal(err)
	}
	out["aborted"] = opencodetest.Shape{SessionID: ab.ID}
	// A session with no message at all.
	if err := db.Session(opencodetest.Session{Directory: "/w/empty", Title: "empty", Created: at, Updated: at}); err != nil {
		t.Fatal(err)
	}
	return out
}

func sessionIDByTitle(t *testing.T, db *opencodetest.DB, title string) string {
	t.Helper()
	var id string
	if err := db.SQL().QueryRow("SELECT id FROM session WHERE title = ?", title).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// savedShapes is a database of every shape, read by an adapter whose
// checkpoint s holds; the adapter then stopped.
type savedShapes struct {
	dir, path string
	db        *opencodetest.DB
	sh        map[string]opencodetest.Shape
	s         store
	// before is what the stopped adapter last observed.
	before adapters.Observation
}

func newSavedShapes(t *testing.T, at time.Time) savedShapes {
	t.Helper()
	x := savedShapes{dir: t.TempDir()}
	x.path = filepath.Join(x.dir, "opencode.db")
	x.db = opencodetest.MustCreate(t, x.path)
	x.sh = shapes(t, x.db, at)
	prev := newTestAdapter(t, x.dir, nil)
	x.before = discover(t, prev)
	x.s = store{}
	x.s.save(prev)
	return x
}

// A restart with nothing changed reads no session again but the ones with
// work in flight, reads nothing whole, and observes exactly what the
// previous process did and what a fresh read does; its first Checkpoint
// has nothing to write.
func TestRestoreUnchanged(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	shapes(t, db, time.Now().Add(-time.Hour).Truncate(time.Millisecond))
	prev := newTestAdapter(t, dir, nil)
	before := discover(t, prev)
	s := store{}
	if cp := s.save(prev); len(cp.Put) != 8 || len(cp.Del) != 0 { // 7 sessions and the database
		t.Fatalf("first checkpoint: %d puts, %d deletes; want 8, 0", len(cp.Put), len(cp.Del))
	}
	if cp := s.save(prev); len(cp.Put) != 0 || len(cp.Del) != 0 {
		t.Fatalf("second checkpoint, nothing changed: %d puts, %d deletes", len(cp.Put), len(cp.Del))
	}

	a := restarted(t, dir, s)
	path := filepath.Join(dir, "opencode.db")
	restoredPtrs := map[string]*sessionData{}
	for id, sd := range a.restored[path].sessions {
		restoredPtrs[id] = sd
	}
	got := discover(t, a)
	if !reflect.DeepEqual(got, before) {
		t.Errorf("after the restart\n%s\nbefore it\n%s", dumpObs(got), dumpObs(before))
	}
	sameAsFresh(t, dir, got, a)
	r := a.dbs[path]
	if r.fulls != 0 {
		t.Errorf("the restart read the database whole %d times", r.fulls)
	}
	for id, sd := range r.sessions {
		if again := sd != restoredPtrs[id]; again != sd.inFlight() {
			t.Errorf("session %s (in flight %v) read again: %v", id, sd.inFlight(), again)
		}
	}
	if cp := s.save(a); len(cp.Put) != 0 || len(cp.Del) != 0 {
		t.Errorf("checkpoint after an unchanged restart: %d puts %v, %d deletes %v", len(cp.Put), keys(cp.Put), len(cp.Del), cp.Del)
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, strings.ReplaceAll(k, "\x00", "|"))
	}
	slices.Sort(out)
	return out
}

// While sessiond was down OpenCode went on: a new session, a new turn
// (left in flight) in a finished session, the interrupted session's turn
// finished, a session deleted, another renamed. The restart reads only
// those, and sees what a fresh read sees.
func TestRestoreSeesChangesWhileDown(t *testing.T) {
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	x := newSavedShapes(t, at)
	dir, db, sh, s := x.dir, x.db, x.sh, x.s

	later := time.Now().Truncate(time.Millisecond)
	newer, err := db.InterruptedMidTool("/w/new", later)
	if err != nil {
		t.Fatal(err)
	}
	fin := sh["finished"].SessionID
	um := opencodetest.Message{SessionID: fin, Role: "user", Created: later.Add(-2 * time.Second)}
	am := opencodetest.Message{SessionID: fin, Cwd: "/w/finished", Created: later.Add(-time.Second), Updated: later}
	for _, m := range []opencodetest.Message{um, am} {
		if err := db.Message(m); err != nil {
			t.Fatal(err)
		}
	}
	intr := sh["interrupted"]
	if err := db.Part(opencodetest.Part{ID: intr.ToolPartID, MessageID: intr.AssistantMessageID, SessionID: intr.SessionID, Tool: "bash", Status: "completed", Start: at, End: later, Updated: later}); err != nil {
		t.Fatal(err)
	}
	if err := db.Message(opencodetest.Message{ID: intr.AssistantMessageID, SessionID: intr.SessionID, Cwd: "/w/interrupted", Created: at.Add(-25 * time.Second), Completed: later}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec("DELETE FROM session WHERE id = ?", sh["question"].SessionID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec("UPDATE session SET title = 'renamed', time_updated = ? WHERE id = ?", later.UnixMilli(), sh["aborted"].SessionID); err != nil {
		t.Fatal(err)
	}

	a := restarted(t, dir, s)
	got := discover(t, a)
	sameAsFresh(t, dir, got, a)
	if n := got.Len(); n != 7 {
		t.Errorf("%d sessions, want 7", n)
	}
	o := find(t, got, fin)
	if len(o.InFlight) != 1 || !o.LastActivity.Equal(later) {
		t.Errorf("new turn of a finished session: in flight %v, last %v", o.InFlight, o.LastActivity)
	}
	if o := find(t, got, intr.SessionID); len(o.InFlight) != 0 {
		t.Errorf("a turn finished while sessiond was down is still in flight: %v", o.InFlight)
	}
	if o := find(t, got, newer.SessionID); len(o.InFlight) != 2 {
		t.Errorf("new session: in flight %v", o.InFlight)
	}
	if o := find(t, got, sh["aborted"].SessionID); o.Title != "renamed" {
		t.Errorf("renamed session: title %q", o.Title)
	}
	if r := a.dbs[filepath.Join(dir, "opencode.db")]; r.fulls != 0 {
		t.Errorf("read the database whole %d times; what changed was enough", r.fulls)
	}
	cp := s.save(a)
	if !slices.Contains(cp.Del, sessionEntryKey(filepath.Join(dir, "opencode.db"), sh["question"].SessionID)) {
		t.Errorf("the deleted session's entry is kept: deletes %v", cp.Del)
	}
	// The next restart starts from there.
	again := restarted(t, dir, s)
	sameAsFresh(t, dir, discover(t, again), again)
}

// When the row at a saved cursor is gone, rowids may have been given
// again to rows the saved state never saw: the restart reads the whole
// database rather than miss them.
func TestRestoreCursorRowGone(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	a1, _ := db.Finished("/w/a", at)
	b1, _ := db.Finished("/w/b", at.Add(time.Minute))
	// b's newest message is a user message with no parts yet, so deleting
	// it moves no part cursor.
	bm := opencodetest.Message{ID: opencodetest.NewID("msg"), SessionID: b1.SessionID, Role: "user", Created: at.Add(2 * time.Minute)}
	if err := db.Message(bm); err != nil {
		t.Fatal(err)
	}
	prev := newTestAdapter(t, dir, nil)
	discover(t, prev)
	s := store{}
	s.save(prev)

	// b's newest message (the cursor's row) is deleted, then a gets a new
	// message: SQLite gives it the deleted row's rowid, at the cursor, so
	// "rowid past the cursor" would not find it.
	var rowid int64
	if err := db.SQL().QueryRow("SELECT rowid FROM message WHERE id = ?", bm.ID).Scan(&rowid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec("DELETE FROM message WHERE rowid = ?", rowid); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Truncate(time.Millisecond)
	m := opencodetest.Message{ID: opencodetest.NewID("msg"), SessionID: a1.SessionID, Role: "user", Created: later}
	if err := db.Message(m); err != nil {
		t.Fatal(err)
	}
	var reused int64
	if err := db.SQL().QueryRow("SELECT rowid FROM message WHERE id = ?", m.ID).Scan(&reused); err != nil || reused != rowid {
		t.Fatalf("the new message has rowid %d (%v), the deleted one had %d: the test does not test the reuse", reused, err, rowid)
	}

	a := restarted(t, dir, s)
	got := discover(t, a)
	sameAsFresh(t, dir, got, a)
	if r := a.dbs[filepath.Join(dir, "opencode.db")]; r.fulls != 1 {
		t.Errorf("%d whole reads, want 1", r.fulls)
	}
	if o := find(t, got, a1.SessionID); !o.LastActivity.Equal(later) {
		t.Errorf("the new message at a reused rowid was missed: last activity %v, want %v", o.LastActivity, later)
	}
}

// The same holds within one run, between two passes.
func TestDiscoverRowidReused(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	a1, _ := db.Finished("/w/a", at)
	db.Finished("/w/b", at.Add(time.Minute))
	a := newTestAdapter(t, dir, func(c *Config) { c.FullEvery = -1 })
	discover(t, a)
	var rowid int64
	if err := db.SQL().QueryRow("SELECT max(rowid) FROM part").Scan(&rowid); err != nil {
		t.Fatal(err)
	}
	if _, err := db.SQL().Exec("DELETE FROM part WHERE rowid = ?", rowid); err != nil {
		t.Fatal(err)
	}
	// A new tool part in flight in a, at the deleted part's rowid.
	later := time.Now().Truncate(time.Millisecond)
	var msg string
	if err := db.SQL().QueryRow("SELECT id FROM message WHERE session_id = ? ORDER BY time_created DESC LIMIT 1", a1.SessionID).Scan(&msg); err != nil {
		t.Fatal(err)
	}
	if err := db.Part(opencodetest.Part{MessageID: msg, SessionID: a1.SessionID, Tool: "bash", Status: "running", Start: later}); err != nil {
		t.Fatal(err)
	}
	got := discover(t, a)
	if o := find(t, got, a1.SessionID); len(o.InFlight) != 1 {
		t.Errorf("a tool part at a reused rowid was missed: in flight %v", o.InFlight)
	}
	sameAsFresh(t, dir, got, a)
}

// A database replaced by a changed copy of itself is read whole, even
// though the rows at its cursors are the same: the copy may differ in
// rows no cursor covers.
func TestRestoreReplacedByCopy(t *testing.T) {
	x := newSavedShapes(t, time.Now().Add(-time.Hour).Truncate(time.Millisecond))
	dir, path, db, sh, s := x.dir, x.path, x.db, x.sh, x.s

	// The finished session's last turn, aborted in the copy; a change in
	// place that moves no cursor and no session row.
	if _, err := db.SQL().Exec(`UPDATE message SET data = json_set(data, '$.error', json('{"name":"MessageAbortedError","data":{"message":"aborted"}}')) WHERE id = ?`, sh["finished"].AssistantMessageID); err != nil {
		t.Fatal(err)
	}
	db.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".copy", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".copy", path); err != nil {
		t.Fatal(err)
	}
	a := restarted(t, dir, s)
	got := discover(t, a)
	sameAsFresh(t, dir, got, a)
	if r := a.dbs[path]; r.fulls != 1 {
		t.Errorf("%d whole reads of a replaced database, want 1", r.fulls)
	}
}

// A database replaced by another file at the same path (a restored
// backup) is read whole.
func TestRestoreReplacedDatabase(t *testing.T) {
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	x := newSavedShapes(t, at)
	dir, path, db, s := x.dir, x.path, x.db, x.s

	// Another database with as many rows and more, moved over the old one.
	other := filepath.Join(t.TempDir(), "opencode.db")
	odb := opencodetest.MustCreate(t, other)
	shapes(t, odb, at)
	odb.Finished("/w/more", at)
	if _, err := odb.SQL().Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	odb.Close()
	db.Close()
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := os.Rename(other, path); err != nil {
		t.Fatal(err)
	}

	a := restarted(t, dir, s)
	got := discover(t, a)
	sameAsFresh(t, dir, got, a)
	if r := a.dbs[path]; r.fulls != 1 {
		t.Errorf("%d whole reads of a replaced database, want 1", r.fulls)
	}
	if got.Len() != 8 {
		t.Errorf("%d sessions, want the new file's 8", got.Len())
	}
}

// Entries that cannot be used cost a read, never a wrong session: a
// session whose entry is garbage, of another format, truncated or lying
// about its tool parts is read again; a database whose own entry is
// unusable is read whole; keys that mean nothing are dropped.
func TestRestoreUnusableEntries(t *testing.T) {
	x := newSavedShapes(t, time.Now().Add(-time.Hour).Truncate(time.Millisecond))
	dir, path, sh, s := x.dir, x.path, x.sh, x.s

	fin := sessionEntryKey(path, sh["finished"].SessionID)
	intr := sessionEntryKey(path, sh["interrupted"].SessionID)
	ab := sessionEntryKey(path, sh["aborted"].SessionID)
	child := sessionEntryKey(path, sh["child"].ChildID)
	cases := map[string]func(store){
		"garbage":        func(s store) { s[fin] = []byte("not an entry") },
		"other format":   func(s store) { s[fin][0] = checkpointFormat + 1 },
		"truncated":      func(s store) { s[intr] = s[intr][:len(s[intr])/2] },
		"trailing bytes": func(s store) { s[ab] = append(s[ab], 0) },
		"empty":          func(s store) { s[child] = nil },
		// The interrupted session saved as the finished one: a valid
		// entry, but its last assistant message is another session's.
		"wrong session": func(s store) { s[intr] = slices.Clone(s[fin]) },
		"bad keys": func(s store) {
			s["junk"] = []byte{1}
			s[sessionKeyPrefix+path] = []byte{1}
			s[dbKeyPrefix] = []byte{1}
		},
		"database entry garbage": func(s store) { s[dbEntryKey(path)] = []byte{checkpointFormat, 0xff} },
		"database entry missing": func(s store) { delete(s, dbEntryKey(path)) },
		"everything garbage": func(s store) {
			for k := range s {
				s[k] = []byte{checkpointFormat}
			}
		},
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			bad := s.clone()
			spoil(bad)
			a := restarted(t, dir, bad)
			got := discover(t, a)
			sameAsFresh(t, dir, got, a)
			wholeRead := strings.HasPrefix(name, "database") || name == "everything garbage"
			if r := a.dbs[path]; (r.fulls == 1) != wholeRead {
				t.Errorf("%d whole reads; want one only when the database entry is unusable", r.fulls)
			}
			// The next checkpoint repairs the store: afterwards it holds
			// what a restart from a good store holds.
			bad.save(a)
			if !reflect.DeepEqual(bad, s) {
				t.Errorf("store after the checkpoint: %v, want %v", keys(bad), keys(s))
			}
		})
	}
}

// Before the first pass nothing is known to be gone, so nothing is
// dropped; a database that is no longer there loses its entries, a
// database that cannot be read keeps them.
func TestCheckpointDrops(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "opencode.db")
	db := opencodetest.MustCreate(t, path)
	shapes(t, db, time.Now().Add(-time.Hour))
	other := filepath.Join(dir, "opencode-local.db")
	odb := opencodetest.MustCreate(t, other)
	odb.Finished("/w/local", time.Now().Add(-time.Hour))
	prev := newTestAdapter(t, dir, nil)
	discover(t, prev)
	s := store{}
	s.save(prev)
	if len(s) != 8+2 {
		t.Fatalf("%d entries saved, want 10: %v", len(s), keys(s))
	}

	a := restarted(t, dir, s)
	if cp := a.Checkpoint(); len(cp.Put) != 0 || len(cp.Del) != 0 {
		t.Fatalf("checkpoint before the first pass: %d puts, deletes %v", len(cp.Put), cp.Del)
	}
	// The local database is gone; the main one is garbage now (its saved
	// state is kept while it cannot be read).
	odb.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(other + suffix)
	}
	db.Close() // the last connection folds the WAL into the file
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("garbage, not SQLite: garbage, not SQLite: garbage, not SQLite: garbage, not SQLite: garbage, not SQLite"), 0o644); err != nil {
		t.Fatal(err)
	}
	obs, _ := a.Discover(context.Background(), nil)
	if len(obs.Errors) != 1 {
		t.Fatalf("errors %v, want the garbage database", obs.Errors)
	}
	cp := s.save(a)
	if len(cp.Put) != 0 || len(cp.Del) != 2 {
		t.Errorf("puts %v, deletes %v; want the local database's two entries deleted", keys(cp.Put), cp.Del)
	}
	for _, k := range cp.Del {
		if !strings.Contains(k, other) {
			t.Errorf("deleted %q, not of the vanished database", k)
		}
	}
	// Readable again: the saved state is used.
	if err := os.WriteFile(path, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	got := discover(t, a)
	sameAsFresh(t, dir, got, a)
}

// A checkpoint whose write failed (not committed) is offered again.
func TestCheckpointNotCommitted(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	db.Finished("/w", time.Now().Add(-time.Hour))
	a := newTestAdapter(t, dir, nil)
	discover(t, a)
	first := a.Checkpoint()
	if len(first.Put) != 2 {
		t.Fatalf("%d puts, want 2", len(first.Put))
	}
	second := a.Checkpoint()
	if !reflect.DeepEqual(first.Put, second.Put) {
		t.Errorf("an uncommitted checkpoint is not offered again: %v then %v", keys(first.Put), keys(second.Put))
	}
	second.Commit()
	if cp := a.Checkpoint(); len(cp.Put) != 0 {
		t.Errorf("after the commit: %v", keys(cp.Put))
	}
}

// Restarts chained as in the crash loop, with OpenCode writing between
// them: each restored pass holds and observes what a fresh read does.
func TestRestoreChained(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	rng := rand.New(rand.NewPCG(14, 2000))
	now := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	var ids []string
	s := store{}
	for round := range 30 {
		for range 1 + rng.IntN(4) {
			now = now.Add(time.Duration(1+rng.IntN(60)) * time.Second)
			switch op := rng.IntN(6); {
			case op == 0 || len(ids) == 0:
				f := db.Finished
				if rng.IntN(2) == 0 {
					f = db.InterruptedMidTool
				}
				sh, err := f(fmt.Sprintf("/w/%d", rng.IntN(5)), now)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, sh.SessionID)
			case op == 1: // a new turn, left in flight or finished
				id := ids[rng.IntN(len(ids))]
				m := opencodetest.Message{ID: opencodetest.NewID("msg"), SessionID: id, Created: now}
				if rng.IntN(2) == 0 {
					m.Completed = now
				}
				if err := db.Message(m); err != nil {
					t.Fatal(err)
				}
				if err := db.Part(opencodetest.Part{MessageID: m.ID, SessionID: id, Tool: "bash", Status: map[bool]string{true: "completed", false: "running"}[!m.Completed.IsZero()], Start: now}); err != nil {
					t.Fatal(err)
				}
			case op == 2: // every turn in flight finishes (OpenCode marks the calls)
				if _, err := db.SQL().Exec(`UPDATE part SET data = json_set(data, '$.state.status', 'error'), time_updated = ? WHERE json_extract(data, '$.state.status') IN ('running', 'pending')`, now.UnixMilli()); err != nil {
					t.Fatal(err)
				}
				if _, err := db.SQL().Exec(`UPDATE message SET data = json_set(data, '$.time.completed', ?), time_updated = ? WHERE json_extract(data, '$.role') = 'assistant' AND json_extract(data, '$.time.completed') IS NULL`, now.UnixMilli(), now.UnixMilli()); err != nil {
					t.Fatal(err)
				}
			case op == 3: // a session deleted
				i := rng.IntN(len(ids))
				if _, err := db.SQL().Exec("DELETE FROM session WHERE id = ?", ids[i]); err != nil {
					t.Fatal(err)
				}
				ids = slices.Delete(ids, i, i+1)
			case op == 4: // a revert: the session's newest message goes, the row is updated
				id := ids[rng.IntN(len(ids))]
				if _, err := db.SQL().Exec("DELETE FROM message WHERE id = (SELECT id FROM message WHERE session_id = ? ORDER BY time_created DESC, id DESC LIMIT 1)", id); err != nil {
					t.Fatal(err)
				}
				if err := db.Touch(id, now); err != nil {
					t.Fatal(err)
				}
			default: // renamed
				id := ids[rng.IntN(len(ids))]
				if _, err := db.SQL().Exec("UPDATE session SET title = ?, time_updated = ? WHERE id = ?", fmt.Sprintf("title %d", round), now.UnixMilli(), id); err != nil {
					t.Fatal(err)
				}
			}
		}
		a := restarted(t, dir, s)
		got := discover(t, a)
		sameAsFresh(t, dir, got, a)
		if t.Failed() {
			t.Fatalf("round %d", round)
		}
		s.save(a)
	}
}

// FuzzDecodeCheckpoint: no saved entry makes the decoders panic; an
// accepted session entry holds only what a read could have produced, and
// what it decodes to is saved and restored unchanged.
func FuzzDecodeCheckpoint(f *testing.F) {
	const path, id = "/home/u/.local/share/opencode/opencode.db", "ses_5d1f0a9b2ffeAbCdEfGhIjKlMn"
	at := time.UnixMilli(1750000000123)
	open := &sessionData{ID: id, Source: path, ProjectID: "prj", ParentID: "ses_parent", Directory: "/w", Title: "fix it", Version: "1.18.33",
		Created: at, Updated: at.Add(time.Second), LastWrite: at.Add(2 * time.Second),
		LastAssistant: &ocMessage{ID: "msg_1", SessionID: id, Role: "assistant", Agent: "build", ModelID: "m", Cwd: "/w", Created: at},
		Tools: []toolCall{{ocPart: ocPart{ID: "prt_1", MessageID: "msg_1", SessionID: id, Type: "tool", Tool: "task", CallID: "call_1", Status: "running",
			Title: "explore", Start: at, ChildSessionID: "ses_child"}, Created: at, Updated: at.Add(2 * time.Second)}}}
	done := &sessionData{ID: id, Source: path, Directory: "/w", Created: at, Updated: at, LastWrite: at, Archived: at,
		LastAssistant: &ocMessage{ID: "msg_2", SessionID: id, Role: "assistant", Created: at, Completed: at, ErrorName: "MessageAbortedError", ErrorMessage: "aborted"}}
	for _, b := range [][]byte{
		encodeSession(open), encodeSession(done), encodeSession(&sessionData{ID: id, Source: path}),
		encodeCursors(cursors{msgRowid: 100000, msgID: "msg_x", partRowid: 300000, partID: "prt_y", dev: 2049, ino: 1234567, idKnown: true}),
		{checkpointFormat}, {checkpointFormat, 0x80}, {checkpointFormat + 1}, nil,
	} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if c, err := decodeCursors(b); err == nil {
			if c2, err := decodeCursors(encodeCursors(c)); err != nil || c2 != c {
				t.Fatalf("cursors %+v saved and restored as %+v, %v", c, c2, err)
			}
		}
		s, err := decodeSession(b, path, id)
		if err != nil {
			return
		}
		if s.ID != id || s.Source != path || s.LastWrite.Before(s.Updated) {
			t.Fatalf("accepted %+v", s)
		}
		if m := s.LastAssistant; m != nil && (!m.Assistant() || m.SessionID != id) {
			t.Fatalf("accepted a last assistant message %+v", m)
		}
		for _, tc := range s.Tools {
			if !tc.InFlight() || tc.SessionID != id {
				t.Fatalf("accepted a tool part %+v", tc)
			}
		}
		s2, err := decodeSession(encodeSession(s), path, id)
		if err != nil || !reflect.DeepEqual(s, s2) {
			t.Fatalf("%+v saved and restored as %+v, %v", s, s2, err)
		}
	})
}
