package tracker

import (
	"errors"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func ident(pid int) proc.Identity {
	return proc.Identity{BootID: "boot-a", PID: pid, StartTicks: uint64(pid) * 10}
}

// probeTable answers from a map; identities not in it are Dead (the kernel
// has no such process).
func probeTable(live map[proc.Identity]proc.Liveness) func(proc.Identity) proc.Result {
	return func(id proc.Identity) proc.Result {
		l, ok := live[id]
		if !ok {
			return proc.Result{Liveness: proc.Dead, Reason: "no such process"}
		}
		return proc.Result{Liveness: l, Reason: l.String()}
	}
}

func ptime(t time.Time) *time.Time { return &t }

func rec(status session.Status, owner *proc.Identity) *session.Record {
	r := &session.Record{
		ID: "abc123", Agent: "claude", UpstreamID: "up-1", Status: status,
		Activity: session.ActivityIdle, Owner: owner, CreatedAt: t0.Add(-time.Hour),
		Problems: []session.Problem{}, WaitingFor: &session.WaitingFor{Kind: session.WaitingInput},
		ActivitySince: ptime(t0.Add(-time.Minute)),
	}
	if status.Terminal() {
		r.Activity, r.WaitingFor, r.ActivitySince = "", nil, nil
	}
	return r
}

// launchedExit is a session launched 2 s before t0 whose owner has just
// exited as given, last seen at seen.
func launchedExit(id proc.Identity, code int, signal string, seen *time.Time) *session.Record {
	r := rec(session.StatusRunning, &id)
	r.Launched, r.LaunchedAt, r.LastSeenAt = true, ptime(t0.Add(-2*time.Second)), seen
	r.Exit = &session.ExitStatus{PID: id.PID, Code: code, Signal: signal, At: t0.Add(-time.Second)}
	return r
}

func own(pid int, inferred bool) adapters.Owner {
	return adapters.Owner{Identity: ident(pid), Inferred: inferred, Evidence: "test"}
}

// foreign is an owner of another machine, as the Claude adapter reports
// it: the same pid and start as ident(pid), so a probe would answer for
// this host's process of that pid.
func foreign(pid int) adapters.Owner {
	return adapters.Owner{Identity: ident(pid), Evidence: "registry",
		NoProbe: &proc.Result{Liveness: proc.Unknown, Reason: "pid recorded by another machine: not probed here"}}
}

func TestDecideInvariants(t *testing.T) {
	id1, id2 := ident(100), ident(200)
	toolCall := adapters.Issue{Kind: session.ProblemOrphanedToolCall, Key: "toolu_1", Detail: "Bash: python3 sleep"}
	cases := []struct {
		name     string
		rec      *session.Record
		obs      *adapters.Observed
		aerr     error
		live     map[proc.Identity]proc.Liveness
		now      time.Time
		want     session.Status
		wantAct  session.Activity
		wantPID  int
		problems []session.ProblemKind
		events   int
	}{
		// Invariant 1: running iff the owner probes Alive.
		{name: "owner alive is running", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityBusy, LastActivity: t0},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityBusy, wantPID: 100, events: 1},
		{name: "owner dead, nothing in flight, is stopped", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityIdle},
			live: nil, want: session.StatusStopped, wantPID: 100, events: 1},
		{name: "owner dead with a tool call in flight is interrupted", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, InFlight: []adapters.Issue{toolCall}},
			want: session.StatusInterrupted, wantPID: 100, problems: []session.ProblemKind{session.ProblemOrphanedToolCall}, events: 1},
		{name: "a reused pid is dead", rec: rec(session.StatusRunning, &id1),
			// The kernel has pid 100 but with other start ticks: the probe says Dead.
			live: map[proc.Identity]proc.Liveness{{BootID: "boot-a", PID: 100, StartTicks: 999}: proc.Alive},
			want: session.StatusStopped, wantPID: 100, events: 1},
		{name: "a failed probe is unknown, not stopped", rec: rec(session.StatusRunning, &id1),
			live: map[proc.Identity]proc.Liveness{id1: proc.Unknown}, want: session.StatusUnknown, wantAct: session.ActivityIdle, wantPID: 100, events: 1},
		{name: "a busy session whose owner died while unobserved is interrupted", rec: func() *session.Record {
			r := rec(session.StatusRunning, &id1)
			r.Activity = session.ActivityBusy
			return r
		}(), want: session.StatusInterrupted, wantPID: 100, events: 1},

		// Inferred ownership: running while any candidate lives.
		{name: "two inferred candidates, one alive: running and ambiguous", rec: rec(session.StatusRunning, nil),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, true), own(200, true)}},
			live: map[proc.Identity]proc.Liveness{id2: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 200, events: 1},
		{name: "two inferred candidates alive: ambiguous", rec: rec(session.StatusRunning, nil),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, true), own(200, true)}},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive, id2: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 100,
			problems: []session.ProblemKind{session.ProblemOwnerAmbiguous}, events: 1},
		{name: "stored candidates stay candidates when the scan misses them", rec: func() *session.Record {
			r := rec(session.StatusRunning, &id1)
			r.OwnerInferred = true
			r.Candidates = []proc.Identity{id1, id2}
			return r
		}(), live: map[proc.Identity]proc.Liveness{id2: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 200, events: 1},
		{name: "no candidate, data moved inside grace: unknown", rec: rec(session.StatusRunning, nil),
			obs:  &adapters.Observed{UpstreamID: "up-1", LastActivity: t0.Add(-5 * time.Second)},
			want: session.StatusUnknown, wantAct: session.ActivityIdle, events: 1},
		{name: "no candidate, data still past grace, in flight: interrupted", rec: rec(session.StatusUnknown, nil),
			obs:  &adapters.Observed{UpstreamID: "up-1", LastActivity: t0.Add(-time.Minute), InFlight: []adapters.Issue{toolCall}},
			want: session.StatusInterrupted, problems: []session.ProblemKind{session.ProblemOrphanedToolCall}, events: 1},

		// Invariant 2: absence never stops; an adapter error changes no status.
		{name: "absent from the scan with a live owner stays running", rec: rec(session.StatusRunning, &id1),
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 100, events: 0},
		{name: "absent with no owner keeps its status", rec: rec(session.StatusUnknown, nil),
			want: session.StatusUnknown, wantAct: session.ActivityIdle, events: 0},
		{name: "adapter error keeps running and adds adapter_error", rec: rec(session.StatusRunning, &id1),
			aerr: errors.New("permission denied"), live: map[proc.Identity]proc.Liveness{id1: proc.Alive},
			want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 100, problems: []session.ProblemKind{session.ProblemAdapterError}, events: 1},
		{name: "adapter error keeps interrupted", rec: func() *session.Record {
			r := rec(session.StatusInterrupted, &id1)
			r.Problems = []session.Problem{{Kind: session.ProblemOrphanedToolCall, Key: "toolu_1", Since: t0}}
			return r
		}(), aerr: errors.New("boom"), want: session.StatusInterrupted, wantPID: 100,
			problems: []session.ProblemKind{session.ProblemAdapterError, session.ProblemOrphanedToolCall}, events: 1},

		// Invariant 3: the launch grace period.
		{name: "launched, alive, inside grace, not seen: starting", rec: func() *session.Record {
			r := rec(session.StatusStarting, &id1)
			r.Launched, r.CreatedAt = true, t0.Add(-10*time.Second)
			return r
		}(), live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusStarting, wantAct: session.ActivityIdle, wantPID: 100, events: 0},
		{name: "launched, alive, past grace, never seen: running with not_discovered", rec: func() *session.Record {
			r := rec(session.StatusStarting, &id1)
			r.Launched, r.CreatedAt = true, t0.Add(-31*time.Second)
			return r
		}(), live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 100,
			problems: []session.ProblemKind{session.ProblemNotDiscovered}, events: 1},
		{name: "launched and seen inside grace: running", rec: func() *session.Record {
			r := rec(session.StatusStarting, &id1)
			r.Launched, r.CreatedAt = true, t0.Add(-time.Second)
			return r
		}(), obs: &adapters.Observed{UpstreamID: "up-1", Activity: session.ActivityBusy},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityBusy, wantPID: 100, events: 1},
		{name: "launched, died inside grace: stopped", rec: func() *session.Record {
			r := rec(session.StatusStarting, &id1)
			r.Launched, r.CreatedAt = true, t0.Add(-2*time.Second)
			return r
		}(), want: session.StatusStopped, wantPID: 100, events: 1},

		// launch_failed: only a fast, unclean exit before the data showed
		// the session (the real CLIs finish a headless turn in under a
		// second against a local model).
		{name: "launched, exited 1 at once, never seen: launch_failed", rec: launchedExit(id1, 1, "", nil),
			want: session.StatusStopped, wantPID: 100, problems: []session.ProblemKind{session.ProblemLaunchFailed}, events: 1},
		{name: "launched, exited 0 within a second: stopped, no launch_failed", rec: launchedExit(id1, 0, "", nil),
			want: session.StatusStopped, wantPID: 100, events: 1},
		{name: "launched, seen, then killed within seconds: interrupted, no launch_failed", rec: launchedExit(id1, -1, "killed", ptime(t0.Add(-time.Second))),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, InFlight: []adapters.Issue{toolCall}},
			want: session.StatusInterrupted, wantPID: 100, problems: []session.ProblemKind{session.ProblemOrphanedToolCall}, events: 1},

		// Invariant 4: revival by a new live owner.
		{name: "stopped session claimed by a live process runs again", rec: rec(session.StatusStopped, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(200, false)}, Activity: session.ActivityBusy},
			live: map[proc.Identity]proc.Liveness{id2: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityBusy, wantPID: 200, events: 1},
		{name: "interrupted session revived drops its in-flight problems", rec: func() *session.Record {
			r := rec(session.StatusInterrupted, &id1)
			r.Problems = []session.Problem{{Kind: session.ProblemOrphanedToolCall, Key: "toolu_1", Since: t0}}
			return r
		}(), obs: &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(200, false)}, InFlight: []adapters.Issue{toolCall}},
			live: map[proc.Identity]proc.Liveness{id2: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityUnknown, wantPID: 200, events: 1},
		{name: "a stopped session's dead owner is not probed back to life", rec: rec(session.StatusStopped, &id1),
			// Even if a buggy probe said alive, a confirmed-dead identity stays dead.
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusStopped, wantPID: 100, events: 0},

		// Owners the agent's data settles are never probed: another
		// machine's pid means nothing here (a buggy probe saying alive
		// would make it running), and an entry of an earlier boot is dead.
		{name: "another machine's owner is not probed: unknown, never running", rec: rec(session.StatusUnknown, nil),
			obs: &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{foreign(100)}, Activity: session.ActivityBusy,
				Problems: []adapters.Issue{{Kind: session.ProblemForeignHost, Key: "100", Detail: "another machine"}}},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusUnknown, wantAct: session.ActivityIdle, problems: []session.ProblemKind{session.ProblemForeignHost}, events: 1},
		{name: "another machine's owner with work in flight is never made dead here", rec: rec(session.StatusRunning, &id2),
			obs: &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{foreign(100)}, InFlight: []adapters.Issue{toolCall},
				Problems: []adapters.Issue{{Kind: session.ProblemForeignHost, Key: "100", Detail: "another machine"}}},
			want: session.StatusUnknown, wantAct: session.ActivityIdle, wantPID: 200, problems: []session.ProblemKind{session.ProblemForeignHost}, events: 1},
		{name: "an owner of an earlier boot is dead without a probe", rec: rec(session.StatusRunning, &id2),
			obs: &adapters.Observed{UpstreamID: "up-1", InFlight: []adapters.Issue{toolCall}, Owners: []adapters.Owner{{Identity: id1, Evidence: "registry",
				NoProbe: &proc.Result{Liveness: proc.Dead, Reason: "started before this boot"}}}},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusInterrupted, wantPID: 200,
			problems: []session.ProblemKind{session.ProblemOrphanedToolCall}, events: 1},

		// Owners the agent's data names exactly (Codex's writer lock): a live
		// process that no longer holds the session has let it go.
		{name: "a live owner that let the session go leaves it stopped", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", OwnersExact: "the lock table"},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusStopped, wantPID: 100, events: 1},
		{name: "a live owner that let a busy session go leaves it interrupted", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", OwnersExact: "the lock table", InFlight: []adapters.Issue{toolCall}},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusInterrupted, wantPID: 100,
			problems: []session.ProblemKind{session.ProblemOrphanedToolCall}, events: 1},
		{name: "exact owners name a new owner", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", OwnersExact: "the lock table", Owners: []adapters.Owner{own(200, false)}, Activity: session.ActivityBusy},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive, id2: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityBusy, wantPID: 200, events: 1},
		{name: "without exact owners a live recorded owner keeps it running", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", Activity: session.ActivityIdle},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 100, events: 0},
		{name: "a process sessiond launched is not released before it takes the lock", rec: func() *session.Record {
			r := rec(session.StatusStarting, &id1)
			r.Launched, r.LaunchedAt, r.OwnerEvidence = true, ptime(t0.Add(-time.Second)), launchEvidence
			return r
		}(), obs: &adapters.Observed{UpstreamID: "up-1", OwnersExact: "the lock table", Activity: session.ActivityIdle, LastActivity: t0},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityIdle, wantPID: 100, events: 1},

		// The watchdog.
		{name: "busy with no progress past the threshold is stalled", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityBusy, LastActivity: t0.Add(-21 * time.Minute)},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityBusy, wantPID: 100,
			problems: []session.ProblemKind{session.ProblemStalled}, events: 1},
		{name: "waiting for the user is never stalled", rec: rec(session.StatusRunning, &id1),
			obs:  &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityWaiting, LastActivity: t0.Add(-2 * time.Hour)},
			live: map[proc.Identity]proc.Liveness{id1: proc.Alive}, want: session.StatusRunning, wantAct: session.ActivityWaiting, wantPID: 100, events: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			ev := evidence{obs: tc.obs, adapterErr: tc.aerr, probe: probeTable(tc.live), now: now, grace: 30 * time.Second, stallAfter: 20 * time.Minute}
			before := tc.rec.Clone()
			got, evs := decide(tc.rec, ev)
			if got.Status != tc.want {
				t.Errorf("status = %q (%s), want %q", got.Status, got.StatusReason, tc.want)
			}
			if got.Activity != tc.wantAct {
				t.Errorf("activity = %q, want %q", got.Activity, tc.wantAct)
			}
			if ownerPID(got) != tc.wantPID {
				t.Errorf("pid = %d, want %d", ownerPID(got), tc.wantPID)
			}
			var kinds []session.ProblemKind
			for _, p := range got.Problems {
				kinds = append(kinds, p.Kind)
			}
			if !equalKinds(kinds, tc.problems) {
				t.Errorf("problems = %v, want %v", kinds, tc.problems)
			}
			if len(evs) != tc.events {
				t.Errorf("events = %+v, want %d", evs, tc.events)
			}
			if len(evs) > 0 && evs[0].Type == session.EventStatus && (evs[0].From != before.Status || evs[0].To != got.Status) {
				t.Errorf("status event %s -> %s, want %s -> %s", evs[0].From, evs[0].To, before.Status, got.Status)
			}
			// decide must not modify its input.
			if tc.rec.Status != before.Status || len(tc.rec.Problems) != len(before.Problems) {
				t.Errorf("decide modified its input record")
			}
			if got.Status.Terminal() && got.StoppedAt == nil {
				t.Errorf("terminal status without stopped_at")
			}
			if got.Status == session.StatusRunning && got.StoppedAt != nil {
				t.Errorf("running with stopped_at")
			}
		})
	}
}

