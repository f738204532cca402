package opencode

import (
	"context"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

func TestParseArgs(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want ocArgs
	}{
		{nil, ocArgs{}},
		{[]string{"/home/me/project"}, ocArgs{Project: "/home/me/project"}},
		{[]string{"-s", "ses_1"}, ocArgs{Session: "ses_1"}},
		{[]string{"--session=ses_2", "--fork"}, ocArgs{Session: "ses_2", Fork: true}},
		{[]string{"run", "-s", "ses_3", "fix the tests"}, ocArgs{Sub: "run", Session: "ses_3", Message: `"fix the tests"`}},
		{[]string{"run", "--port", "4096", "msg"}, ocArgs{Sub: "run", Port: 4096, PortSet: true, Message: "msg"}},
		{[]string{"run", "Run", "the", "job", "--", "-x"}, ocArgs{Sub: "run", Message: "Run the job -x"}},
		{[]string{"run", "Run the job", `say "hi" now`, "x"}, ocArgs{Sub: "run", Message: `"Run the job" "say \"hi\" now" x`}},
		{[]string{"serve", "--hostname", "0.0.0.0", "--port=0"}, ocArgs{Sub: "serve", Hostname: "0.0.0.0", PortSet: true}},
		{[]string{"--print-logs", "-c", "web"}, ocArgs{Sub: "web", Continue: true}},
		{[]string{"attach", "http://127.0.0.1:4096"}, ocArgs{Sub: "attach"}},
		{[]string{"run", "--dir", "sub", "-m", "p/m", "go"}, ocArgs{Sub: "run", Dir: "sub", Message: "go"}},
		{[]string{"--port", "notanumber"}, ocArgs{}},
		{[]string{"-s"}, ocArgs{}},
	} {
		if got := parseArgs(c.argv); !reflect.DeepEqual(got, c.want) {
			t.Errorf("parseArgs(%q) = %+v, want %+v", c.argv, got, c.want)
		}
	}
}

// fixture is a data dir, a proc tree and start times for fixture processes.
type fixture struct {
	t      *testing.T
	dir    string
	dbPath string
	db     *opencodetest.DB
	tree   opencodetest.ProcTree
	starts opencodetest.StartTimes
	now    time.Time
}

func newFixture(t *testing.T) *fixture {
	dir := t.TempDir()
	f := &fixture{t: t, dir: dir, dbPath: filepath.Join(dir, "opencode.db"), tree: opencodetest.ProcTree{Root: filepath.Join(t.TempDir(), "proc")},
		starts: opencodetest.StartTimes{}, now: time.Now()}
	f.db = opencodetest.MustCreate(t, f.dbPath)
	return f
}

// proc adds a fixture process started `age` ago, optionally holding the db.
func (f *fixture) proc(pid int, age time.Duration, holdsDB bool, cwd string, argv ...string) *proc.Process {
	f.t.Helper()
	f.starts[pid] = f.now.Add(-age)
	targets := []string{"/dev/null"}
	if holdsDB {
		targets = append(targets, f.dbPath, f.dbPath+"-wal", f.dbPath+"-shm")
	}
	if err := f.tree.OpenFiles(pid, targets...); err != nil {
		f.t.Fatal(err)
	}
	return opencodetest.Proc(pid, uint64(1000+pid), cwd, argv...)
}

// server adds a fixture `opencode serve --port <port>` process, started
// `age` ago, that holds a socket of this uid listening on 127.0.0.1:port
// (the fake server's port: sessiond asks only a listener it can check).
func (f *fixture) server(pid int, age time.Duration, holdsDB bool, cwd string, port int) *proc.Process {
	f.t.Helper()
	p := f.proc(pid, age, holdsDB, cwd, "opencode", "serve", "--port", strconv.Itoa(port))
	if err := f.tree.Listen(pid, port, uint64(1_000_000+pid)); err != nil {
		f.t.Fatal(err)
	}
	return p
}

