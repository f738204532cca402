package opencode

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/session"
)

func newTestAdapter(t testing.TB, dataDir string, mod func(*Config)) *Adapter {
	t.Helper()
	cfg := Config{DataDir: dataDir, ProcRoot: filepath.Join(t.TempDir(), "proc"), BusyTimeout: 200 * time.Millisecond,
		StartTimer: opencodetest.StartTimes{}}
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg)
}

func discover(t testing.TB, a *Adapter) adapters.Observation {
	t.Helper()
	obs, err := a.Discover(context.Background(), nil)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return obs
}

func find(t testing.TB, obs adapters.Observation, id string) adapters.Observed {
	t.Helper()
	for _, o := range obs.All() {
		if o.UpstreamID == id {
			return o
		}
	}
	t.Fatalf("session %s not observed (have %d sessions, errors %v)", id, obs.Len(), obs.Errors)
	return adapters.Observed{}
}

func issueKeys(is []adapters.Issue, kind session.ProblemKind) []string {
	var out []string
	for _, i := range is {
		if i.Kind == kind {
			out = append(out, i.Key)
		}
	}
	return out
}

func TestDiscoverShapes(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "opencode.db")
	db := opencodetest.MustCreate(t, dbPath)
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	fin, err := db.Finished("/w/fin", at)
	if err != nil {
		t.Fatal(err)
	}
	intr, err := db.InterruptedMidTool("/w/intr", at)
	if err != nil {
		t.Fatal(err)
	}
	child, err := db.Child("/w/child", at, "running")
	if err != nil {
		t.Fatal(err)
	}
	q, err := db.WaitingOnQuestion("/w/q", at)
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t, dir, nil)
	obs := discover(t, a)
	if len(obs.Errors) != 0 || obs.Len() != 5 {
		t.Fatalf("got %d sessions, errors %v; want 5, none", obs.Len(), obs.Errors)
	}

	f := find(t, obs, fin.SessionID)
	if f.Source != dbPath || f.Cwd != "/w/fin" || f.Title != "finished session" || len(f.InFlight) != 0 || len(f.Owners) != 0 {
		t.Errorf("finished: %+v", f)
	}
	if f.Activity != session.ActivityIdle || !f.LastActivity.Equal(at) {
		t.Errorf("finished: activity %s (%s), last %v; want idle at %v", f.Activity, f.ActivityEvidence, f.LastActivity, at)
	}

	i := find(t, obs, intr.SessionID)
	if got := issueKeys(i.InFlight, session.ProblemIncompleteMessage); len(got) != 1 || got[0] != intr.AssistantMessageID {
		t.Errorf("interrupted: incomplete_message keys %v, want [%s]", got, intr.AssistantMessageID)
	}
	if got := issueKeys(i.InFlight, session.ProblemOrphanedToolCall); len(got) != 1 || got[0] != intr.ToolPartID {
		t.Errorf("interrupted: orphaned_tool_call keys %v, want [%s]", got, intr.ToolPartID)
	}
	for _, is := range i.InFlight {
		if is.Since.IsZero() || is.Detail == "" {
			t.Errorf("interrupted: issue without since or detail: %+v", is)
		}
		if is.Kind == session.ProblemOrphanedToolCall && !strings.Contains(is.Detail, "bash") {
			t.Errorf("tool issue does not name the tool: %q", is.Detail)
		}
	}
	if i.Activity != session.ActivityBusy || !i.LastActivity.Equal(at) {
		t.Errorf("interrupted: activity %s, last %v", i.Activity, i.LastActivity)
	}

	// The parent's task part runs while its child works: the parent judges
	// the leaf and takes the child's last write.
	p := find(t, obs, child.SessionID)
	c := find(t, obs, child.ChildID)
	if p.Activity != session.ActivityBusy || !strings.Contains(p.ActivityEvidence, child.ChildID) {
		t.Errorf("parent: activity %s (%s); want busy through the child", p.Activity, p.ActivityEvidence)
	}
	if !p.LastActivity.Equal(c.LastActivity) || !c.LastActivity.Equal(at) {
		t.Errorf("parent last activity %v, child %v, want %v", p.LastActivity, c.LastActivity, at)
	}
	if got := issueKeys(p.InFlight, session.ProblemOrphanedToolCall); len(got) != 1 || got[0] != child.ToolPartID {
		t.Errorf("parent in flight %v, want the task part", got)
	}
	if len(c.InFlight) != 2 {
		t.Errorf("child in flight %v, want message and tool", c.InFlight)
	}

	w := find(t, obs, q.SessionID)
	if w.Activity != session.ActivityWaiting || !strings.Contains(w.ActivityEvidence, "question") {
		t.Errorf("question: activity %s (%s), want waiting", w.Activity, w.ActivityEvidence)
	}
}