func equalKinds(a, b []session.ProblemKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A decision applied twice produces no second event and keeps Since: the
// pass is idempotent, so a steady state writes nothing.
func TestDecideIsIdempotent(t *testing.T) {
	id1 := ident(100)
	obs := &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, true), own(200, true)},
		Activity: session.ActivityBusy, LastActivity: t0.Add(-30 * time.Minute)}
	live := map[proc.Identity]proc.Liveness{id1: proc.Alive, ident(200): proc.Alive}
	ev := evidence{obs: obs, probe: probeTable(live), now: t0, grace: 30 * time.Second, stallAfter: 20 * time.Minute}
	first, evs := decide(rec(session.StatusRunning, nil), ev)
	if len(evs) != 1 {
		t.Fatalf("first decision: %d events", len(evs))
	}
	ev.now = t0.Add(time.Minute)
	second, evs := decide(first, ev)
	if len(evs) != 0 {
		t.Fatalf("second decision emitted %+v", evs)
	}
	for i, p := range second.Problems {
		if !p.Since.Equal(first.Problems[i].Since) {
			t.Errorf("problem %s since moved from %s to %s", p.Kind, first.Problems[i].Since, p.Since)
		}
	}
}

// A new session discovered with a dead owner and old data is recorded as
// stopped at its last write, with one created event.
func TestDecideNewSessionDiscoveredDead(t *testing.T) {
	last := t0.Add(-48 * time.Hour)
	fresh := &session.Record{Agent: "claude", UpstreamID: "up-9", CreatedAt: t0}
	ev := evidence{obs: &adapters.Observed{UpstreamID: "up-9", LastActivity: last}, probe: probeTable(nil), now: t0, grace: 30 * time.Second}
	got, evs := decide(fresh, ev)
	if got.Status != session.StatusStopped || len(evs) != 1 || evs[0].Type != session.EventCreated {
		t.Fatalf("got %s with %+v", got.Status, evs)
	}
	if !got.StoppedAt.Equal(last) {
		t.Errorf("stopped_at = %s, want last write %s", got.StoppedAt, last)
	}
}

