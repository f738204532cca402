package opencode

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/session"
)

// serve loads a session's messages and parts from the database into the
// fake server, as `opencode serve` on that database would show them, and
// makes the adapter find the server (a fixture `opencode serve --port`
// process that does not hold the database).
func (f *repairFixture) serve(t *testing.T, srv *opencodetest.FakeServer, sessionIDs ...string) *Adapter {
	t.Helper()
	if err := srv.LoadFromDB(f.dbPath, sessionIDs...); err != nil {
		t.Fatal(err)
	}
	a := f.adapter(nil)
	snap := opencodetest.Snapshot(f.server(400, time.Hour, false, "/srv", srv.Port()))
	mustDiscover(t, a, snap)
	if len(a.lastServers()) != 1 {
		t.Fatalf("the fake server was not found: %v", a.lastServers())
	}
	return a
}

func requests(srv *opencodetest.FakeServer, method string) []string {
	var out []string
	for _, r := range srv.RequestLog() {
		if strings.HasPrefix(r, method+" ") {
			out = append(out, r)
		}
	}
	return out
}

// The restart shape: a live server that has the session reports it idle
// while its data shows a running tool. The repair goes through the
// server's API (PATCH to error, interrupted, time.end) and writes nothing
// to the database itself; a second repair plans nothing.
func TestRepairThroughIdleServer(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	before := rows(t, f.dbPath, sh.SessionID)
	a := f.serve(t, srv, sh.SessionID)
	ctx := context.Background()
	tg := f.target(sh.SessionID, "/w/a")

	plan, err := a.PlanRepair(ctx, tg)
	if err != nil || count(plan)[session.OutcomePlanned] != 1 || plan[0].Target != sh.ToolPartID || !strings.Contains(plan[0].Detail, srv.URL) {
		t.Fatalf("plan %+v %v", plan, err)
	}
	if len(requests(srv, "PATCH")) != 0 {
		t.Fatal("a plan patched")
	}
	steps, err := a.ApplyRepair(ctx, tg)
	if err != nil || count(steps)[session.OutcomeDone] != 1 || count(steps)[session.OutcomeSkipped] != 1 {
		t.Fatalf("apply %+v %v", steps, err)
	}
	if steps[1].Action != "leave assistant message open" {
		t.Errorf("the open message is not reported: %+v", steps[1])
	}
	p := srv.PartObject(sh.SessionID, sh.ToolPartID)
	if path(p, "state", "status") != "error" || path(p, "state", "metadata", "interrupted") != true || path(p, "state", "time", "end") == nil ||
		path(p, "state", "input", "command") == nil || path(p, "state", "error") != abortedToolError || path(p, "callID") == nil {
		t.Fatalf("patched part %v", p)
	}
	if n := srv.Aborted[sh.SessionID]; n != 0 {
		t.Errorf("an idle session was aborted %d times", n)
	}
	if !equalMaps(rows(t, f.dbPath, sh.SessionID), before) {
		t.Fatal("the server rung wrote the database behind the server's back")
	}
	again, err := a.PlanRepair(ctx, tg)
	if err != nil || count(again)[session.OutcomePlanned] != 0 {
		t.Fatalf("a repaired session plans %+v %v", again, err)
	}
}

// A server that has the session but answers 500: the error is reported
// and nothing is written, neither through it nor offline.
func TestRepairServerAnswers500(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(sh opencodetest.Shape) string
	}{
		{"session lookup", func(sh opencodetest.Shape) string { return "/session/" + sh.SessionID }},
		{"message read", func(sh opencodetest.Shape) string {
			return "/session/" + sh.SessionID + "/message/" + sh.AssistantMessageID
		}},
		{"part patch", func(sh opencodetest.Shape) string {
			return "/session/" + sh.SessionID + "/message/" + sh.AssistantMessageID + "/part/" + sh.ToolPartID
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRepairFixture(t)
			srv := opencodetest.NewFakeServer()
			defer srv.Close()
			sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
			before := rows(t, f.dbPath, sh.SessionID)
			a := f.serve(t, srv, sh.SessionID)
			srv.Lock()
			srv.Fail[tc.fail(sh)] = 500
			srv.Unlock()
			steps, err := a.ApplyRepair(context.Background(), f.target(sh.SessionID, "/w/a"))
			if err != nil {
				t.Fatal(err)
			}
			if c := count(steps); c[session.OutcomeFailed] != 1 || c[session.OutcomeDone] != 0 {
				t.Fatalf("steps %+v", steps)
			}
			var failed session.Step
			for _, s := range steps {
				if s.Outcome == session.OutcomeFailed {
					failed = s
				}
			}
			if !strings.Contains(failed.Error, "500") {
				t.Errorf("the failure does not say what the server answered: %+v", failed)
			}
			if srv.PartState(sh.SessionID, sh.ToolPartID) != "running" {
				t.Error("the part changed on the server")
			}
			if !equalMaps(rows(t, f.dbPath, sh.SessionID), before) {
				t.Fatal("the database was written")
			}
			if bs, _ := a.backups(f.dbPath); len(bs) != 0 {
				t.Errorf("fell through to the offline rung: backups %v", bs)
			}
		})
	}
}

