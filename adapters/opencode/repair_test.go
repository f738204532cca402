package opencode

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/session"
)

// repairFixture is a data dir with a real OpenCode database, an empty
// fixture /proc (no process holds anything) and a backup dir.
type repairFixture struct {
	*fixture
	backups string
}

func newRepairFixture(t *testing.T) *repairFixture {
	f := &repairFixture{fixture: newFixture(t), backups: filepath.Join(t.TempDir(), "backups")}
	if err := os.MkdirAll(f.tree.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *repairFixture) adapter(mod func(*Config)) *Adapter {
	return f.fixture.adapter(func(c *Config) {
		c.BackupDir = f.backups
		c.AbortWait = 300 * time.Millisecond
		if mod != nil {
			mod(c)
		}
	})
}

func (f *repairFixture) target(sessionID, dir string) adapters.RepairTarget {
	return adapters.RepairTarget{UpstreamID: sessionID, Source: f.dbPath, Root: f.dir, Cwd: dir}
}

func count(steps []session.Step) map[string]int {
	n := map[string]int{}
	for _, s := range steps {
		n[s.Outcome]++
	}
	return n
}

// rows returns every message and part row's data of a session, by id: the
// "nothing written" check compares these byte for byte.
func rows(t *testing.T, dbPath, sessionID string) map[string]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	for _, q := range []string{"SELECT id, time_updated, data FROM message WHERE session_id = ?", "SELECT id, time_updated, data FROM part WHERE session_id = ?"} {
		rs, err := db.Query(q, sessionID)
		if err != nil {
			t.Fatal(err)
		}
		for rs.Next() {
			var id, data string
			var upd int64
			if err := rs.Scan(&id, &upd, &data); err != nil {
				t.Fatal(err)
			}
			out[id] = strconv.FormatInt(upd, 10) + " " + data
		}
		rs.Close()
	}
	return out
}

