package claude

import (
	"context"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Older Claude Code versions write a registry entry with no procStart: its
// pid alone names the owner, and the pid is reused once that claude exits.
// The only check left is the entry's startedAt: a claude at that pid that
// started more than 2 s after it (registryOwner's tolerance, the same as
// repair's) is another process, and the session must not run on its
// account; one that started before, or within the tolerance (Claude
// writes its entry just after it starts), is the entry's own.
//
// Until this test, no fixture reached that check: the only entry without
// procStart named a sleep, which the claude-argv check refuses first, so
// the rule could be dropped with every test passing. Each case here runs
// a real process with a claude argv and goes through Discover and the
// repair plan, as the daemon does.
func TestEntryWithoutProcStartOwnedOnlyByAnEarlierClaude(t *testing.T) {
	for _, tc := range []struct {
		name string
		// after is how long after the entry's startedAt the claude at its
		// pid started (negative: before).
		after time.Duration
		owner bool
	}{
		{name: "started 10 s after the entry: a reused pid", after: 10 * time.Second},
		{name: "started 3 s after the entry: past the tolerance", after: 3 * time.Second},
		{name: "started 1 s after the entry: within the tolerance", after: time.Second, owner: true},
		{name: "started just before the entry, as claude writes it", after: -500 * time.Millisecond, owner: true},
		{name: "started an hour before the entry", after: -time.Hour, owner: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, cwd := newRoot(t)
			id := claudetest.NewSessionID()
			tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
			tr.Turn("run the tests", "go test ./...", "ok", "All pass.")
			r.WriteTranscript(t, tr)

			// A claude whose argv names no session, in another directory:
			// only the registry entry can make it the owner.
			c := startAs(t, t.TempDir(), nil, "claude")
			waitArgv(t, c.pid, "claude")
			host := proc.NewHost()
			live, err := host.Identify(c.pid)
			if err != nil {
				t.Fatal(err)
			}
			st, err := host.StartTime(live)
			if err != nil {
				t.Fatal(err)
			}
			e := claudetest.NewEntry(c.pid, "", claudetest.HostDomain(), id, cwd, "busy", st.Add(-tc.after))
			entry := r.WriteRegistry(t, e)

			a := adapterOn(t, host, r.Dir)
			o := mustFind(t, discover(t, a, snapshot(t)), id)
			if len(o.Owners) != 1 || o.Owners[0].Identity.PID != c.pid || o.Owners[0].NoProbe != nil {
				t.Fatalf("owners %+v, want the entry's pid %d, to be probed", o.Owners, c.pid)
			}
			got := o.Owners[0].Identity
			alive := host.Probe(got).Liveness == proc.Alive
			fromRegistry := o.ActivitySource == session.SourceRegistry
			keep := repairKeeps(t, a, id, r.Dir, entry)
			if tc.owner {
				if got != live || !alive {
					t.Errorf("owner %v (alive %v), want the claude at the pid, %v, alive", got, alive, live)
				}
				if !fromRegistry || o.Activity != session.ActivityBusy {
					t.Errorf("activity %s from %q, want busy from the registry: the entry is its owner's", o.Activity, o.ActivitySource)
				}
				if !keep {
					t.Errorf("repair would remove the entry of a live owner")
				}
				return
			}
			// Not the owner: the identity reported probes dead (the
			// session does not run on the other claude's account), the
			// entry's status is not the session's activity, and a repair
			// takes the entry for a dead owner's.
			if alive || got == live {
				t.Errorf("owner %v probes alive: the claude that took pid %d %s after the entry owns the session", got, c.pid, tc.after)
			}
			if fromRegistry {
				t.Errorf("activity %s taken from the entry of a reused pid", o.Activity)
			}
			if keep {
				t.Errorf("repair keeps the entry of a reused pid as its owner's")
			}
			for _, p := range o.Problems {
				if p.Process != nil && p.Process.PID == c.pid {
					t.Errorf("the claude at the reused pid is named for reap: %+v", p)
				}
			}
		})
	}
}

// repairKeeps reports whether the repair plan keeps the registry entry at
// path (its owner not confirmed dead) rather than removing it.
func repairKeeps(t *testing.T, a *Adapter, id, root, path string) bool {
	t.Helper()
	steps, err := a.PlanRepair(context.Background(), adapters.RepairTarget{UpstreamID: id, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if s.Target != path {
			continue
		}
		switch {
		case s.Action == "keep registry entry" && s.Outcome == session.OutcomeSkipped:
			return true
		case s.Action == "remove registry entry" && s.Outcome == session.OutcomePlanned:
			return false
		}
		t.Fatalf("repair step for the entry: %+v", s)
	}
	t.Fatalf("no repair step for %s: %+v", path, steps)
	return false
}

// The same rule seen from reap: the tree of a live owner is remembered so
// its tools can be reaped once it dies. A claude that took the pid of an
// entry without procStart, after the entry, is not the session's owner,
// so when it dies its tools are not the session's orphans: reap must
// never signal them on the session's account. The entry's own claude, for
// contrast, leaves its tool to the session.
func TestEntryWithoutProcStartToolsOfALaterClaudeAreNotTheSessions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration
		owner bool
	}{
		{name: "a claude that started after the entry", after: 10 * time.Second},
		{name: "the entry's own claude", after: -500 * time.Millisecond, owner: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, cwd := newRoot(t)
			id := claudetest.NewSessionID()
			tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
			tr.Turn("run the tests", "go test ./...", "ok", "All pass.")
			r.WriteTranscript(t, tr)

			// startAs's claude runs its sleep as a child (bash -c
			// 'sleep 120; true' forks it): a tool, left behind when the
			// claude alone is killed.
			c := startAs(t, t.TempDir(), nil, "claude")
			waitArgv(t, c.pid, "claude")
			host := proc.NewHost()
			var tool *proc.Process
			waitFor(t, "the claude's tool child", func() bool {
				for _, p := range snapshot(t).Children(c.pid) {
					if len(p.Argv) > 0 && p.Argv[0] == "sleep" {
						tool = p
						return true
					}
				}
				return false
			})
			live, err := host.Identify(c.pid)
			if err != nil {
				t.Fatal(err)
			}
			st, err := host.StartTime(live)
			if err != nil {
				t.Fatal(err)
			}
			r.WriteRegistry(t, claudetest.NewEntry(c.pid, "", claudetest.HostDomain(), id, cwd, "busy", st.Add(-tc.after)))

			a := adapterOn(t, host, r.Dir)
			discover(t, a, snapshot(t)) // the pass that sees the claude alive
			c.kill()
			if host.Probe(tool.Identity).Liveness != proc.Alive {
				t.Fatal("the tool died with the claude: nothing left to attribute")
			}
			o := mustFind(t, discover(t, a, snapshot(t)), id)
			named := false
			for _, p := range o.Problems {
				named = named || p.Kind == session.ProblemOrphanProcesses && p.Process != nil && *p.Process == tool.Identity
			}
			switch {
			case tc.owner && !named:
				t.Fatalf("the dead owner's tool pid %d is not the session's orphan: problems %+v", tool.Identity.PID, o.Problems)
			case !tc.owner && named:
				t.Fatalf("the tool pid %d of a claude that took the entry's pid after it is named for reap: problems %+v", tool.Identity.PID, o.Problems)
			}
		})
	}
}

// waitFor polls cond for a few seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, cond)
}