// Abort against a server whose session stays busy until its stuck tool
// part is patched (a tool that ignores the abort): the pending question is
// rejected, the turn aborted, the wait bounded, the part patched, and the
// session then idle, each step reported.
func TestAbortStuckUntilPatched(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	other, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	a := f.serve(t, srv, sh.SessionID, other.SessionID)
	srv.SetStatus("/w/a", sh.SessionID, opencodetest.Status{Type: "busy"})
	srv.Lock()
	srv.StuckUntilPatched[sh.SessionID] = true
	srv.Questions = []opencodetest.Pending{{ID: "que_1", SessionID: sh.SessionID}, {ID: "que_2", SessionID: other.SessionID}}
	srv.Permissions = []opencodetest.Pending{{ID: "per_1", SessionID: sh.SessionID}}
	srv.Unlock()

	start := time.Now()
	steps, err := a.Abort(context.Background(), f.target(sh.SessionID, "/w/a"))
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range steps {
		got = append(got, s.Action+"="+s.Outcome)
	}
	want := []string{
		"reject pending question=done", "reject pending permission=done", "abort turn=done",
		"wait for idle=skipped", "mark tool part interrupted=done", "session idle after patching=done",
		"leave assistant message open=skipped",
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("steps\n got %v\nwant %v\n%+v", got, want, steps)
	}
	if !strings.Contains(steps[3].Detail, "still busy") {
		t.Errorf("wait step: %+v", steps[3])
	}
	srv.Lock()
	rejected, aborted := append([]string(nil), srv.Rejected...), srv.Aborted[sh.SessionID]
	_, stillBusy := srv.Statuses["/w/a"][sh.SessionID]
	srv.Unlock()
	if strings.Join(rejected, ",") != "que_1,per_1" || aborted != 1 || stillBusy {
		t.Errorf("server: rejected %v, aborted %d, busy %v", rejected, aborted, stillBusy)
	}
	if srv.PartState(sh.SessionID, sh.ToolPartID) != "error" || srv.PartState(other.SessionID, other.ToolPartID) != "running" {
		t.Error("wrong parts patched")
	}
	if took > 3*time.Second {
		t.Errorf("abort took %s with a 300ms wait", took)
	}
}

// A session that goes idle on abort, with its tool left running in the
// data (the server never marked it): patched after the wait.
func TestAbortGoesIdleThenPatches(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-time.Second)) // fresh: abort ignores the grace window
	a := f.serve(t, srv, sh.SessionID)
	srv.SetStatus("/w/a", sh.SessionID, opencodetest.Status{Type: "busy"})
	steps, err := a.Abort(context.Background(), f.target(sh.SessionID, "/w/a"))
	if err != nil || count(steps)[session.OutcomeDone] != 3 || steps[1].Action != "wait for idle" || steps[1].Outcome != session.OutcomeDone {
		t.Fatalf("%+v %v", steps, err)
	}
	if srv.PartState(sh.SessionID, sh.ToolPartID) != "error" {
		t.Error("part not patched")
	}
}

// repair (not abort) leaves a busy session whose data moves alone.
func TestRepairLeavesFreshBusySession(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-5*time.Second))
	a := f.serve(t, srv, sh.SessionID)
	srv.SetStatus("/w/a", sh.SessionID, opencodetest.Status{Type: "busy"})
	steps, err := a.ApplyRepair(context.Background(), f.target(sh.SessionID, "/w/a"))
	if err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomePending || !strings.Contains(steps[0].Detail, "status busy") {
		t.Fatalf("%+v %v", steps, err)
	}
	if len(requests(srv, "POST"))+len(requests(srv, "PATCH")) != 0 {
		t.Fatalf("a fresh busy session was acted on: %v", srv.RequestLog())
	}
}