func rowData(t *testing.T, db *sql.DB, table, id string) map[string]any {
	t.Helper()
	var data string
	if err := db.QueryRow("SELECT data FROM "+table+" WHERE id = ?", id).Scan(&data); err != nil {
		t.Fatalf("%s %s: %v", table, id, err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func path(m map[string]any, keys ...string) any {
	var v any = m
	for _, k := range keys {
		o, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = o[k]
	}
	return v
}

// checkRepaired asserts the shape OpenCode itself leaves after an abort.
func checkRepaired(t *testing.T, dbPath string, sh opencodetest.Shape) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := rowData(t, db, "part", sh.ToolPartID)
	if path(p, "state", "status") != "error" || path(p, "state", "error") != abortedToolError || path(p, "state", "metadata", "interrupted") != true {
		t.Errorf("part state after repair: %v", p["state"])
	}
	if path(p, "state", "time", "end") == nil || path(p, "state", "time", "start") == nil || path(p, "state", "input", "command") == nil {
		t.Errorf("part lost its times or input: %v", p["state"])
	}
	if path(p, "tool") != "bash" || path(p, "callID") == nil || path(p, "state", "metadata", "description") != "long job" {
		t.Errorf("fields outside the state changed: %v", p)
	}
	m := rowData(t, db, "message", sh.AssistantMessageID)
	if path(m, "time", "completed") == nil || path(m, "error", "name") != abortedMsgName || path(m, "time", "created") == nil || path(m, "modelID") != "fake-model" {
		t.Errorf("message after repair: %v", m)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM part WHERE session_id = ? AND "+inFlightFilter, sh.SessionID).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d parts still pending/running (%v)", n, err)
	}
}

// After an offline repair no part is pending or running, the message has
// time.completed, other sessions are untouched, a backup of the state
// before exists and opens, and a second repair plans nothing.
func TestOfflineRepair(t *testing.T) {
	f := newRepairFixture(t)
	last := f.now.Add(-2 * time.Minute)
	sh, _ := f.db.InterruptedMidTool("/w/a", last)
	other, _ := f.db.InterruptedMidTool("/w/a", last)
	fin, _ := f.db.Finished("/w/b", last)
	otherBefore := rows(t, f.dbPath, other.SessionID)
	before := rows(t, f.dbPath, sh.SessionID)
	a := f.adapter(nil)
	ctx := context.Background()
	// Warm the incremental reader: the check at the end is then an
	// incremental pass, which must see rows rewritten in place (a repair
	// leaves time_updated alone).
	if o := find(t, discover(t, a), sh.SessionID); len(o.InFlight) != 2 {
		t.Fatalf("before: %+v", o.InFlight)
	}

	plan, err := a.PlanRepair(ctx, f.target(sh.SessionID, "/w/a"))
	if err != nil {
		t.Fatal(err)
	}
	if c := count(plan); c[session.OutcomePlanned] != 3 || len(plan) != 3 || plan[0].Action != "back up database" {
		t.Fatalf("plan %+v", plan)
	}
	if got := rows(t, f.dbPath, sh.SessionID); !equalMaps(got, before) {
		t.Fatal("a plan wrote")
	}
	if _, err := os.Stat(f.backups); !os.IsNotExist(err) {
		t.Fatalf("a plan made a backup: %v", err)
	}

	done, err := a.ApplyRepair(ctx, f.target(sh.SessionID, "/w/a"))
	if err != nil {
		t.Fatal(err)
	}
	if c := count(done); c[session.OutcomeDone] != 3 || len(done) != 3 {
		t.Fatalf("apply %+v", done)
	}
	checkRepaired(t, f.dbPath, sh)
	if got := rows(t, f.dbPath, other.SessionID); !equalMaps(got, otherBefore) {
		t.Error("another session was touched")
	}

	again, err := a.PlanRepair(ctx, f.target(sh.SessionID, "/w/a"))
	if err != nil || count(again)[session.OutcomePlanned] != 0 || again[0].Action != "nothing in flight" {
		t.Fatalf("a repaired session plans %+v (%v)", again, err)
	}
	if again, _ := a.PlanRepair(ctx, f.target(fin.SessionID, "/w/b")); count(again)[session.OutcomePlanned] != 0 {
		t.Fatalf("a finished session plans %+v", again)
	}

	// The backup is the state before, a database that opens and checks.
	bs, err := a.backups(f.dbPath)
	if err != nil || len(bs) != 1 || !strings.Contains(done[0].Detail, bs[0]) {
		t.Fatalf("backups %v (%v); step %+v", bs, err, done[0])
	}
	if fi, _ := os.Stat(bs[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("backup mode %v: it holds conversations", fi.Mode())
	}
	if got := integrity(t, bs[0]); got != "ok" {
		t.Fatalf("backup integrity_check: %s", got)
	}
	if got := rows(t, bs[0], sh.SessionID); !equalMaps(got, before) {
		t.Error("the backup is not the state before the repair")
	}

	// The adapter now sees nothing in flight, incrementally.
	obs := discover(t, a)
	if o := find(t, obs, sh.SessionID); len(o.InFlight) != 0 {
		t.Errorf("in flight after repair: %+v", o.InFlight)
	}
	if o := find(t, obs, other.SessionID); len(o.InFlight) != 2 {
		t.Errorf("the other session: %+v", o.InFlight)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func integrity(t *testing.T, path string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var res string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&res); err != nil {
		t.Fatalf("integrity_check %s: %v", path, err)
	}
	return res
}

// Rows written within the grace window are a turn that may still be
// written: pending, nothing written.
func TestOfflineRepairGrace(t *testing.T) {
	f := newRepairFixture(t)
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-10*time.Second))
	before := rows(t, f.dbPath, sh.SessionID)
	steps, err := f.adapter(nil).ApplyRepair(context.Background(), f.target(sh.SessionID, "/w/a"))
	if err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomePending || !strings.Contains(steps[0].Detail, "still for 1m0s") {
		t.Fatalf("%+v %v", steps, err)
	}
	if !equalMaps(rows(t, f.dbPath, sh.SessionID), before) {
		t.Fatal("written inside the grace window")
	}
	steps, _ = f.adapter(func(c *Config) { c.RepairGrace = 5 * time.Second }).ApplyRepair(context.Background(), f.target(sh.SessionID, "/w/a"))
	if count(steps)[session.OutcomeDone] != 3 {
		t.Fatalf("with a 5s grace: %+v", steps)
	}
}

// Another connection holds BEGIN IMMEDIATE (a writer mid transaction):
// pending, nothing written, no backup, and no wait past the busy timeout.
func TestOfflineRepairLocked(t *testing.T) {
	f := newRepairFixture(t)
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	before := rows(t, f.dbPath, sh.SessionID)
	ctx := context.Background()
	conn, err := f.db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	a := f.adapter(func(c *Config) { c.WriteBusyTimeout = 200 * time.Millisecond })
	start := time.Now()
	steps, err := a.ApplyRepair(ctx, f.target(sh.SessionID, "/w/a"))
	took := time.Since(start)
	if err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomePending || !strings.Contains(steps[0].Detail, "locked") {
		t.Fatalf("%+v %v", steps, err)
	}
	if took > 2*time.Second {
		t.Fatalf("took %s with a 200ms busy timeout", took)
	}
	t.Logf("locked database: pending after %s", took.Round(time.Millisecond))
	if bs, _ := a.backups(f.dbPath); len(bs) != 0 {
		t.Errorf("a locked repair left backups %v", bs)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if !equalMaps(rows(t, f.dbPath, sh.SessionID), before) {
		t.Fatal("written while locked")
	}
	// Once the lock is gone the same repair goes through.
	if steps, err := a.ApplyRepair(ctx, f.target(sh.SessionID, "/w/a")); err != nil || count(steps)[session.OutcomeDone] != 3 {
		t.Fatalf("after the lock: %+v %v", steps, err)
	}
	checkRepaired(t, f.dbPath, sh)
}

// A schema that is not the one checked is a clear error, before anything
// is written.
func TestRepairSchemaChanged(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "opencode.db")
	ddl := strings.Replace(opencodetest.DDL, "\tdata TEXT NOT NULL\n);\nCREATE INDEX part_message_id_id_idx", "\tpayload TEXT NOT NULL\n);\nCREATE INDEX part_message_id_id_idx", 1)
	db, err := opencodetest.CreateWithDDL(dbPath, ddl)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.SQL().Exec(`INSERT INTO project (id, worktree, time_created, time_updated) VALUES ('p', '/w', 1, 1);
		INSERT INTO session (id, project_id, slug, directory, title, version, time_created, time_updated) VALUES ('ses_x', 'p', 's', '/w', 't', 'v', 1, 1)`); err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t, dir, func(c *Config) { c.BackupDir = t.TempDir() })
	_, err = a.ApplyRepair(context.Background(), adapters.RepairTarget{UpstreamID: "ses_x", Source: dbPath})
	var se *schemaError
	if err == nil || !strings.Contains(err.Error(), "schema changed") || !strings.Contains(err.Error(), "part lacks column(s) data") {
		t.Fatalf("err %v (%T), want a schemaError", err, se)
	}
}

