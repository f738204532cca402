package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// quietWorld generates an adapter's passes the way the Claude adapter
// makes them: most sessions in a quiet set that is handed out again
// unchanged, a few in the list (new, changed, or shadowing the set for a
// pass), sometimes a new set, failed inputs, a failed Discover, owners
// that live and die, and a clock that moves.
type quietWorld struct {
	rng   *rand.Rand
	set   *adapters.QuietSet
	base  map[string]adapters.Observed // what the set holds, by id
	next  int
	host  *tableHost
	clock *clock
}

func (w *quietWorld) observed(id string) adapters.Observed {
	rng := w.rng
	ago := []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Hour, 48 * time.Hour}
	o := adapters.Observed{UpstreamID: id, Source: fmt.Sprintf("/src/%d", rng.IntN(3)), Root: "/root",
		Cwd: "/p", Title: "t", LastActivity: w.clock.Now().Add(-ago[rng.IntN(len(ago))])}
	switch rng.IntN(6) {
	case 0:
		o.Owners = []adapters.Owner{{Identity: ident(100 + rng.IntN(4)), Evidence: "registry"}}
		o.Activity = []session.Activity{session.ActivityBusy, session.ActivityIdle}[rng.IntN(2)]
	case 1:
		o.InFlight = []adapters.Issue{{Kind: session.ProblemOrphanedToolCall, Key: "t1", Detail: "Bash", Since: o.LastActivity}}
	case 2:
		o.Title = "renamed"
	}
	return o
}

// newSet replaces the quiet set: some sessions changed, some added, some
// gone.
func (w *quietWorld) newSet() {
	base := map[string]adapters.Observed{}
	for id, o := range w.base {
		switch w.rng.IntN(10) {
		case 0: // gone
		case 1, 2:
			base[id] = w.observed(id)
		default:
			base[id] = o
		}
	}
	for range w.rng.IntN(4) {
		id := fmt.Sprintf("s%03d", w.next)
		w.next++
		base[id] = w.observed(id)
	}
	w.base = base
	list := make([]adapters.Observed, 0, len(base))
	for _, o := range base {
		list = append(list, o)
	}
	slices.SortFunc(list, func(a, b adapters.Observed) int { return strings.Compare(a.UpstreamID, b.UpstreamID) })
	w.set = adapters.NewQuietSet(list)
}

// pass returns this pass's observation (with the quiet set), the same as
// one list, and Discover's error.
func (w *quietWorld) pass() (withSet, flat adapters.Observation, err error) {
	rng := w.rng
	if w.set == nil || rng.IntN(5) == 0 {
		w.newSet()
	}
	withSet.Quiet = w.set
	// A few sessions in the list: shadowing the set, or not in it.
	ids := make([]string, 0, len(w.base))
	for id := range w.base {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for range rng.IntN(3) {
		if len(ids) > 0 && rng.IntN(2) == 0 {
			withSet.Sessions = append(withSet.Sessions, w.observed(ids[rng.IntN(len(ids))]))
		} else {
			withSet.Sessions = append(withSet.Sessions, w.observed(fmt.Sprintf("l%03d", rng.IntN(20))))
		}
	}
	slices.SortFunc(withSet.Sessions, func(a, b adapters.Observed) int { return strings.Compare(a.UpstreamID, b.UpstreamID) })
	withSet.Sessions = slices.CompactFunc(withSet.Sessions, func(a, b adapters.Observed) bool { return a.UpstreamID == b.UpstreamID })
	if rng.IntN(8) == 0 {
		withSet.Errors = []adapters.InputError{{Input: fmt.Sprintf("/src/%d", rng.IntN(3)), Err: errors.New("unreadable")}}
	}
	flat = withSet
	flat.Sessions, flat.Quiet = withSet.All(), nil
	if rng.IntN(15) == 0 {
		err = errors.New("could not look")
	}
	// Owners live and die; the clock moves.
	for pid := 100; pid < 104; pid++ {
		if rng.IntN(6) == 0 {
			w.host.live[ident(pid)] = !w.host.live[ident(pid)]
		}
	}
	w.clock.Add([]time.Duration{time.Second, 5 * time.Second, 40 * time.Second, 30 * time.Minute}[rng.IntN(4)])
	return withSet, flat, err
}

// recordView is what a record says, without what differs between two
// stores by construction (ids, write times).
func recordView(r *session.Record) string {
	c := r.Clone()
	c.ID, c.UpdatedAt = "", time.Time{} // the store stamps UpdatedAt from the wall clock
	b, err := json.Marshal(c)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func storeView(t *testing.T, st *state.Store) map[string]string {
	t.Helper()
	recs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, r := range recs {
		out[r.Agent+"/"+r.UpstreamID] = recordView(r)
	}
	return out
}

// A tracker given an adapter's quiet set decides exactly as one given the
// same sessions as one list, pass after pass, while skipping what the set
// lets it skip.
func TestQuietSetDecidesAsTheFullList(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			clk := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
			host := &tableHost{live: map[proc.Identity]bool{}}
			w := &quietWorld{rng: rand.New(rand.NewPCG(seed, 99)), host: host, clock: clk, base: map[string]adapters.Observed{}}
			for range 40 {
				id := fmt.Sprintf("s%03d", w.next)
				w.next++
				w.base[id] = w.observed(id)
			}
			newTracker := func(ad *fakeAdapter) (*Tracker, *state.Store) {
				st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
				return New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Now: clk.Now,
					Logger: zaptest.NewLogger(t)}), st
			}
			quietAd, flatAd := &fakeAdapter{name: "claude"}, &fakeAdapter{name: "claude"}
			quietTr, quietSt := newTracker(quietAd)
			flatTr, flatSt := newTracker(flatAd)
			ctx := context.Background()
			unlooked := 0
			for i := range 300 {
				withSet, flat, err := w.pass()
				quietAd.set(withSet, err)
				flatAd.set(flat, err)
				qr, qerr := quietTr.Reconcile(ctx, "test")
				fr, ferr := flatTr.Reconcile(ctx, "test")
				if (qerr == nil) != (ferr == nil) {
					t.Fatalf("pass %d: errors %v and %v", i, qerr, ferr)
				}
				if qr.Created != fr.Created || qr.Changed != fr.Changed || qr.Sessions != fr.Sessions {
					t.Fatalf("pass %d: with the set %+v, as one list %+v", i, qr, fr)
				}
				unlooked += qr.Unlooked
				q, f := storeView(t, quietSt), storeView(t, flatSt)
				if !reflect.DeepEqual(q, f) {
					for k := range f {
						if q[k] != f[k] {
							t.Fatalf("pass %d: %s\nwith the set %s\nas one list  %s", i, k, q[k], f[k])
						}
					}
					t.Fatalf("pass %d: %d records with the set, %d as one list", i, len(q), len(f))
				}
			}
			if unlooked == 0 {
				t.Fatal("no record was ever skipped for its quiet set: the test covers nothing")
			}
			t.Logf("%d records skipped unlooked over 300 passes", unlooked)
		})
	}
}