func TestDiscoverChildFinishedParentStillRunning(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	ch, err := db.Child("/w", time.Now().Add(-time.Hour), "completed")
	if err != nil {
		t.Fatal(err)
	}
	obs := discover(t, newTestAdapter(t, dir, nil))
	c := find(t, obs, ch.ChildID)
	if len(c.InFlight) != 0 || c.Activity != session.ActivityIdle {
		t.Errorf("finished child: %+v", c)
	}
	p := find(t, obs, ch.SessionID)
	if len(p.InFlight) == 0 || p.Activity != session.ActivityBusy {
		t.Errorf("parent whose task never closed: %+v", p)
	}
}

func TestDiscoverIncremental(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	at := time.Now().Add(-time.Hour)
	fin, _ := db.Finished("/w", at)
	fin2, _ := db.Finished("/w2", at)
	intr, _ := db.InterruptedMidTool("/w", at)
	a := newTestAdapter(t, dir, nil)
	discover(t, a)
	r := a.dbs[filepath.Join(dir, "opencode.db")]
	before := map[string]*sessionData{}
	for id, s := range r.sessions {
		before[id] = s
	}

	// The interrupted session's tool finishes; a new message lands in fin;
	// nothing happens to fin2.
	later := time.Now()
	if err := db.Part(opencodetest.Part{ID: intr.ToolPartID, MessageID: intr.AssistantMessageID, SessionID: intr.SessionID, Tool: "bash", Status: "completed", Start: at, End: later, Updated: later}); err != nil {
		t.Fatal(err)
	}
	if err := db.Message(opencodetest.Message{ID: intr.AssistantMessageID, SessionID: intr.SessionID, Created: at, Completed: later}); err != nil {
		t.Fatal(err)
	}
	if err := db.Message(opencodetest.Message{SessionID: fin.SessionID, Created: later}); err != nil {
		t.Fatal(err)
	}
	newer, _ := db.InterruptedMidTool("/w3", later)
	obs := discover(t, a)
	if obs.Len() != 4 {
		t.Fatalf("%d sessions, want 4", obs.Len())
	}
	if r.sessions[fin2.SessionID] != before[fin2.SessionID] {
		t.Error("an unchanged session was read again")
	}
	if r.sessions[fin.SessionID] == before[fin.SessionID] {
		t.Error("a session with a new message was not read again")
	}
	if o := find(t, obs, intr.SessionID); len(o.InFlight) != 0 || o.Activity != session.ActivityIdle {
		t.Errorf("finished turn still in flight: %+v", o)
	}
	if o := find(t, obs, newer.SessionID); len(o.InFlight) != 2 {
		t.Errorf("new session: %+v", o)
	}
	if o := find(t, obs, fin.SessionID); !o.LastActivity.After(at.Add(time.Minute)) {
		t.Errorf("new message did not move last activity: %v", o.LastActivity)
	}

	// A deleted session disappears (deleting rows moves the rowid cursor
	// back, which forces a full pass).
	if _, err := db.SQL().Exec("DELETE FROM session WHERE id = ?", fin2.SessionID); err != nil {
		t.Fatal(err)
	}
	obs = discover(t, a)
	if obs.Len() != 3 {
		t.Fatalf("after delete: %d sessions, want 3", obs.Len())
	}
}

func TestDiscoverNoDataDir(t *testing.T) {
	a := newTestAdapter(t, filepath.Join(t.TempDir(), "absent"), nil)
	obs, err := a.Discover(context.Background(), nil)
	if err != nil || obs.Len() != 0 || len(obs.Errors) != 0 {
		t.Fatalf("absent data dir: %+v, %v", obs, err)
	}
	if got := a.WatchPaths(); len(got) != 1 {
		t.Fatalf("watch paths %v", got)
	}
}