// Without a backup dir nothing is written.
func TestOfflineRepairNeedsBackupDir(t *testing.T) {
	f := newRepairFixture(t)
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	before := rows(t, f.dbPath, sh.SessionID)
	steps, err := f.adapter(func(c *Config) { c.BackupDir = "" }).ApplyRepair(context.Background(), f.target(sh.SessionID, "/w/a"))
	if err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomeFailed || !strings.Contains(steps[0].Error, "backup") {
		t.Fatalf("%+v %v", steps, err)
	}
	if !equalMaps(rows(t, f.dbPath, sh.SessionID), before) {
		t.Fatal("written without a backup")
	}
}

// Backups are kept to the newest BackupKeep.
func TestBackupRetention(t *testing.T) {
	f := newRepairFixture(t)
	a := f.adapter(func(c *Config) { c.BackupKeep = 2 })
	var ids []string
	for i := 0; i < 4; i++ {
		sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
		ids = append(ids, sh.SessionID)
	}
	for i, id := range ids {
		f.now = f.now.Add(time.Second) // distinct backup names
		if steps, err := a.ApplyRepair(context.Background(), f.target(id, "/w/a")); err != nil || count(steps)[session.OutcomeDone] != 3 {
			t.Fatalf("repair %d: %+v %v", i, steps, err)
		}
	}
	bs, err := a.backups(f.dbPath)
	if err != nil || len(bs) != 2 || !strings.Contains(bs[0], ids[3]) || !strings.Contains(bs[1], ids[2]) {
		t.Fatalf("backups %v (%v): want the newest two", bs, err)
	}
}

// The session is found in another opencode*.db when its source moved,
// and a session no database has is reported, not an error.
func TestRepairLocate(t *testing.T) {
	f := newRepairFixture(t)
	local := opencodetest.MustCreate(t, filepath.Join(f.dir, "opencode-local.db"))
	sh, _ := local.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	a := f.adapter(nil)
	steps, err := a.PlanRepair(context.Background(), adapters.RepairTarget{UpstreamID: sh.SessionID, Cwd: "/w/a"})
	if err != nil || count(steps)[session.OutcomePlanned] != 3 || steps[0].Target != local.Path {
		t.Fatalf("%+v %v", steps, err)
	}
	steps, err = a.PlanRepair(context.Background(), adapters.RepairTarget{UpstreamID: "ses_gone"})
	if err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomeSkipped {
		t.Fatalf("missing session: %+v %v", steps, err)
	}
	if _, err := a.PlanRepair(context.Background(), adapters.RepairTarget{UpstreamID: "../x"}); err == nil {
		t.Fatal("a path as a session id was accepted")
	}
}

// The test binary doubles as a process that repairs sessions offline in a
// loop (helperRepairEnv names the database, helperRepairIDs the sessions,
// helperRepairBackups the backup dir), printing "repaired ID" after each
// commit, so a test can kill -9 it at any point of a repair.
const (
	helperRepairEnv     = "SESSIOND_OPENCODE_REPAIR_HELPER"
	helperRepairIDs     = "SESSIOND_OPENCODE_REPAIR_IDS"
	helperRepairBackups = "SESSIOND_OPENCODE_REPAIR_BACKUPS"
)

func repairHelperMain(dbPath string) {
	a := New(Config{DataDir: filepath.Dir(dbPath), ProcRoot: "/proc", BackupDir: os.Getenv(helperRepairBackups), BackupKeep: 3})
	w := bufio.NewWriter(os.Stdout)
	for _, id := range strings.Split(os.Getenv(helperRepairIDs), ",") {
		steps, err := a.ApplyRepair(context.Background(), adapters.RepairTarget{UpstreamID: id, Source: dbPath})
		if err != nil {
			fmt.Fprintln(os.Stderr, "repair", id, err)
			os.Exit(3)
		}
		if steps[len(steps)-1].Outcome != session.OutcomeDone {
			fmt.Fprintf(os.Stderr, "repair %s: %+v\n", id, steps)
			os.Exit(3)
		}
		fmt.Fprintln(w, "repaired", id)
		w.Flush()
	}
	fmt.Println("all done")
	time.Sleep(time.Minute)
}
