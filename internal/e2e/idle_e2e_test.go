package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
)

// TestIdleDaemonDoesNotWakeItself: with nothing changing, a daemon over an
// OpenCode database (WAL mode, as OpenCode keeps it) runs no pass on a
// file change hint. Opening the database for a read rewrites its -shm
// file, which the watch on the data dir sees: taken as a hint, each pass
// caused the next, every debounce (about 5 passes a second, ~8 % of a
// core at 2,000 sessions).
func TestIdleDaemonDoesNotWakeItself(t *testing.T) {
	e := newEnv(t)
	db := e.opencodeDB()
	if err := os.MkdirAll(filepath.Dir(db), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := opencodetest.WriteHistory(db, opencodetest.HistorySpec{Sessions: 20, Turns: 2}); err != nil {
		t.Fatal(err)
	}
	// Ticks read the database; only a tick may start a pass here.
	d := e.StartDaemon("--reconcile-interval", "300ms")
	var l api.SessionList
	e.CtlJSON(&l, "ls", "--all", "--json")
	if len(l.Sessions) != 20 {
		t.Fatalf("%d sessions listed, want the database's 20", len(l.Sessions))
	}
	// Let the startup's own writes (the first checkpoint) settle, then
	// count the hint passes of a quiet window.
	time.Sleep(time.Second)
	count := func(trigger string) int { return strings.Count(d.Stderr.String(), `"trigger": "`+trigger+`"`) }
	hints, ticks := count("hint"), count("tick")
	time.Sleep(3 * time.Second)
	hints, ticks = count("hint")-hints, count("tick")-ticks
	if ticks == 0 {
		t.Fatalf("no tick pass in 3 s at a 300ms interval: the test saw no read of the database")
	}
	if hints > 0 {
		t.Fatalf("%d passes on file change hints (and %d ticks) in 3 s with nothing changing", hints, ticks)
	}
	if _, err := os.Stat(db + "-shm"); err != nil {
		t.Fatalf("the database has no -shm file (not in WAL mode?): %v", err)
	}
}