func (f *fixture) adapter(mod func(*Config)) *Adapter {
	cfg := Config{DataDir: f.dir, ProcRoot: f.tree.Root, StartTimer: f.starts, BusyTimeout: 200 * time.Millisecond,
		Now: func() time.Time { return f.now }, ServerTimeout: 500 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	return New(cfg)
}

func ownerPIDs(o adapters.Observed) []int {
	var out []int
	for _, ow := range o.Owners {
		out = append(out, ow.Identity.PID)
	}
	return out
}

func TestOwnersInferred(t *testing.T) {
	f := newFixture(t)
	last := f.now.Add(-time.Minute)
	a1, _ := f.db.InterruptedMidTool("/w/a", last)
	b1, _ := f.db.Finished("/w/b", last)
	c1, _ := f.db.Finished("/w/c", last.Add(-time.Hour))
	d1, _ := f.db.Finished("/w/d", last)

	wrapper := f.proc(103, time.Hour, false, "/w/b", "/usr/bin/node", "/usr/lib/node_modules/opencode-ai/bin/opencode", "/w/b")
	native := f.proc(104, time.Hour, true, "/w/b", "/usr/lib/node_modules/opencode-linux-x64/bin/opencode", "/w/b")
	native.PPID = 103
	snap := opencodetest.Snapshot(
		f.proc(100, 10*time.Minute, true, "/w/a", "opencode"),  // fits
		f.proc(101, 0, true, "/w/a", "opencode"),               // started after the last write
		f.proc(102, 10*time.Minute, false, "/w/a", "opencode"), // does not hold the db
		wrapper, native, // one owner: the native child
		f.proc(105, 10*time.Minute, true, "/w/a", "opencode", "attach", "http://x"), // a client, not an owner
		f.proc(106, time.Minute/2, true, "/home", "opencode", "-s", c1.SessionID),   // named
		f.proc(107, time.Minute/2, true, "/home", "opencode", "-s", d1.SessionID, "--fork"),
		f.proc(108, time.Hour, true, "/w/a", "/usr/bin/vim", "opencode.db"),
	)
	obs, err := f.adapter(nil).Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	a := find(t, obs, a1.SessionID)
	if got := ownerPIDs(a); !reflect.DeepEqual(got, []int{100}) {
		t.Fatalf("/w/a owners %v, want [100]", got)
	}
	if ow := a.Owners[0]; !ow.Inferred || !strings.Contains(ow.Evidence, "holds opencode.db open") || !strings.Contains(ow.Evidence, "cwd") {
		t.Errorf("inferred owner: %+v", ow)
	}
	if ow := a.Owners[0].Identity; ow.BootID != "test-boot" || ow.StartTicks != 1100 {
		t.Errorf("owner identity %+v: want the snapshot's", ow)
	}
	if got := ownerPIDs(find(t, obs, b1.SessionID)); !reflect.DeepEqual(got, []int{104}) {
		t.Errorf("/w/b owners %v, want the native child only", got)
	}
	c := find(t, obs, c1.SessionID)
	if got := ownerPIDs(c); !reflect.DeepEqual(got, []int{106}) || c.Owners[0].Inferred || !strings.Contains(c.Owners[0].Evidence, "--session") {
		t.Errorf("named owner: %+v", c.Owners)
	}
	if got := ownerPIDs(find(t, obs, d1.SessionID)); len(got) != 0 {
		t.Errorf("--fork does not own the forked session: %v", got)
	}
}

func TestOwnersTwoCandidates(t *testing.T) {
	f := newFixture(t)
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Second))
	snap := opencodetest.Snapshot(
		f.proc(200, time.Hour, true, "/w", "opencode"),
		f.proc(201, time.Minute, true, "/w", "opencode", "run", "go"),
	)
	o := find(t, mustDiscover(t, f.adapter(nil), snap), s.SessionID)
	if got := ownerPIDs(o); !reflect.DeepEqual(got, []int{200, 201}) && !reflect.DeepEqual(got, []int{201, 200}) {
		t.Fatalf("owners %v, want both", got)
	}
	for _, ow := range o.Owners {
		if !ow.Inferred {
			t.Errorf("owner %+v should be inferred", ow)
		}
	}
}

