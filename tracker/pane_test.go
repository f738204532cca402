package tracker

import (
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// The pane is the live owner's, looked up when the owner changes and kept
// while it is the same; a stopped session has none.
func TestDecidePane(t *testing.T) {
	a, b := ident(100), ident(200)
	paneA := &session.Pane{Socket: "/tmp/tmux-1000/default", ID: "%3"}
	paneB := &session.Pane{Socket: "/tmp/tmux-1000/work", ID: "%0"}
	panes := map[proc.Identity]*session.Pane{a: paneA, b: paneB}
	lookups := 0
	paneOf := func(id proc.Identity) *session.Pane {
		lookups++
		return panes[id]
	}
	obs := func(o ...adapters.Owner) *adapters.Observed {
		return &adapters.Observed{UpstreamID: "up-1", Owners: o, Activity: session.ActivityIdle}
	}
	ev := func(live map[proc.Identity]proc.Liveness, o *adapters.Observed) evidence {
		return evidence{obs: o, probe: probeTable(live), pane: paneOf, now: t0, grace: 0}
	}

	// First seen running: the owner's pane.
	r, _ := decide(rec(session.StatusStopped, nil), ev(map[proc.Identity]proc.Liveness{a: proc.Alive}, obs(own(100, false))))
	if r.Status != session.StatusRunning || r.Pane == nil || *r.Pane != *paneA {
		t.Fatalf("first live pass: status %s pane %+v, want running in %+v", r.Status, r.Pane, paneA)
	}
	// The same owner: kept without a lookup, even if the table forgot it.
	lookups = 0
	delete(panes, a)
	r2, evs := decide(r, ev(map[proc.Identity]proc.Liveness{a: proc.Alive}, obs(own(100, false))))
	if r2.Pane == nil || *r2.Pane != *paneA || lookups != 0 || len(evs) != 0 {
		t.Fatalf("same owner: pane %+v after %d lookups, %d events; want %+v kept, no lookup", r2.Pane, lookups, len(evs), paneA)
	}
	// A new owner (a resume in another pane): the new pane.
	r3, _ := decide(r2, ev(map[proc.Identity]proc.Liveness{b: proc.Alive}, obs(own(200, false))))
	if r3.Pane == nil || *r3.Pane != *paneB {
		t.Fatalf("new owner: pane %+v, want %+v", r3.Pane, paneB)
	}
	// A new owner outside tmux: no pane, not the old one.
	panes[a] = nil
	r4, _ := decide(r3, ev(map[proc.Identity]proc.Liveness{a: proc.Alive}, obs(own(100, false))))
	if r4.Status != session.StatusRunning || r4.Pane != nil {
		t.Fatalf("owner outside tmux: status %s pane %+v, want running with none", r4.Status, r4.Pane)
	}
	// Dead: no pane.
	r3.Owner = &b
	r5, _ := decide(r3, ev(nil, obs()))
	if !r5.Status.Terminal() || r5.Pane != nil {
		t.Fatalf("owner dead: status %s pane %+v, want stopped with none", r5.Status, r5.Pane)
	}
	// A shared server's pane is no session's (Codex's app-server).
	shared := own(200, false)
	shared.Shared = true
	if r7, _ := decide(rec(session.StatusStopped, nil), ev(map[proc.Identity]proc.Liveness{b: proc.Alive}, obs(shared))); r7.Status != session.StatusRunning || r7.Pane != nil {
		t.Fatalf("shared owner: status %s pane %+v, want running with none", r7.Status, r7.Pane)
	}
	// Without a snapshot (an exit pass) a live owner's pane stays.
	e := ev(map[proc.Identity]proc.Liveness{b: proc.Alive}, obs(own(200, false)))
	e.pane = nil
	if r6, _ := decide(r3, e); r6.Pane == nil || *r6.Pane != *paneB {
		t.Fatalf("no snapshot: pane %+v, want %+v kept", r6.Pane, paneB)
	}
}

func TestPaneFromEnv(t *testing.T) {
	for _, c := range []struct {
		tmux, pane string
		want       *session.Pane
		server     int
	}{
		{"/tmp/tmux-1000/default,4242,0", "%12", &session.Pane{Socket: "/tmp/tmux-1000/default", ID: "%12"}, 4242},
		{"/tmp/x.sock", "%0", &session.Pane{Socket: "/tmp/x.sock", ID: "%0"}, 0},
		{"/tmp/x.sock,nope,0", "%0", &session.Pane{Socket: "/tmp/x.sock", ID: "%0"}, 0},
		{"", "%1", nil, 0},
		{"/tmp/tmux-1000/default,1,0", "", nil, 0},
		{"relative,1,0", "%1", nil, 0},
		{"/tmp/s,1,0", "%", nil, 0},
		{"/tmp/s,1,0", "%1a", nil, 0},
		{"/tmp/s,1,0", "main:@0.%0", nil, 0},
	} {
		got, server := session.PaneFromEnv(c.tmux, c.pane)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want || server != c.server {
			t.Errorf("PaneFromEnv(%q, %q) = %+v, %d; want %+v, %d", c.tmux, c.pane, got, server, c.want, c.server)
		}
	}
}

// A pane counts only while the process is in its tree: the chain of
// parents, all in the pane, leads to the tmux server $TMUX names.
func TestPassPaneInTree(t *testing.T) {
	env := func(pane string) map[string]string {
		return map[string]string{"TMUX": "/tmp/tmux-1000/default,50,0", "TMUX_PANE": pane}
	}
	procs := map[int]*proc.Process{}
	add := func(pid, ppid int, e map[string]string) {
		procs[pid] = &proc.Process{Identity: ident(pid), PPID: ppid, Env: e}
	}
	add(50, 1, map[string]string{}) // the tmux server
	add(60, 50, env("%4"))          // the pane's shell
	add(70, 60, env("%4"))          // claude, typed in it
	add(80, 70, env("%4"))          // a tool of claude's
	add(90, 1, env("%4"))           // a daemon started from the pane: reparented
	add(91, 90, env("%4"))
	add(95, 60, env("%9")) // says another pane than its parent's
	add(96, 97, env("%4")) // parent not in the table
	add(98, 60, nil)       // environment unreadable
	p := &pass{snap: &proc.Snapshot{Procs: procs}}
	want := &session.Pane{Socket: "/tmp/tmux-1000/default", ID: "%4"}
	for pid, in := range map[int]bool{60: true, 70: true, 80: true, 90: false, 91: false, 95: false, 96: false, 98: false} {
		got := p.pane(ident(pid))
		if in != (got != nil) || got != nil && *got != *want {
			t.Errorf("pid %d: pane %+v, want in the pane: %v", pid, got, in)
		}
	}
	// Another process at the same pid is not the owner.
	if got := p.pane(proc.Identity{BootID: "boot-a", PID: 70, StartTicks: 1}); got != nil {
		t.Errorf("a reused pid: pane %+v", got)
	}
	if got := (&pass{}).pane(ident(70)); got != nil {
		t.Errorf("no snapshot: pane %+v", got)
	}
}