// The abort of a session whose abort answers 500: reported, nothing after
// it attempted, nothing written.
func TestAbortServerFails(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	before := rows(t, f.dbPath, sh.SessionID)
	a := f.serve(t, srv, sh.SessionID)
	srv.SetStatus("/w/a", sh.SessionID, opencodetest.Status{Type: "busy"})
	srv.Lock()
	srv.Fail["/session/"+sh.SessionID+"/abort"] = 500
	srv.Unlock()
	steps, err := a.Abort(context.Background(), f.target(sh.SessionID, "/w/a"))
	if err != nil || len(steps) != 2 || steps[0].Outcome != session.OutcomeFailed || !strings.Contains(steps[0].Error, "HTTP 500") ||
		steps[1].Outcome != session.OutcomeSkipped || !strings.Contains(steps[1].Detail, "not attempted") {
		t.Fatalf("%+v %v", steps, err)
	}
	if len(requests(srv, "PATCH")) != 0 || !equalMaps(rows(t, f.dbPath, sh.SessionID), before) {
		t.Fatal("written after a failed abort")
	}
}

// No server has the session and its owner is dead: abort is the repair.
func TestAbortWithoutServerRepairsOffline(t *testing.T) {
	f := newRepairFixture(t)
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	steps, err := f.adapter(nil).Abort(context.Background(), f.target(sh.SessionID, "/w/a"))
	if err != nil || count(steps)[session.OutcomeDone] != 3 {
		t.Fatalf("%+v %v", steps, err)
	}
	checkRepaired(t, f.dbPath, sh)
}

// OfflineOnly (the automatic policy) never uses a server: with the
// database free it repairs offline.
func TestOfflineOnlySkipsServer(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	a := f.serve(t, srv, sh.SessionID)
	tg := f.target(sh.SessionID, "/w/a")
	tg.OfflineOnly = true
	steps, err := a.ApplyRepair(context.Background(), tg)
	if err != nil || count(steps)[session.OutcomeDone] != 3 {
		t.Fatalf("%+v %v", steps, err)
	}
	if len(requests(srv, "PATCH")) != 0 {
		t.Fatal("the offline policy used the server")
	}
	checkRepaired(t, f.dbPath, sh)
}

// A server answers for every session of the database. One that is not
// running this session (idle there) may sit beside the process that is —
// an `opencode run` holds the database and opens no port — so nothing is
// written through the server either: pending, naming that process. The
// server's own hold on the database does not count.
func TestRepairThroughServerHeldByAnother(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	before := rows(t, f.dbPath, sh.SessionID)
	f.proc(401, time.Hour, true, "/w/a", "opencode", "run", "fix the tests")
	a := f.serve(t, srv, sh.SessionID)
	tg := f.target(sh.SessionID, "/w/a")
	for _, apply := range []bool{false, true} {
		var steps []session.Step
		var err error
		if apply {
			steps, err = a.ApplyRepair(context.Background(), tg)
		} else {
			steps, err = a.PlanRepair(context.Background(), tg)
		}
		if err != nil || len(steps) != 1 || steps[0].Outcome != session.OutcomePending || !strings.Contains(steps[0].Detail, "held by pid 401") {
			t.Fatalf("apply=%v: %+v %v", apply, steps, err)
		}
	}
	if n := len(requests(srv, "PATCH")); n != 0 {
		t.Fatalf("%d PATCHes through a server beside the session's process", n)
	}
	if !equalMaps(rows(t, f.dbPath, sh.SessionID), before) {
		t.Fatal("written while another process holds the database")
	}

	// The server itself holding the database is no reason to wait.
	f2 := newRepairFixture(t)
	srv2 := opencodetest.NewFakeServer()
	defer srv2.Close()
	sh2, _ := f2.db.InterruptedMidTool("/w/a", f2.now.Add(-2*time.Minute))
	if err := srv2.LoadFromDB(f2.dbPath, sh2.SessionID); err != nil {
		t.Fatal(err)
	}
	a2 := f2.adapter(nil)
	mustDiscover(t, a2, opencodetest.Snapshot(f2.server(400, time.Hour, true, "/srv", srv2.Port())))
	steps, err := a2.ApplyRepair(context.Background(), f2.target(sh2.SessionID, "/w/a"))
	if err != nil || count(steps)[session.OutcomeDone] != 1 {
		t.Fatalf("repair through the server that holds the database: %+v %v", steps, err)
	}
}