func mustDiscover(t *testing.T, a *Adapter, snap *proc.Snapshot) adapters.Observation {
	t.Helper()
	obs, err := a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func TestOwnersFallbackAndParent(t *testing.T) {
	f := newFixture(t)
	last := f.now.Add(-time.Minute)
	flying, _ := f.db.InterruptedMidTool("/w/x", last)
	done, _ := f.db.Finished("/w/y", last)
	ch, _ := f.db.Child("/w/z", last, "running")
	snap := opencodetest.Snapshot(
		f.proc(300, time.Hour, true, "/srv", "opencode", "serve"),
		f.proc(301, time.Hour, true, "/home", "opencode", "-s", ch.SessionID),
	)
	obs := mustDiscover(t, f.adapter(nil), snap)
	x := find(t, obs, flying.SessionID)
	if got := ownerPIDs(x); len(got) != 2 || !strings.Contains(x.Owners[0].Evidence, "no directory match") {
		t.Errorf("in flight without a directory match: owners %+v", x.Owners)
	}
	if got := ownerPIDs(find(t, obs, done.SessionID)); len(got) != 0 {
		t.Errorf("finished session without a directory match got owners %v", got)
	}
	c := find(t, obs, ch.ChildID)
	if got := ownerPIDs(c); !reflect.DeepEqual(got, []int{301}) || !strings.Contains(c.Owners[0].Evidence, "parent session") {
		t.Errorf("child owners %+v, want the parent's named owner", c.Owners)
	}
}

func TestServerReportsBusy(t *testing.T) {
	f := newFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	last := f.now.Add(-time.Hour)
	busy, _ := f.db.InterruptedMidTool("/w/s", last)
	retry, _ := f.db.InterruptedMidTool("/w/s", last)
	perm, _ := f.db.InterruptedMidTool("/w/s", last)
	srv.SetStatus("/w/s", busy.SessionID, opencodetest.Status{Type: "busy"})
	srv.SetStatus("/w/s", retry.SessionID, opencodetest.Status{Type: "retry", Attempt: 2, Message: "rate limited", Next: f.now.Add(time.Minute).UnixMilli()})
	srv.SetStatus("/w/s", perm.SessionID, opencodetest.Status{Type: "busy"})
	srv.Permissions = []opencodetest.Pending{{ID: "per_1", SessionID: perm.SessionID, Permission: "bash", Patterns: []string{"rm -rf", "build/"}}}
	snap := opencodetest.Snapshot(f.server(400, time.Hour, false, "/srv", srv.Port()))
	a := f.adapter(nil)
	obs := mustDiscover(t, a, snap)
	b := find(t, obs, busy.SessionID)
	if got := ownerPIDs(b); !reflect.DeepEqual(got, []int{400}) || b.Owners[0].Inferred || !strings.Contains(b.Owners[0].Evidence, "busy") {
		t.Fatalf("busy on server: owners %+v", b.Owners)
	}
	if b.Activity != session.ActivityBusy || !strings.Contains(b.ActivityEvidence, "server") {
		t.Errorf("busy on server: activity %s (%s)", b.Activity, b.ActivityEvidence)
	}
	r := find(t, obs, retry.SessionID)
	if r.Activity != session.ActivityBusy || !strings.Contains(r.ActivityEvidence, "retry") || !strings.Contains(r.ActivityEvidence, "next at") {
		t.Errorf("retry: %s (%s)", r.Activity, r.ActivityEvidence)
	}
	want := session.WaitingFor{Kind: session.WaitingPermission, Tool: "bash", Input: "rm -rf build/"}
	if p := find(t, obs, perm.SessionID); p.Activity != session.ActivityWaiting || !strings.Contains(p.ActivityEvidence, "permission") ||
		p.WaitingFor == nil || *p.WaitingFor != want {
		t.Errorf("permission: %s %+v (%s)", p.Activity, p.WaitingFor, p.ActivityEvidence)
	}
	if s := a.lastServers(); len(s) != 1 || s[0].URL != srv.URL || s[0].Owner.PID != 400 || s[0].Version != opencodetest.Version {
		t.Errorf("servers %+v", s)
	}
	asked := strings.Join(srv.RequestLog(), "\n")
	if !strings.Contains(asked, "GET /session/status?directory=%2Fw%2Fs") {
		t.Errorf("status not asked for the in-flight directory:\n%s", asked)
	}
}

func TestServerBasicAuth(t *testing.T) {
	f := newFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	srv.Password = "s3cret"
	srv.Username = "me"
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Hour))
	srv.SetStatus("", s.SessionID, opencodetest.Status{Type: "busy"})
	snap := opencodetest.Snapshot(f.server(500, time.Hour, false, "/srv", srv.Port()))

	a := f.adapter(nil)
	if o := find(t, mustDiscover(t, a, snap), s.SessionID); len(o.Owners) != 0 || len(a.lastServers()) != 0 {
		t.Fatalf("without the password: owners %v, servers %v", o.Owners, a.lastServers())
	}
	a = f.adapter(func(c *Config) { c.ServerPassword, c.ServerUsername = "s3cret", "me" })
	if o := find(t, mustDiscover(t, a, snap), s.SessionID); len(o.Owners) != 1 {
		t.Fatalf("with the password: owners %v", o.Owners)
	}
}