// A writer holding the lock in rollback-journal mode blocks readers: the
// database is an input error, quickly, and its sessions are left out so
// their statuses stay as they were. Other databases are still read.
func TestDiscoverLockedDatabase(t *testing.T) {
	dir := t.TempDir()
	locked, err := opencodetest.CreateJournal(filepath.Join(dir, "opencode.db"), "DELETE")
	if err != nil {
		t.Fatal(err)
	}
	defer locked.Close()
	lockedSh, _ := locked.Finished("/w", time.Now())
	a := newTestAdapter(t, dir, nil)
	discover(t, a) // a first pass while unlocked

	ctx := context.Background()
	conn, err := locked.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK")

	start := time.Now()
	obs, err := a.Discover(ctx, nil)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("only input locked: err %v, want a locked error", err)
	}
	if took > 3*time.Second {
		t.Fatalf("Discover took %s on a locked database", took)
	}
	if len(obs.Errors) != 1 || obs.Errors[0].Input != filepath.Join(dir, "opencode.db") {
		t.Fatalf("errors %v", obs.Errors)
	}
	if ex, err := a.exists(ctx, lockedSh.SessionID); ex != adapters.ExistenceUnknown || err == nil {
		t.Fatalf("Exists on a locked database: %v, %v; want unknown with a reason", ex, err)
	}

	// With a second, healthy database the pass succeeds and names the
	// locked one.
	other := opencodetest.MustCreate(t, filepath.Join(dir, "opencode-local.db"))
	otherSh, _ := other.Finished("/w", time.Now())
	obs, err = a.Discover(ctx, nil)
	if err != nil {
		t.Fatalf("Discover with one healthy database: %v", err)
	}
	if len(obs.Errors) != 1 || !strings.Contains(obs.Errors[0].Error(), "locked") {
		t.Fatalf("errors %v", obs.Errors)
	}
	find(t, obs, otherSh.SessionID)
	for _, o := range obs.All() {
		if o.UpstreamID == lockedSh.SessionID {
			t.Fatal("a session of the locked database was reported (it must keep its last known state)")
		}
	}
}

// In WAL mode (OpenCode's) BEGIN EXCLUSIVE does not block readers: the
// pass reads the last committed state without waiting.
func TestDiscoverWALWriterDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	sh, _ := db.Finished("/w", time.Now())
	ctx := context.Background()
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK")
	if _, err := conn.ExecContext(ctx, "UPDATE session SET title = 'uncommitted'"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	obs := discover(t, newTestAdapter(t, dir, nil))
	if took := time.Since(start); took > time.Second {
		t.Fatalf("read took %s", took)
	}
	if o := find(t, obs, sh.SessionID); o.Title != "finished session" {
		t.Fatalf("read uncommitted data: %q", o.Title)
	}
}

// OpenCode's first start creates the file, then runs its migrations: a
// database with no table at all is not yet written, not a schema change.
func TestDiscoverDatabaseBeingCreated(t *testing.T) {
	dir := t.TempDir()
	db, err := opencodetest.CreateWithDDL(filepath.Join(dir, "opencode.db"), "PRAGMA user_version = 0;")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	a := newTestAdapter(t, dir, nil)
	obs, err := a.Discover(context.Background(), nil)
	if err != nil || obs.Len() != 0 || len(obs.Errors) != 0 {
		t.Fatalf("empty database: %v, %d sessions, errors %v", err, obs.Len(), obs.Errors)
	}
	// Once the tables and a session are there, the next pass reads them.
	db2, err := opencodetest.CreateWithDDL(filepath.Join(dir, "opencode.db"), opencodetest.DDL)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	s, err := db2.InterruptedMidTool("/w", time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	obs, err = a.Discover(context.Background(), nil)
	if err != nil || obs.Len() != 1 || obs.All()[0].UpstreamID != s.SessionID {
		t.Fatalf("after the migrations: %v, %+v", err, obs.All())
	}
}

func TestDiscoverSchemaChanged(t *testing.T) {
	dir := t.TempDir()
	ddl := strings.Replace(opencodetest.DDL, "\tsession_id TEXT NOT NULL,\n\ttime_created INTEGER NOT NULL,\n\ttime_updated INTEGER NOT NULL,\n\tdata TEXT NOT NULL\n);\nCREATE INDEX part_message_id_id_idx",
		"\tsid TEXT NOT NULL,\n\ttime_created INTEGER NOT NULL,\n\ttime_updated INTEGER NOT NULL,\n\tpayload TEXT NOT NULL\n);\nCREATE INDEX part_message_id_id_idx", 1)
	ddl = strings.Replace(ddl, "CREATE INDEX part_session_idx ON part (session_id);", "", 1)
	if ddl == opencodetest.DDL {
		t.Fatal("test DDL edit did not apply")
	}
	ddl = strings.Replace(ddl, "CREATE TABLE message (", "CREATE TABLE message_v2 (", 1)
	ddl = strings.Replace(ddl, "ON message (session_id", "ON message_v2 (session_id", 1)
	db, err := opencodetest.CreateWithDDL(filepath.Join(dir, "opencode.db"), ddl)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = newTestAdapter(t, dir, nil).Discover(context.Background(), nil)
	var se *schemaError
	if !errors.As(err, &se) {
		t.Fatalf("err %v, want a schemaError", err)
	}
	msg := err.Error()
	for _, want := range []string{"table message is missing", "table part lacks column(s) session_id, data", "1.18.33"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
}

func TestDiscoverCorruptFile(t *testing.T) {
	dir := t.TempDir()
	good := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	sh, _ := good.Finished("/w", time.Now())
	bad := filepath.Join(dir, "opencode-beta.db")
	junk := make([]byte, 8192)
	for i := range junk {
		junk[i] = byte(i*7 + 3)
	}
	if err := os.WriteFile(bad, junk, 0o644); err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t, dir, nil)
	obs, err := a.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Errors) != 1 || obs.Errors[0].Input != bad || !strings.Contains(obs.Errors[0].Error(), "not an SQLite database") {
		t.Fatalf("errors %v", obs.Errors)
	}
	find(t, obs, sh.SessionID)

	// A data dir holding only a corrupt database fails as a whole, and
	// another data dir (another adapter) is unaffected.
	dir2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir2, "opencode.db"), junk, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := newTestAdapter(t, dir2, nil).Discover(context.Background(), nil); err == nil {
		t.Fatal("a data dir with only a corrupt database: no error")
	}
	find(t, discover(t, a), sh.SessionID)
}

