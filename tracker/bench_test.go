package tracker

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// tableHost is a process table held in memory: probes answer from a map,
// as fast as a real probe's bookkeeping allows, so the benchmark measures
// the tracker and the store, not the kernel (proc has its own benchmark).
type tableHost struct {
	live map[proc.Identity]bool
}

func (h *tableHost) Probe(id proc.Identity) proc.Result {
	if h.live[id] {
		return proc.Result{Liveness: proc.Alive}
	}
	return proc.Result{Liveness: proc.Dead, Reason: "no such process"}
}

func (h *tableHost) Snapshot() (*proc.Snapshot, error) {
	return &proc.Snapshot{Taken: time.Now(), BootID: "boot-a"}, nil
}

// populate fills a store with n sessions of which live are running with a
// live owner and the rest stopped, and returns an adapter that observes all
// of them, as a steady state looks: the live ones in its list, the others
// in a quiet set, as the Claude adapter reports them.
func populate(b *testing.B, st *state.Store, n, live int) (*tableHost, *fakeAdapter) {
	b.Helper()
	host := &tableHost{live: map[proc.Identity]bool{}}
	ad := &fakeAdapter{name: "claude"}
	now := time.Now()
	last := now.Add(-time.Hour)
	var obs, quiet []adapters.Observed
	err := st.Batch(func(tx *state.Tx) error {
		for i := 0; i < n; i++ {
			id := proc.Identity{BootID: "boot-a", PID: 1000 + i, StartTicks: uint64(5000 + i)}
			r := &session.Record{Agent: "claude", UpstreamID: fmt.Sprintf("%08d-0000-4000-8000-000000000000", i),
				Owner: &id, Cwd: fmt.Sprintf("/home/u/proj%d", i%150), CreatedAt: now, LastActivityAt: &last, Problems: []session.Problem{}}
			o := adapters.Observed{UpstreamID: r.UpstreamID, Cwd: r.Cwd, LastActivity: last, Source: "/home/u/.claude"}
			if i < live {
				host.live[id] = true
				r.Status, r.Activity = session.StatusRunning, session.ActivityIdle
				o.Owners = []adapters.Owner{{Identity: id, Evidence: "registry"}}
				o.Activity = session.ActivityIdle
			} else {
				r.Status = session.StatusStopped
				stopped := last
				r.StoppedAt = &stopped
			}
			if i < live {
				obs = append(obs, o)
			} else {
				quiet = append(quiet, o) // ids in order: sorted
			}
			if err := tx.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	ad.set(adapters.Observation{Sessions: obs, Quiet: adapters.NewQuietSet(quiet)}, nil)
	return host, ad
}

// BenchmarkReconcilePass is one steady-state pass: every session decided,
// nothing changed, nothing written. Sizes show how the pass grows.
func BenchmarkReconcilePass(b *testing.B) {
	for _, size := range []struct{ n, live int }{{1000, 100}, {10000, 1000}, {100000, 10000}} {
		b.Run(fmt.Sprintf("sessions=%d/live=%d", size.n, size.live), func(b *testing.B) {
			st, err := state.Open(filepath.Join(b.TempDir(), "sessiond.db"), state.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			host, ad := populate(b, st, size.n, size.live)
			tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host})
			ctx := context.Background()
			if _, err := tr.Reconcile(ctx, "warm"); err != nil { // first pass records last-seen times
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rep, err := tr.Reconcile(ctx, "bench")
				if err != nil {
					b.Fatal(err)
				}
				if rep.Changed != 0 || rep.Created != 0 {
					b.Fatalf("steady state changed %d, created %d", rep.Changed, rep.Created)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size.n), "ns/session")
		})
	}
}

// BenchmarkReconcileOneDeath is a pass in which one of 10,000 sessions'
// owners died: the cost of noticing and recording one transition.
func BenchmarkReconcileOneDeath(b *testing.B) {
	st, err := state.Open(filepath.Join(b.TempDir(), "sessiond.db"), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	host, ad := populate(b, st, 10000, 1000)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host})
	ctx := context.Background()
	if _, err := tr.Reconcile(ctx, "warm"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		// Flip one owner: dead on even iterations, alive (revived) on odd.
		id := proc.Identity{BootID: "boot-a", PID: 1000 + i%1000, StartTicks: uint64(5000 + i%1000)}
		host.live[id] = !host.live[id]
		b.StartTimer()
		if _, err := tr.Reconcile(ctx, "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFirstPass is a first start's pass: every observed session is
// created. Its cost per session must not grow with the count (one
// transaction of all creations did: O(n²) in bbolt's node inserts).
//
//	go test -run='^$' -bench=BenchmarkFirstPass -benchtime=1x -count=3 ./tracker/
func BenchmarkFirstPass(b *testing.B) {
	for _, n := range []int{10000, 40000} {
		b.Run(fmt.Sprintf("sessions=%d", n), func(b *testing.B) {
			var obs []adapters.Observed
			last := time.Now().Add(-time.Hour)
			for i := range n {
				obs = append(obs, adapters.Observed{UpstreamID: fmt.Sprintf("%08x-0000-4000-8000-000000000000", i*7919%n), Cwd: "/home/u/p", LastActivity: last})
			}
			ad := &fakeAdapter{name: "claude"}
			ad.set(adapters.Observation{Sessions: obs}, nil)
			for b.Loop() {
				b.StopTimer()
				st, err := state.Open(filepath.Join(b.TempDir(), "sessiond.db"), state.Options{})
				if err != nil {
					b.Fatal(err)
				}
				tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: &tableHost{}})
				b.StartTimer()
				rep, err := tr.Reconcile(context.Background(), "startup")
				if err != nil || rep.Created != n {
					b.Fatal(rep.Created, err)
				}
				b.StopTimer()
				st.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/float64(n), "µs/session")
		})
	}
}

// BenchmarkRestartPass is the first pass of a restarted daemon over
// 10,000 recorded sessions that did not change while it was down: a new
// tracker has no settled marks, so it looks at every record ("one core":
// parallelDecideMin above the count; "cores": the default). The store's
// records are loaded already (its cache), as the daemon loads them while
// the adapters look.
func BenchmarkRestartPass(b *testing.B) {
	const n = 10000
	st, err := state.Open(filepath.Join(b.TempDir(), "sessiond.db"), state.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	host, ad := populate(b, st, n, 1000)
	ctx := context.Background()
	if _, err := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host}).Reconcile(ctx, "warm"); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		min  int
	}{{"one-core", n + 1}, {"cores", parallelDecideMin}} {
		b.Run(c.name, func(b *testing.B) {
			defer func(old int) { parallelDecideMin = old }(parallelDecideMin)
			parallelDecideMin = c.min
			b.ReportAllocs()
			for b.Loop() {
				rep, err := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host}).Reconcile(ctx, "startup")
				if err != nil {
					b.Fatal(err)
				}
				if rep.Changed != 0 || rep.Created != 0 || rep.Skipped != 0 {
					b.Fatalf("a restart over unchanged sessions changed %d, created %d, skipped %d", rep.Changed, rep.Created, rep.Skipped)
				}
			}
		})
	}
}
