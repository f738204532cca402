package daemon

import (
	"path/filepath"
	"runtime/debug"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// The GC target is lowered for a first start only, and set back after.
func TestFirstStartGCOnlyOnEmptyStore(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	st, err := state.Open(filepath.Join(t.TempDir(), "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := zaptest.NewLogger(t)

	restore := firstStartGC(35, st, log)
	if got := debug.SetGCPercent(35); got != 35 {
		t.Fatalf("empty store: GC percent %d during the first start, want 35", got)
	}
	restore()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("after the first start: GC percent %d, want 100 back", got)
	}

	r := &session.Record{Agent: "claude", UpstreamID: "u1", Status: session.StatusStopped, CreatedAt: time.Now()}
	if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
		t.Fatal(err)
	}
	firstStartGC(35, st, log)()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Fatalf("a restart (store not empty): GC percent %d, want 100 untouched", got)
	}
	firstStartGC(0, st, log)()
}