// A steady pass over a quiet set looks at none of it; a changed set, a
// session in the list, or a failed input brings its records back to a
// full look.
func TestQuietSetSkipsUnlooked(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	host := &tableHost{live: map[proc.Identity]bool{}}
	old := time.Now().Add(-time.Hour)
	var list []adapters.Observed
	for i := range 300 {
		list = append(list, adapters.Observed{UpstreamID: fmt.Sprintf("up-%03d", i), Cwd: "/p", Source: "/src", LastActivity: old})
	}
	set := adapters.NewQuietSet(list)
	ad := &fakeAdapter{name: "claude"}
	ad.set(adapters.Observation{Quiet: set}, nil)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	ctx := context.Background()
	pass := func() PassReport {
		t.Helper()
		rep, err := tr.Reconcile(ctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	if rep := pass(); rep.Created != 300 {
		t.Fatalf("first pass created %d", rep.Created)
	}
	pass() // last seen written
	pass()
	if rep := pass(); rep.Unlooked != 300 {
		t.Fatalf("steady pass: %+v; want all 300 unlooked", rep)
	}

	// One session in the list, changed: decided; the rest still unlooked.
	changed := list[7]
	changed.Title = "renamed"
	ad.set(adapters.Observation{Quiet: set, Sessions: []adapters.Observed{changed}}, nil)
	if rep := pass(); rep.Changed != 1 || rep.Unlooked != 299 {
		t.Fatalf("a shadowed session: %+v", rep)
	}
	if r := get(t, st, "up-007"); r.Title != "renamed" {
		t.Fatalf("title %q", r.Title)
	}
	// A new session in a new set is created; the new set is looked at.
	list2 := append(slices.Clone(list), adapters.Observed{UpstreamID: "up-999", Cwd: "/p", Source: "/src", LastActivity: old})
	list2[7] = changed
	ad.set(adapters.Observation{Quiet: adapters.NewQuietSet(list2)}, nil)
	if rep := pass(); rep.Created != 1 || rep.Unlooked != 0 {
		t.Fatalf("a new set: %+v", rep)
	}
	// A failed input: looked at again (the records not observed depend
	// on it).
	set2 := adapters.NewQuietSet(list2)
	ad.set(adapters.Observation{Quiet: set2}, nil)
	pass()
	pass()
	ad.set(adapters.Observation{Quiet: set2, Errors: []adapters.InputError{{Input: "/elsewhere", Err: errors.New("x")}}}, nil)
	if rep := pass(); rep.Unlooked != 0 {
		t.Fatalf("failed inputs changed: %+v", rep)
	}
}
