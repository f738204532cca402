package tracker

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Another process naming the session (a script, another session's tool)
// posts a hook after the owner's PermissionRequest, before a pass decides:
// the owner's wait still shows. The box kept one hook per session, the
// latest whoever sent it, so the stranger's displaced the owner's and was
// itself ignored, and the wait disappeared. A flood of such hooks does
// not take the owner's place either.
func TestStrangersHooksDoNotHideTheOwnersWait(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	_, owner := startProcess(t, host)
	_, stranger := startProcess(t, host)
	ad := &fakeAdapter{name: "codex"}
	ad.set(adapters.Observation{Sessions: []adapters.Observed{{
		UpstreamID: "u1", Cwd: "/w", Owners: []adapters.Owner{{Identity: owner, Evidence: "writer lock"}}, OwnersExact: "lock table",
		Activity: session.ActivityBusy, ActivitySource: session.SourceTranscript, LastActivity: time.Now().Add(-time.Minute),
		InFlight: []adapters.Issue{{Kind: session.ProblemOrphanedToolCall, Key: "call-1"}},
	}}}, nil)
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	ctx := context.Background()
	pass := func() *session.Record {
		t.Helper()
		if _, err := tr.Reconcile(ctx, "test"); err != nil {
			t.Fatal(err)
		}
		return get(t, st, "u1")
	}
	if r := pass(); r.Status != session.StatusRunning || r.Activity != session.ActivityBusy {
		t.Fatalf("discovered: %s/%s", r.Status, r.Activity)
	}
	hookProc := proc.Identity{BootID: owner.BootID, PID: 999999, StartTicks: 1}
	perm := &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "make deploy"}
	tr.Hook("codex", adapters.Hook{UpstreamID: "u1", Event: "PermissionRequest", Activity: session.ActivityWaiting, WaitingFor: perm}, []proc.Identity{hookProc, owner})
	time.Sleep(time.Millisecond)
	tr.Hook("codex", adapters.Hook{UpstreamID: "u1", Event: "Stop", Activity: session.ActivityIdle}, []proc.Identity{stranger})
	r := pass()
	if r.Activity != session.ActivityWaiting || !r.WaitingFor.Equal(perm) || r.ActivitySource != session.SourceHook {
		t.Fatalf("after the owner's PermissionRequest and a stranger's Stop: %s %+v from %s; want waiting for the permission", r.Activity, r.WaitingFor, r.ActivitySource)
	}

	// The owner's next hook is recorded in its own place; strangers churn
	// only theirs.
	perm2 := &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "make release"}
	time.Sleep(time.Millisecond)
	tr.Hook("codex", adapters.Hook{UpstreamID: "u1", Event: "PermissionRequest", Activity: session.ActivityWaiting, WaitingFor: perm2}, []proc.Identity{hookProc, owner})
	for i := range 1000 {
		tr.Hook("codex", adapters.Hook{UpstreamID: "u1", Event: "PreToolUse", Activity: session.ActivityBusy},
			[]proc.Identity{{BootID: owner.BootID, PID: 500000 + i, StartTicks: 7}, stranger})
	}
	r = pass()
	if r.Activity != session.ActivityWaiting || !r.WaitingFor.Equal(perm2) {
		t.Fatalf("after the owner's second PermissionRequest and 1000 strangers' hooks: %s %+v; want waiting for %+v", r.Activity, r.WaitingFor, perm2)
	}
	snap := tr.hooks.snapshot(time.Now())
	if n := len(snap[hookKey{"codex", "u1"}]); n != 1+hookOthers {
		t.Errorf("%d hooks kept for the session, want the owner's and %d others", n, hookOthers)
	}
}

// A hook from the tree of a new owner no pass has recorded yet (a resume,
// a session started since the last pass) is taken once a pass knows the
// owner: it waits among the other senders' hooks, or among the ids no
// record has.
func TestHookBeforeItsOwnerIsRecorded(t *testing.T) {
	host := proc.NewHost()
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	_, owner := startProcess(t, host)
	ad := &fakeAdapter{name: "claude"}
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	q := &session.WaitingFor{Kind: session.WaitingQuestion, Tool: "AskUserQuestion", Question: "Which database?"}
	tr.Hook("claude", adapters.Hook{UpstreamID: "u2", Event: "PreToolUse", Activity: session.ActivityWaiting, WaitingFor: q},
		[]proc.Identity{{BootID: owner.BootID, PID: 999998, StartTicks: 1}, owner})
	ad.set(adapters.Observation{Sessions: []adapters.Observed{{
		UpstreamID: "u2", Cwd: "/w", Owners: []adapters.Owner{{Identity: owner, Evidence: "registry"}},
		Activity: session.ActivityBusy, ActivitySource: session.SourceTranscript, LastActivity: time.Now().Add(-time.Minute),
	}}}, nil)
	if _, err := tr.Reconcile(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	if r := get(t, st, "u2"); r.Activity != session.ActivityWaiting || !r.WaitingFor.Equal(q) {
		t.Fatalf("a session's first pass after its owner's hook: %s %+v; want waiting for the question", r.Activity, r.WaitingFor)
	}
}

// The box stays bounded whatever arrives: ids no record has, strangers'
// hooks for a known session, and age.
func TestHookBoxBounds(t *testing.T) {
	var b hookBox
	owner := ident(100)
	now := t0
	h := func(up string, at time.Time, from ...proc.Identity) *hookEvidence {
		return &hookEvidence{Hook: adapters.Hook{UpstreamID: up, Activity: session.ActivityBusy}, At: at, From: from}
	}
	b.put("codex", h("known", now, owner), true, true)
	for i := range 50000 {
		now = now.Add(time.Microsecond)
		b.put("codex", h(fmt.Sprintf("forged-%d", i), now, ident(200+i)), false, false)
		b.put("codex", h("known", now, ident(200+i)), true, false)
	}
	if n := len(b.unknown); n != hookUnknownIDs {
		t.Errorf("%d unknown ids kept, want %d", n, hookUnknownIDs)
	}
	if _, ok := b.unknown[hookKey{"codex", "forged-49999"}]; !ok {
		t.Error("the newest unknown id was dropped, not the oldest")
	}
	snap := b.snapshot(now)
	known := snap[hookKey{"codex", "known"}]
	if len(known) != 1+hookOthers || known[0].From[0] != owner {
		t.Fatalf("the known session keeps %d hooks (first from %v); want its owner's first and %d others", len(known), known[0].From, hookOthers)
	}
	if got := latestFrom(known, owner); got == nil || got.From[0] != owner {
		t.Errorf("latestFrom(owner) = %+v", got)
	}
	if len(snap) != 1+hookUnknownIDs {
		t.Errorf("snapshot of %d sessions, want %d", len(snap), 1+hookUnknownIDs)
	}
	// Past hookKeep, all of it goes.
	if snap := b.snapshot(now.Add(hookKeep + time.Second)); len(snap) != 0 || len(b.known)+len(b.unknown) != 0 {
		t.Errorf("after hookKeep: %d in the snapshot, %d kept", len(snap), len(b.known)+len(b.unknown))
	}
}
