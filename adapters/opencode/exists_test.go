package opencode

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
)

func TestExists(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	s, _ := f.db.Finished("/w", f.now)
	a := f.adapter(nil)
	for _, c := range []struct {
		id   string
		want adapters.Existence
	}{
		{s.SessionID, adapters.Exists},
		{"ses_doesnotexist", adapters.Missing},
		{"../../etc/passwd", adapters.Missing},
		{"", adapters.Missing},
	} {
		got, err := a.exists(ctx, c.id)
		if got != c.want || err != nil {
			t.Errorf("Exists(%q) = %v, %v; want %v", c.id, got, err, c.want)
		}
	}
	none := newTestAdapter(t, filepath.Join(t.TempDir(), "absent"), nil)
	if got, err := none.exists(ctx, s.SessionID); got != adapters.Missing || err != nil {
		t.Errorf("no data dir: %v, %v", got, err)
	}
	if adapters.Exists.String() != "exists" || adapters.Missing.String() != "missing" || adapters.ExistenceUnknown.String() != "unknown" {
		t.Error("Existence strings")
	}
}

// When the database cannot answer, a known server decides: 200 exists,
// 404 NotFoundError missing, 5xx (or a timeout) unknown.
func TestExistsAsksServerWhenDatabaseLocked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := opencodetest.CreateJournal(filepath.Join(dir, "opencode.db"), "DELETE")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, _ := db.Finished("/w", time.Now())
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	srv.Sessions[s.SessionID] = true
	tree := opencodetest.ProcTree{Root: filepath.Join(t.TempDir(), "proc")}
	tree.OpenFiles(1000, "/dev/null")
	if err := tree.Listen(1000, srv.Port(), 1000); err != nil {
		t.Fatal(err)
	}
	snap := opencodetest.Snapshot(opencodetest.Proc(1000, 1, "/srv", "opencode", "serve", "--port", strconv.Itoa(srv.Port())))
	a := New(Config{DataDir: dir, ProcRoot: tree.Root, StartTimer: opencodetest.StartTimes{}, BusyTimeout: 100 * time.Millisecond})
	if _, err := a.Discover(ctx, snap); err != nil {
		t.Fatal(err)
	}
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	defer conn.ExecContext(ctx, "ROLLBACK")

	if got, err := a.exists(ctx, s.SessionID); got != adapters.Exists {
		t.Errorf("server 200: %v, %v", got, err)
	}
	if got, err := a.exists(ctx, "ses_gone"); got != adapters.Missing {
		t.Errorf("server 404: %v, %v", got, err)
	}
	srv.Lock()
	srv.Fail["/session/"+s.SessionID] = 500
	srv.Unlock()
	if got, err := a.exists(ctx, s.SessionID); got != adapters.ExistenceUnknown || err == nil {
		t.Errorf("server 500: %v, %v", got, err)
	}
}
