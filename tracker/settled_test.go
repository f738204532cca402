package tracker

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// randomCase builds a record and an observation of every shape decide
// meets: any status, owners recorded or observed, in-flight work, problems,
// activity recent or old, observed or not.
func randomCase(rng *rand.Rand) (*session.Record, *adapters.Observed) {
	statuses := []session.Status{session.StatusStopped, session.StatusInterrupted, session.StatusRunning, session.StatusUnknown, session.StatusStarting}
	r := rec(statuses[rng.IntN(len(statuses))], nil)
	if rng.IntN(2) == 0 {
		id := ident(100 + rng.IntN(3))
		r.Owner = &id
	}
	if rng.IntN(4) == 0 {
		r.Candidates = []proc.Identity{ident(200), ident(201)}
	}
	ago := []time.Duration{time.Second, 20 * time.Second, 29 * time.Second, 31 * time.Second, time.Hour, 30 * 24 * time.Hour}
	if rng.IntN(4) > 0 {
		r.LastActivityAt = ptime(t0.Add(-ago[rng.IntN(len(ago))]))
	}
	if rng.IntN(3) == 0 {
		r.Problems = []session.Problem{{Kind: session.ProblemOrphanedToolCall, Key: "t1", Detail: "Bash", Since: t0.Add(-time.Hour)}}
	}
	if rng.IntN(4) == 0 {
		r.Launched, r.LaunchedAt = true, ptime(t0.Add(-ago[rng.IntN(len(ago))]))
	}
	if rng.IntN(5) == 0 {
		return r, nil
	}
	o := &adapters.Observed{UpstreamID: r.UpstreamID, Cwd: "/p", Title: "t", Source: "/src", Root: "/root",
		LastActivity: t0.Add(-ago[rng.IntN(len(ago))])}
	if rng.IntN(3) == 0 {
		o.Owners = []adapters.Owner{own(100+rng.IntN(3), rng.IntN(2) == 0)}
	}
	if rng.IntN(3) == 0 {
		o.InFlight = []adapters.Issue{{Kind: session.ProblemOrphanedToolCall, Key: "t1", Detail: "Bash", Since: t0.Add(-time.Hour)}}
	}
	if rng.IntN(4) == 0 {
		o.Activity = session.ActivityBusy
	}
	return r, o
}

// The claim settled.go rests on: a record that qualifies and that decide
// left unchanged stays unchanged under the same evidence at any later
// time, whatever the clock rules (grace, stall, launch grace) would do.
func TestSettledRecordsDoNotChangeWithTime(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	seed := maphash.MakeSeed()
	live := map[proc.Identity]proc.Liveness{ident(101): proc.Alive, ident(201): proc.Unknown}
	qualified := 0
	for i := range 20000 {
		r, o := randomCase(rng)
		ev := evidence{obs: o, probe: probeTable(live), now: t0, grace: 30 * time.Second, stallAfter: 20 * time.Minute}
		// Settle it first, as the pass before would have.
		if next, evs := decide(r, ev); len(evs) > 0 || recordMoved(r, next) {
			r = next
		}
		next, evs := decide(r, ev)
		if len(evs) > 0 || recordMoved(r, next) {
			continue // still moving: never memoized
		}
		print, ok := settledPrint(seed, r, ev, false)
		if !ok {
			continue
		}
		qualified++
		for _, later := range []time.Duration{time.Millisecond, 31 * time.Second, 21 * time.Minute, 48 * time.Hour} {
			ev2 := ev
			ev2.now = t0.Add(later)
			if p2, ok2 := settledPrint(seed, r, ev2, false); !ok2 || p2 != print {
				t.Fatalf("case %d: the print changed with time alone", i)
			}
			next, evs := decide(r, ev2)
			if len(evs) > 0 || recordMoved(r, next) || next.Status != r.Status {
				t.Fatalf("case %d: a settled record changed %s later: %s (%s) -> %s (%s), events %+v\nrecord %+v\nobs %+v",
					i, later, r.Status, r.StatusReason, next.Status, next.StatusReason, evs, r, o)
			}
		}
	}
	if qualified < 2000 {
		t.Fatalf("only %d of 20000 cases qualified: the test covers too little", qualified)
	}
}

// A pass over history decides none of it again, and still decides what
// changed: a changed observation, and an owner that appears.
func TestPassSkipsSettledRecords(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	host := proc.NewHost()
	_, live := startProcess(t, host)
	old := time.Now().Add(-time.Hour)
	var obs []adapters.Observed
	for i := range 500 {
		obs = append(obs, adapters.Observed{UpstreamID: fmt.Sprintf("up-%d", i), Cwd: "/p", Source: "/src", LastActivity: old})
	}
	ad := &fakeAdapter{name: "claude"}
	ad.set(adapters.Observation{Sessions: obs}, nil)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	ctx := context.Background()
	for range 2 { // create, then settle (last seen written)
		if _, err := tr.Reconcile(ctx, "test"); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := tr.Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sessions != 500 {
		t.Fatalf("%d sessions", rep.Sessions)
	}
	warm := rep.Skipped
	rep, err = tr.Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != 500 || rep.Changed != 0 {
		t.Fatalf("steady pass: skipped %d (before %d), changed %d; want all 500 skipped", rep.Skipped, warm, rep.Changed)
	}

	// One observation changes, one session gains a live owner.
	obs2 := append([]adapters.Observed(nil), obs...)
	obs2[7].Title = "renamed"
	obs2[9].Owners = []adapters.Owner{{Identity: live, Evidence: "registry"}}
	obs2[9].Activity = session.ActivityBusy
	ad.set(adapters.Observation{Sessions: obs2}, nil)
	rep, err = tr.Reconcile(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Skipped != 498 || rep.Changed != 2 {
		t.Fatalf("skipped %d, changed %d; want 498 and 2", rep.Skipped, rep.Changed)
	}
	if r := get(t, st, "up-9"); r.Status != session.StatusRunning || ownerPID(r) != live.PID {
		t.Fatalf("the revived session: %s (%s)", r.Status, r.StatusReason)
	}
	if r := get(t, st, "up-7"); r.Title != "renamed" {
		t.Fatalf("the renamed session: %q", r.Title)
	}
}

// A first pass creating more sessions than one transaction holds creates
// them all, each once.
func TestFirstPassCreatesInChunks(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	n := 2*createChunk + 7
	var obs []adapters.Observed
	for i := range n {
		obs = append(obs, adapters.Observed{UpstreamID: fmt.Sprintf("up-%05d", i), Cwd: "/p", LastActivity: time.Now().Add(-time.Hour)})
	}
	ad := &fakeAdapter{name: "claude"}
	ad.set(adapters.Observation{Sessions: obs}, nil)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: proc.NewHost(), Logger: zaptest.NewLogger(t)})
	rep, err := tr.Reconcile(context.Background(), "startup")
	if err != nil {
		t.Fatal(err)
	}
	recs, _ := st.List()
	if rep.Created != n || len(recs) != n {
		t.Fatalf("created %d, stored %d, want %d", rep.Created, len(recs), n)
	}
	if rep, _ := tr.Reconcile(context.Background(), "tick"); rep.Created != 0 {
		t.Fatalf("second pass created %d", rep.Created)
	}
}