func TestServerFoundByListeningSocket(t *testing.T) {
	f := newFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Hour))
	srv.SetStatus("", s.SessionID, opencodetest.Status{Type: "busy"})
	p := f.proc(600, time.Hour, false, "/srv", "opencode", "web")
	if err := f.tree.Listen(600, srv.Port(), 424242); err != nil {
		t.Fatal(err)
	}
	a := f.adapter(nil)
	if o := find(t, mustDiscover(t, a, opencodetest.Snapshot(p)), s.SessionID); len(o.Owners) != 1 || o.Owners[0].Identity.PID != 600 {
		t.Fatalf("owners %+v", o.Owners)
	}
}

func TestServerErrors(t *testing.T) {
	f := newFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Hour))
	srv.SetStatus("", s.SessionID, opencodetest.Status{Type: "busy"})
	srv.Fail["/session/status"] = 500
	snap := opencodetest.Snapshot(f.server(700, time.Hour, false, "/srv", srv.Port()))
	a := f.adapter(nil)
	o := find(t, mustDiscover(t, a, snap), s.SessionID)
	if len(o.Owners) != 0 || len(o.Problems) != 0 {
		t.Fatalf("status 500: owners %v problems %v", o.Owners, o.Problems)
	}
	if len(a.lastServers()) != 1 {
		t.Fatalf("a healthy server whose status fails is still a server: %v", a.lastServers())
	}
	// A hanging server costs at most the timeout.
	srv.Lock()
	srv.Delay = 5 * time.Second
	srv.Unlock()
	start := time.Now()
	mustDiscover(t, a, snap)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a hanging server held the pass for %s", took)
	}
	if len(a.lastServers()) != 0 {
		t.Fatalf("a server that times out is not reachable: %v", a.lastServers())
	}
}

