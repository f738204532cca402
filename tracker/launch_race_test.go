package tracker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// A launched agent can write its data (Claude's registry entry) before its
// launch record commits; a pass in between records the session as
// discovered. The launch then takes that record over instead of failing
// (which killed the agent) — found by the crash-consistency loop. A record
// owned by another process, or launched, is still a conflict.
func TestRecordLaunchAfterDiscovery(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	ad := &fakeAdapter{name: "claude"}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	_, owner := startProcess(t, host)
	_, other := startProcess(t, host)
	ad.set(adapters.Observation{Sessions: []adapters.Observed{
		{UpstreamID: "up-1", Cwd: "/w", Activity: session.ActivityBusy, LastActivity: time.Now(),
			Owners: []adapters.Owner{{Identity: owner, Evidence: "registry"}}},
		{UpstreamID: "up-2", Cwd: "/w", LastActivity: time.Now(),
			Owners: []adapters.Owner{{Identity: other, Evidence: "registry"}}},
	}}, nil)
	if _, err := tr.Reconcile(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	found, err := st.ByUpstream("claude", "up-1")
	if err != nil {
		t.Fatal(err)
	}

	o := owner
	rec := &session.Record{ID: state.NewID(), Agent: "claude", UpstreamID: "up-1", Owner: &o, Cwd: "/w", LogPath: "/logs/x.log", Mode: "headless"}
	if err := recordLaunch(tr, rec); err != nil {
		t.Fatalf("launch after discovery: %v", err)
	}
	if rec.ID != found.ID || !rec.Launched || rec.LogPath != "/logs/x.log" || rec.Status != session.StatusStarting || rec.Owner.PID != owner.PID {
		t.Fatalf("taken over record: %+v", rec)
	}
	if got := get(t, st, found.ID); !got.Launched || got.Mode != "headless" {
		t.Fatalf("stored: %+v", got)
	}
	recs, _ := st.List()
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	evs, _ := st.Events(0, 100)
	if last := evs[len(evs)-1]; last.SessionID != found.ID || last.To != session.StatusStarting {
		t.Fatalf("last event: %+v", last)
	}

	// Another process owns up-2: a real conflict.
	o2 := owner
	err = recordLaunch(tr, &session.Record{ID: state.NewID(), Agent: "claude", UpstreamID: "up-2", Owner: &o2, Cwd: "/w"})
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("launch over another owner's session: %v", err)
	}
	// up-1 is now a launched record: a second launch with its id conflicts.
	o3 := other
	err = recordLaunch(tr, &session.Record{ID: state.NewID(), Agent: "claude", UpstreamID: "up-1", Owner: &o3, Cwd: "/w"})
	if !errors.Is(err, state.ErrConflict) {
		t.Fatalf("second launch of a launched session: %v", err)
	}
}

// An agent that names its session only in its own data (OpenCode) can
// write it the moment it starts. Launch starts the process and records it
// with no pass in between, so a pass that begins meanwhile waits, then
// links the data to the launched record instead of recording the session a
// second time as discovered.
func TestLaunchHoldsOffPasses(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	ad := &fakeAdapter{name: "opencode"}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	_, owner := startProcess(t, host)

	passed := make(chan error, 1)
	rec, err := tr.Launch(func() (*session.Record, error) {
		ad.set(adapters.Observation{Sessions: []adapters.Observed{
			{UpstreamID: "ses_1", Cwd: "/w", Activity: session.ActivityBusy, LastActivity: time.Now(),
				Owners: []adapters.Owner{{Identity: owner, Evidence: "cwd and open database", Inferred: true}}},
		}}, nil)
		go func() {
			_, err := tr.Reconcile(context.Background(), "tick")
			passed <- err
		}()
		time.Sleep(50 * time.Millisecond) // the pass would run now, were it not held off
		o := owner
		return &session.Record{ID: state.NewID(), Agent: "opencode", Owner: &o, Cwd: "/w"}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-passed; err != nil {
		t.Fatal(err)
	}
	recs, _ := st.List()
	if len(recs) != 1 || recs[0].ID != rec.ID || recs[0].UpstreamID != "ses_1" {
		for _, r := range recs {
			t.Logf("record %s upstream %q launched %v", r.ID, r.UpstreamID, r.Launched)
		}
		t.Fatalf("%d records, want the launched one linked to ses_1", len(recs))
	}

	// A start that fails records nothing.
	if _, err := tr.Launch(func() (*session.Record, error) { return nil, errors.New("no such binary") }); err == nil {
		t.Fatal("a failed start was not reported")
	}
	if recs, _ := st.List(); len(recs) != 1 {
		t.Fatalf("%d records after a failed start", len(recs))
	}
}

// recordLaunch records rec as a launch of an already started process.
func recordLaunch(tr *Tracker, rec *session.Record) error {
	_, err := tr.Launch(func() (*session.Record, error) { return rec, nil })
	return err
}

// ownerPID is the record's owner pid, or 0.
func ownerPID(r *session.Record) int {
	if r.Owner == nil {
		return 0
	}
	return r.Owner.PID
}