// A released owner is not called dead: the reason says it let go.
func TestDecideReleasedReason(t *testing.T) {
	id1 := ident(100)
	ev := evidence{obs: &adapters.Observed{UpstreamID: "up-1", OwnersExact: "the lock table"},
		probe: probeTable(map[proc.Identity]proc.Liveness{id1: proc.Alive}), now: t0, grace: 30 * time.Second}
	got, _ := decide(rec(session.StatusRunning, &id1), ev)
	if want := "owner pid 100 let the session go: the lock table names another owner, or none"; got.StatusReason != want {
		t.Errorf("reason %q, want %q", got.StatusReason, want)
	}
	// Dead, it is dead, whatever the lock says.
	ev.probe = probeTable(nil)
	got, _ = decide(rec(session.StatusRunning, &id1), ev)
	if want := "owner pid 100 is dead: no such process"; got.StatusReason != want {
		t.Errorf("reason %q, want %q", got.StatusReason, want)
	}
}

// A decided record shares nothing with the observation it came from: the
// store keeps the tracker's created records as they are
// (state.Tx.CreateOwned), so an adapter that reused its WaitingFor must
// not reach into them.
func TestDecideCopiesWaitingFor(t *testing.T) {
	wait := &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "rm -rf build"}
	obs := &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)},
		Activity: session.ActivityWaiting, WaitingFor: wait, LastActivity: t0.Add(-time.Second)}
	ev := evidence{obs: obs, probe: probeTable(map[proc.Identity]proc.Liveness{ident(100): proc.Alive}), now: t0, grace: 30 * time.Second, stallAfter: 20 * time.Minute}
	fresh := &session.Record{Agent: "claude", UpstreamID: "up-1", CreatedAt: t0, Problems: []session.Problem{}}
	next, _ := decide(fresh, ev)
	if next.Activity != session.ActivityWaiting || !next.WaitingFor.Equal(wait) {
		t.Fatalf("decided %s waiting for %+v, want waiting for %+v", next.Activity, next.WaitingFor, wait)
	}
	if next.WaitingFor == wait {
		t.Fatal("the record holds the observation's WaitingFor itself")
	}
	again, _ := decide(next, ev)
	if again.WaitingFor == wait || again.WaitingFor == next.WaitingFor {
		t.Fatal("a second decision shares its WaitingFor")
	}
}
