package tracker

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// settled.go skips a stopped record only while no owner is observed: an
// owner is something to probe, and the evidence's print does not cover
// owners. TestPassSkipsSettledRecords revives a session whose activity
// changed with its owner, which the print sees anyway; here the owner is
// all that changes, so only that rule stands between a live owner and a
// session left stopped. Both ways a stopped session meets an owner: none
// before, and a dead one before (a stopped session whose registry entry
// stays), then a live one.
func TestSettledRecordRevivedByItsOwnerAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before []adapters.Owner
	}{
		{name: "no owner, then a live one"},
		{name: "a dead owner, then a live one", before: []adapters.Owner{{Identity: proc.Identity{BootID: "boot-old", PID: 4242, StartTicks: 1},
			Evidence: "registry", NoProbe: &proc.Result{Liveness: proc.Dead, Reason: "started before this boot"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
			host := proc.NewHost()
			_, live := startProcess(t, host)
			still := adapters.Observed{UpstreamID: "up-1", Cwd: "/p", Source: "/src", Title: "t",
				LastActivity: time.Now().Add(-time.Hour), Owners: tc.before}
			ad := &fakeAdapter{name: "claude"}
			ad.set(adapters.Observation{Sessions: []adapters.Observed{still}}, nil)
			tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
			ctx := context.Background()
			for range 3 { // create, settle, then a pass that could skip it
				if _, err := tr.Reconcile(ctx, "test"); err != nil {
					t.Fatal(err)
				}
			}
			if r := get(t, st, "up-1"); r.Status != session.StatusStopped {
				t.Fatalf("before: %s (%s), want stopped", r.Status, r.StatusReason)
			}

			// The same evidence, word for word, but for a live owner.
			revived := still
			revived.Owners = []adapters.Owner{{Identity: live, Evidence: "registry"}}
			ad.set(adapters.Observation{Sessions: []adapters.Observed{revived}}, nil)
			if _, err := tr.Reconcile(ctx, "test"); err != nil {
				t.Fatal(err)
			}
			if r := get(t, st, "up-1"); r.Status != session.StatusRunning || ownerPID(r) != live.PID {
				t.Fatalf("after a live owner appeared: %s (%s) owner pid %d, want running on pid %d", r.Status, r.StatusReason, ownerPID(r), live.PID)
			}
		})
	}
}
