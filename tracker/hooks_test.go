package tracker

import (
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// What a hook may and may not do to a decision (hooks.go).
func TestDecideHooks(t *testing.T) {
	owner, hookProc, stranger := ident(100), ident(900), ident(777)
	permission := &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "sleep 6; echo hi"}
	busyRec := func() *session.Record {
		r := rec(session.StatusRunning, &owner)
		r.Activity, r.ActivitySource, r.WaitingFor = session.ActivityBusy, session.SourceTranscript, nil
		return r
	}
	waitingRec := func() *session.Record { // decided from a hook at t0-1s
		r := busyRec()
		r.Activity, r.ActivitySource, r.WaitingFor, r.ActivitySince = session.ActivityWaiting, session.SourceHook, permission, ptime(t0.Add(-time.Second))
		return r
	}
	idleRec := func() *session.Record { // idle from the registry since t0-1m
		r := busyRec()
		r.Activity, r.ActivitySource, r.WaitingFor, r.ActivitySince = session.ActivityIdle, session.SourceRegistry, &session.WaitingFor{Kind: session.WaitingInput}, ptime(t0.Add(-time.Minute))
		return r
	}
	// Claude's registry entry: idle, its status set at statusAt.
	registryIdle := func(statusAt time.Time) *adapters.Observed {
		return &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityIdle,
			ActivitySource: session.SourceRegistry, ActivityAt: statusAt, LastActivity: t0.Add(-2 * time.Hour)}
	}
	// The rollout of a pending call: busy, last written at dataAt.
	pending := func(dataAt time.Time) *adapters.Observed {
		return &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, OwnersExact: "lock table",
			Activity: session.ActivityBusy, ActivitySource: session.SourceTranscript, LastActivity: dataAt,
			InFlight: []adapters.Issue{{Kind: session.ProblemOrphanedToolCall, Key: "call-1"}}}
	}
	hook := func(at time.Time, from ...proc.Identity) *hookEvidence {
		return &hookEvidence{Hook: adapters.Hook{UpstreamID: "up-1", Event: "PermissionRequest", Activity: session.ActivityWaiting, WaitingFor: permission}, At: at, From: from}
	}
	alive := map[proc.Identity]proc.Liveness{owner: proc.Alive, hookProc: proc.Alive, stranger: proc.Alive}
	ownerDead := map[proc.Identity]proc.Liveness{hookProc: proc.Alive}

	cases := []struct {
		name   string
		rec    *session.Record
		obs    *adapters.Observed
		hook   *hookEvidence
		live   map[proc.Identity]proc.Liveness
		status session.Status
		act    session.Activity
		src    session.ActivitySource
		wait   *session.WaitingFor
		since  time.Time // zero: not checked
		events int
	}{
		{name: "a hook from the owner's tree, newer than the data, says waiting",
			rec: busyRec(), obs: pending(t0.Add(-2 * time.Second)), hook: hook(t0.Add(-time.Second), hookProc, owner), live: alive,
			status: session.StatusRunning, act: session.ActivityWaiting, src: session.SourceHook, wait: permission, since: t0.Add(-time.Second), events: 1},
		{name: "a hook from outside the owner's tree is not taken",
			rec: busyRec(), obs: pending(t0.Add(-2 * time.Second)), hook: hook(t0.Add(-time.Second), hookProc, stranger), live: alive,
			status: session.StatusRunning, act: session.ActivityBusy, src: session.SourceTranscript},
		{name: "data newer than the hook wins",
			rec: busyRec(), obs: pending(t0.Add(-500 * time.Millisecond)), hook: hook(t0.Add(-time.Second), hookProc, owner), live: alive,
			status: session.StatusRunning, act: session.ActivityBusy, src: session.SourceTranscript},
		{name: "the record carries its hook while the data stays still",
			rec: waitingRec(), obs: pending(t0.Add(-2 * time.Second)), live: alive,
			status: session.StatusRunning, act: session.ActivityWaiting, src: session.SourceHook, wait: permission, since: t0.Add(-time.Second)},
		{name: "the data moves (an approved tool starts): the carried hook ends",
			rec: waitingRec(), obs: pending(t0.Add(-100 * time.Millisecond)), live: alive,
			status: session.StatusRunning, act: session.ActivityBusy, src: session.SourceTranscript, since: t0.Add(-100 * time.Millisecond), events: 1},
		{name: "a carried hook is the recorded owner's only",
			rec: waitingRec(), obs: func() *adapters.Observed {
				o := pending(t0.Add(-2 * time.Second))
				o.Owners = []adapters.Owner{own(777, false)}
				return o
			}(), live: map[proc.Identity]proc.Liveness{stranger: proc.Alive},
			status: session.StatusRunning, act: session.ActivityBusy, src: session.SourceTranscript, events: 1},
		{name: "a hook never makes a session running: the owner is dead",
			rec: busyRec(), obs: pending(t0.Add(-2 * time.Second)), hook: hook(t0.Add(-time.Second), hookProc, owner), live: ownerDead,
			status: session.StatusInterrupted, events: 1},
		{name: "nor revives a stopped one",
			rec: func() *session.Record { r := rec(session.StatusStopped, &owner); return r }(), obs: &adapters.Observed{UpstreamID: "up-1", LastActivity: t0.Add(-time.Hour)},
			hook: hook(t0.Add(-time.Second), hookProc, owner), live: ownerDead, status: session.StatusStopped},
		{name: "idle from the data waits for input",
			rec: busyRec(), obs: &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityIdle, ActivitySource: session.SourceTranscript, LastActivity: t0.Add(-3 * time.Second)},
			live: alive, status: session.StatusRunning, act: session.ActivityIdle, src: session.SourceTranscript,
			wait: &session.WaitingFor{Kind: session.WaitingInput}, since: t0.Add(-3 * time.Second), events: 1},
		{name: "the registry's words for the same wait gain the hook's tool and input",
			rec: busyRec(), obs: &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityWaiting,
				ActivitySource: session.SourceRegistry, ActivityAt: t0.Add(-900 * time.Millisecond), LastActivity: t0.Add(-3 * time.Second),
				WaitingFor: &session.WaitingFor{Kind: session.WaitingPermission, Detail: "permission prompt"}},
			hook: hook(t0.Add(-time.Second), hookProc, owner), live: alive, status: session.StatusRunning, act: session.ActivityWaiting, src: session.SourceRegistry,
			wait: &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "sleep 6; echo hi", Detail: "permission prompt"}, since: t0.Add(-900 * time.Millisecond), events: 1},
		{name: "but not from a hook of an earlier prompt",
			rec: busyRec(), obs: &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityWaiting,
				ActivitySource: session.SourceRegistry, ActivityAt: t0.Add(-100 * time.Millisecond),
				WaitingFor: &session.WaitingFor{Kind: session.WaitingPermission, Detail: "permission prompt"}},
			hook: hook(t0.Add(-time.Minute), hookProc, owner), live: alive, status: session.StatusRunning, act: session.ActivityWaiting, src: session.SourceRegistry,
			wait: &session.WaitingFor{Kind: session.WaitingPermission, Detail: "permission prompt"}, events: 1},
		{name: "the registry set idle again after the recorded idle: a turn came and went between two passes",
			rec: idleRec(), obs: registryIdle(t0.Add(-200 * time.Millisecond)), live: alive,
			status: session.StatusRunning, act: session.ActivityIdle, src: session.SourceRegistry, wait: &session.WaitingFor{Kind: session.WaitingInput},
			since: t0.Add(-200 * time.Millisecond)},
		{name: "the registry's idle as old as the recorded one: activity_since stays",
			rec: idleRec(), obs: registryIdle(t0.Add(-time.Hour)), live: alive,
			status: session.StatusRunning, act: session.ActivityIdle, src: session.SourceRegistry, wait: &session.WaitingFor{Kind: session.WaitingInput},
			since: t0.Add(-time.Minute)},
		{name: "a registry time in the future does not move activity_since",
			rec: idleRec(), obs: registryIdle(t0.Add(time.Hour)), live: alive,
			status: session.StatusRunning, act: session.ActivityIdle, src: session.SourceRegistry, wait: &session.WaitingFor{Kind: session.WaitingInput},
			since: t0.Add(-time.Minute)},
		{name: "a Stop hook ends the turn before the data shows it",
			rec: busyRec(), obs: pending(t0.Add(-2 * time.Second)), hook: &hookEvidence{Hook: adapters.Hook{UpstreamID: "up-1", Event: "Stop", Activity: session.ActivityIdle,
				WaitingFor: &session.WaitingFor{Kind: session.WaitingInput}}, At: t0.Add(-time.Second), From: []proc.Identity{hookProc, owner}}, live: alive,
			status: session.StatusRunning, act: session.ActivityIdle, src: session.SourceHook, wait: &session.WaitingFor{Kind: session.WaitingInput}, events: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev := evidence{obs: tc.obs, hooks: hookList(tc.hook), probe: probeTable(tc.live), now: t0, grace: 30 * time.Second, stallAfter: 20 * time.Minute}
			got, evs := decide(tc.rec, ev)
			if got.Status != tc.status || got.Activity != tc.act || got.ActivitySource != tc.src || !got.WaitingFor.Equal(tc.wait) {
				t.Errorf("got %s/%q from %q waiting %+v (%s); want %s/%q from %q waiting %+v",
					got.Status, got.Activity, got.ActivitySource, got.WaitingFor, got.StatusReason, tc.status, tc.act, tc.src, tc.wait)
			}
			if !tc.since.IsZero() && (got.ActivitySince == nil || !got.ActivitySince.Equal(tc.since)) {
				t.Errorf("activity_since %v, want %v", got.ActivitySince, tc.since)
			}
			if got.Status.Terminal() && (got.ActivitySince != nil || got.WaitingFor != nil || got.ActivitySource != "") {
				t.Errorf("a dead session keeps activity fields: %+v", got)
			}
			if len(evs) != tc.events {
				t.Fatalf("events %+v, want %d", evs, tc.events)
			}
			if len(evs) > 0 && !evs[0].WaitingFor.Equal(got.WaitingFor) {
				t.Errorf("event waiting_for %+v, record %+v", evs[0].WaitingFor, got.WaitingFor)
			}
		})
	}
}