// The seed report's shape: a live server that owns the session reports it
// idle while the data still shows the turn in flight. The work is stale:
// activity idle, and the in-flight items are shown as problems now.
func TestServerIdleMakesInFlightStale(t *testing.T) {
	f := newFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Hour))
	q, _ := f.db.WaitingOnQuestion("/w", f.now.Add(-time.Hour))
	snap := opencodetest.Snapshot(f.server(800, 2*time.Hour, true, "/w", srv.Port()))
	obs := mustDiscover(t, f.adapter(nil), snap)
	o := find(t, obs, s.SessionID)
	if got := ownerPIDs(o); !reflect.DeepEqual(got, []int{800}) {
		t.Fatalf("owners %v", got)
	}
	if o.Activity != session.ActivityIdle || !strings.Contains(o.ActivityEvidence, "stale") {
		t.Errorf("activity %s (%s), want idle/stale", o.Activity, o.ActivityEvidence)
	}
	if len(issueKeys(o.Problems, session.ProblemOrphanedToolCall)) != 1 || len(issueKeys(o.Problems, session.ProblemIncompleteMessage)) != 1 {
		t.Errorf("problems %+v", o.Problems)
	}
	if w := find(t, obs, q.SessionID); w.Activity != session.ActivityIdle || len(w.Problems) == 0 {
		t.Errorf("stale question: %s (%s) %v", w.Activity, w.ActivityEvidence, w.Problems)
	}

	// Busy on the server but no pending question: the question part is stuck.
	srv.SetStatus("/w", q.SessionID, opencodetest.Status{Type: "busy"})
	w := find(t, mustDiscover(t, f.adapter(nil), snap), q.SessionID)
	if w.Activity != session.ActivityBusy || !strings.Contains(w.ActivityEvidence, "stuck") {
		t.Errorf("stuck question: %s (%s)", w.Activity, w.ActivityEvidence)
	}
	// With the question pending, it waits.
	srv.Lock()
	srv.Questions = []opencodetest.Pending{{ID: "que_1", SessionID: q.SessionID, Question: "Deploy to  staging\nor production?"}}
	srv.Unlock()
	w = find(t, mustDiscover(t, f.adapter(nil), snap), q.SessionID)
	if w.Activity != session.ActivityWaiting || w.WaitingFor == nil || w.WaitingFor.Kind != session.WaitingQuestion ||
		w.WaitingFor.Question != "Deploy to staging or production?" {
		t.Errorf("pending question: %s %+v (%s)", w.Activity, w.WaitingFor, w.ActivityEvidence)
	}
}

// OpenCode starts a tool with fork and exec: a snapshot between the two
// sees a child with its parent's argv, cwd and open database. It is not an
// owner: after the exec it is the tool (same pid and start time), and it
// would keep a killed session running while the tool runs.
func TestForkedChildIsNotAnOwner(t *testing.T) {
	f := newFixture(t)
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Minute))
	owner := f.proc(900, time.Hour, true, "/w", "/usr/lib/opencode/bin/opencode", "run", "go")
	child := f.proc(901, time.Hour-time.Second, true, "/w", "/usr/lib/opencode/bin/opencode", "run", "go")
	child.PPID = 900
	o := find(t, mustDiscover(t, f.adapter(nil), opencodetest.Snapshot(owner, child)), s.SessionID)
	if got := ownerPIDs(o); !reflect.DeepEqual(got, []int{900}) {
		t.Fatalf("owners %v, want only the opencode itself [900]", got)
	}
	// Two opencode run processes that are not parent and child are both
	// candidates, as before.
	other := f.proc(902, time.Hour, true, "/w", "/usr/lib/opencode/bin/opencode", "run", "go")
	o = find(t, mustDiscover(t, f.adapter(nil), opencodetest.Snapshot(owner, other)), s.SessionID)
	if got := ownerPIDs(o); len(got) != 2 {
		t.Fatalf("owners %v, want both unrelated processes", got)
	}
}