func TestDiscoverLegacyOnly(t *testing.T) {
	dir := t.TempDir()
	l := opencodetest.NewLegacy(dir)
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	fin, err := l.Finished("/old/fin", at)
	if err != nil {
		t.Fatal(err)
	}
	intr, err := l.InterruptedMidTool("/old/intr", at)
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t, dir, nil)
	obs := discover(t, a)
	if obs.Len() != 2 {
		t.Fatalf("%d sessions, want 2", obs.Len())
	}
	f := find(t, obs, fin.SessionID)
	if f.Source != filepath.Join(dir, "storage") || f.Cwd != "/old/fin" || len(f.InFlight) != 0 || f.LastActivity.IsZero() {
		t.Errorf("legacy finished: %+v", f)
	}
	i := find(t, obs, intr.SessionID)
	if got := issueKeys(i.InFlight, session.ProblemOrphanedToolCall); len(got) != 1 || got[0] != intr.ToolPartID {
		t.Errorf("legacy interrupted: %+v", i.InFlight)
	}
	if got := issueKeys(i.InFlight, session.ProblemIncompleteMessage); len(got) != 1 {
		t.Errorf("legacy interrupted: %+v", i.InFlight)
	}
	watch := a.WatchPaths()
	if len(watch) < 3 {
		t.Errorf("watch paths %v: want the data dir and legacy dirs", watch)
	}
	if ex, err := a.exists(context.Background(), fin.SessionID); ex != adapters.Exists || err != nil {
		t.Errorf("Exists(legacy) = %v, %v", ex, err)
	}
	// Unchanged legacy sessions are not parsed again.
	before := a.legacy.cache[fin.SessionID]
	discover(t, a)
	if a.legacy.cache[fin.SessionID] != before {
		t.Error("an unchanged legacy session was read again")
	}
}

func TestDiscoverDatabaseWinsOverLegacy(t *testing.T) {
	dir := t.TempDir()
	at := time.Now().Add(-time.Hour)
	s, err := opencodetest.NewLegacy(dir).Session(opencodetest.Session{Directory: "/old", Title: "migrated", Created: at})
	if err != nil {
		t.Fatal(err)
	}
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	if err := db.Session(opencodetest.Session{ID: s.ID, Directory: "/old", Title: "from db", Created: at}); err != nil {
		t.Fatal(err)
	}
	o := find(t, discover(t, newTestAdapter(t, dir, nil)), s.ID)
	if o.Title != "from db" || o.Source != filepath.Join(dir, "opencode.db") {
		t.Fatalf("duplicate id: %+v", o)
	}
}

func TestDiscoverOddDataDirPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my data #1 ?x=y%20")
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	sh, _ := db.Finished("/w", time.Now())
	o := find(t, discover(t, newTestAdapter(t, dir, nil)), sh.SessionID)
	if o.Source != filepath.Join(dir, "opencode.db") {
		t.Fatalf("source %q", o.Source)
	}
}