func hookList(h *hookEvidence) []*hookEvidence {
	if h == nil {
		return nil
	}
	return []*hookEvidence{h}
}

// The watchdog counts a hook from the owner's tree as progress: a tool
// that starts after the data has been still past the threshold is not
// stalled (it was flagged at once: the watchdog read only the data).
func TestBusyHookIsProgress(t *testing.T) {
	owner, hookProc := ident(100), ident(900)
	r := rec(session.StatusRunning, &owner)
	r.Activity, r.ActivitySource = session.ActivityBusy, session.SourceTranscript
	still := &adapters.Observed{UpstreamID: "up-1", Owners: []adapters.Owner{own(100, false)}, Activity: session.ActivityBusy,
		ActivitySource: session.SourceTranscript, LastActivity: t0.Add(-30 * time.Minute)}
	ev := evidence{obs: still, probe: probeTable(map[proc.Identity]proc.Liveness{owner: proc.Alive}), now: t0, grace: 30 * time.Second, stallAfter: 20 * time.Minute}
	if got, _ := decide(r, ev); got.Problem(session.ProblemStalled) == nil {
		t.Fatalf("no hook, data still 30 min: not stalled (%+v)", got.Problems)
	}
	ev.hooks = []*hookEvidence{{Hook: adapters.Hook{UpstreamID: "up-1", Event: "PreToolUse", Activity: session.ActivityBusy}, At: t0.Add(-time.Second), From: []proc.Identity{hookProc, owner}}}
	got, _ := decide(r, ev)
	if got.Activity != session.ActivityBusy || got.ActivitySource != session.SourceHook || got.Problem(session.ProblemStalled) != nil {
		t.Fatalf("a PreToolUse hook a second ago: %s from %s, problems %+v; want busy from the hook, not stalled", got.Activity, got.ActivitySource, got.Problems)
	}
	// Twenty minutes after that hook with nothing since, it is stalled.
	ev.now = t0.Add(21 * time.Minute)
	if got, _ := decide(got, ev); got.Problem(session.ProblemStalled) == nil {
		t.Fatalf("21 min after the hook: not stalled (%+v)", got.Problems)
	}
}