// OpenCode 1.18.33 runs a tool as its child in a session of its own,
// with OPENCODE_PID. Killed, the opencode leaves the tool a reapable
// orphan of its sessions (the tree was seen while it lived); a process
// that merely carries the same OPENCODE_PID (a pane of a tmux server a
// tool started: its own session, another parent) is a suspect, named but
// never reapable; one naming an opencode never seen is not named at all.
func TestOrphanProcesses(t *testing.T) {
	f := newFixture(t)
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Minute))
	owner := f.proc(900, time.Hour, true, "/w", "opencode", "run", "go")
	tool := opencodetest.Proc(901, 5000, "/w", "python3", "-c", "sleep")
	tool.Env = map[string]string{"OPENCODE": "1", "OPENCODE_PID": "900"}
	tool.PPID, tool.SID, tool.PGID = 900, 901, 901
	pane := opencodetest.Proc(903, 5100, "/w", "bash")
	pane.Env = map[string]string{"OPENCODE": "1", "OPENCODE_PID": "900"}
	pane.SID, pane.PGID = 903, 903
	stray := opencodetest.Proc(902, 5000, "/w", "bash")
	stray.Env = map[string]string{"OPENCODE_PID": "12345"}

	a := f.adapter(nil)
	o := find(t, mustDiscover(t, a, opencodetest.Snapshot(owner, tool, pane, stray)), s.SessionID)
	if len(o.Problems) != 0 {
		t.Fatalf("owner alive: problems %v", o.Problems)
	}
	// The owner dies (kill -9); its tool process stays, reparented.
	reparented := *tool
	reparented.PPID = 1
	obs := mustDiscover(t, a, opencodetest.Snapshot(&reparented, pane, stray))
	o = find(t, obs, s.SessionID)
	if got := issueKeys(o.Problems, session.ProblemOrphanProcesses); !reflect.DeepEqual(got, []string{"901", "903"}) {
		t.Fatalf("orphans %v, want [901 903]", o.Problems)
	}
	if !strings.Contains(o.Problems[0].Detail, "python3") || !strings.Contains(o.Problems[0].Detail, "900") {
		t.Errorf("detail %q", o.Problems[0].Detail)
	}
	// reap signals only an issue that names the process's identity.
	if p := o.Problems[0].Process; p == nil || *p != tool.Identity {
		t.Errorf("orphan issue names process %+v, want %+v", p, tool.Identity)
	}
	if p := o.Problems[1]; p.Process != nil || !strings.Contains(p.Detail, "suspect, not reaped") || !strings.Contains(p.Detail, "pid 903 ") {
		t.Errorf("the pane that only carries OPENCODE_PID: %+v", p)
	}
	if len(o.Owners) != 0 || len(o.InFlight) != 2 {
		t.Errorf("dead owner: owners %v in flight %v", o.Owners, o.InFlight)
	}
	// A pid reused by an unrelated process does not make the owner alive.
	reused := opencodetest.Proc(900, 9000, "/", "sshd")
	o = find(t, mustDiscover(t, a, opencodetest.Snapshot(reused, &reparented)), s.SessionID)
	if got := o.Problems; len(got) != 1 || got[0].Process == nil || *got[0].Process != tool.Identity {
		t.Errorf("reused owner pid: %v", o.Problems)
	}
}

// An opencode of another user (or one whose owner the snapshot could not
// read) never owns a session of this per-user daemon: not by -s in its
// argv, nor by its directory and open database.
func TestOwnersOfAnotherUserNeverClaim(t *testing.T) {
	f := newFixture(t)
	last := f.now.Add(-time.Minute)
	named, _ := f.db.Finished("/w/n", last)
	inferred, _ := f.db.InterruptedMidTool("/w/i", last)
	other := f.proc(300, time.Hour, true, "/home", "opencode", "-s", named.SessionID)
	other.UID = 65534
	unknown := f.proc(301, time.Hour, true, "/w/i", "opencode")
	unknown.UID = -1
	obs := mustDiscover(t, f.adapter(nil), opencodetest.Snapshot(other, unknown))
	for _, id := range []string{named.SessionID, inferred.SessionID} {
		if got := ownerPIDs(find(t, obs, id)); len(got) != 0 {
			t.Errorf("session %s owned by %v: processes of another user", id, got)
		}
	}
}