// A pass over a database whose files have not changed since the last read
// (and had been still for kit.RacyWindow then) reads nothing; a write, a
// recent change, or the periodic full read makes it read.
func TestDiscoverSkipsAnUnchangedDatabase(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "opencode.db")
	db := opencodetest.MustCreate(t, path)
	at := time.Now().Add(-time.Hour)
	fin, _ := db.Finished("/w", at)
	settle := func() {
		t.Helper()
		old := time.Now().Add(-time.Hour)
		for _, f := range []string{path, path + "-wal"} {
			if err := os.Chtimes(f, old, old); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}
	settle()
	a := newTestAdapter(t, dir, func(c *Config) { c.FullEvery = time.Hour })
	discover(t, a)
	r := a.dbs[path]
	if r.unchanged != 0 {
		t.Fatalf("first pass: %d unchanged skips", r.unchanged)
	}
	discover(t, a)
	if r.unchanged != 1 {
		t.Fatalf("second pass over still files: %d unchanged skips, want 1", r.unchanged)
	}

	// A new message: the -wal grows, the pass reads it.
	if err := db.Message(opencodetest.Message{SessionID: fin.SessionID, Created: time.Now()}); err != nil {
		t.Fatal(err)
	}
	obs := discover(t, a)
	if r.unchanged != 1 {
		t.Fatal("a pass after a write read nothing")
	}
	if o := find(t, obs, fin.SessionID); !o.LastActivity.After(at.Add(time.Minute)) {
		t.Errorf("the new message was not seen: last activity %v", o.LastActivity)
	}
	// Written within kit.RacyWindow of that read: its stat is not trusted.
	discover(t, a)
	if r.unchanged != 1 {
		t.Fatal("a pass right after a write trusted a stat taken within kit.RacyWindow of it")
	}
	// Still again: one read to take a trusted stat, then skips.
	settle()
	discover(t, a)
	discover(t, a)
	if r.unchanged != 2 {
		t.Fatalf("after the files settled: %d unchanged skips, want 2", r.unchanged)
	}
	// The periodic full read is not skipped.
	fulls := r.fulls
	if err := r.read(context.Background(), time.Now().Add(2*time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	if r.fulls != fulls+1 || r.unchanged != 2 {
		t.Fatalf("periodic full read: fulls %d -> %d, unchanged %d", fulls, r.fulls, r.unchanged)
	}
}

// TestIdlePassIsTheLastOne: an adapter that keeps its pass's maps and
// list from one pass to the next sees, after each change, what a fresh
// adapter sees; and a pass where nothing changed hands the tracker the
// same quiet set, with nothing in its list.
func TestIdlePassIsTheLastOne(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	at := time.Now().Add(-time.Hour)
	fin, _ := db.Finished("/w", at)
	intr, _ := db.InterruptedMidTool("/w", at)
	if _, err := db.Child("/w3", at, "completed"); err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t, dir, nil)
	for _, step := range []struct {
		what   string
		change func()
	}{
		{"the first pass", func() {}},
		{"a new session", func() { db.Finished("/w2", at) }},
		{"a tool finished", func() {
			later := time.Now()
			if err := db.Part(opencodetest.Part{ID: intr.ToolPartID, MessageID: intr.AssistantMessageID, SessionID: intr.SessionID,
				Tool: "bash", Status: "completed", Start: at, End: later, Updated: later}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a new message", func() {
			if err := db.Message(opencodetest.Message{SessionID: fin.SessionID, Created: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a session deleted", func() {
			if _, err := db.SQL().Exec("DELETE FROM session WHERE id = ?", fin.SessionID); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		step.change()
		obs := discover(t, a)
		fresh := discover(t, newTestAdapter(t, dir, nil))
		got, want := obs.All(), fresh.All()
		if len(got) != len(want) {
			t.Fatalf("%s: %d sessions, a fresh adapter %d", step.what, len(got), len(want))
		}
		for i := range got {
			if !got[i].Equal(&want[i]) {
				t.Fatalf("%s: the pass saw\n%+v\na fresh adapter\n%+v", step.what, got[i], want[i])
			}
		}
		again := discover(t, a)
		if again.Quiet == nil || again.Quiet != obs.Quiet || len(again.Sessions) != 0 {
			t.Fatalf("%s, then nothing: a new set (%v) or a list of %d", step.what, again.Quiet != obs.Quiet, len(again.Sessions))
		}
	}
}
