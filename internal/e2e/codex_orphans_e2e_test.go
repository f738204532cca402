//go:build linux

package e2e

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/codextest/fakecodex"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// TestFakeCodexHelper is the fake Codex's process (fakecodex.StartCodex).
func TestFakeCodexHelper(t *testing.T) { fakecodex.Helper(t) }

// codexLeftovers is a Codex killed -9 mid tool, seen by the daemon while
// it lived, and what carries its session's CODEX_THREAD_ID afterwards:
// the tool's own leftover (the orphan), a tmux server the tool started
// and its pane, and a process the test started with the variable.
type codexLeftovers struct {
	id, up   string
	orphan   proc.Identity
	suspects map[string]proc.Identity // by what they are
}

// newThreadID is a random session id in Codex's form: another test binary
// running at the same time must not share the processes' variable.
func newThreadID(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

func identify(t *testing.T, pid int) proc.Identity {
	t.Helper()
	id, err := proc.NewHost().Identify(pid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitScans waits for two passes of the codex adapter that began after
// now: the daemon has looked at the process table as it is now.
func (e *env) waitScans(now time.Time) {
	e.T.Helper()
	last := func() time.Time {
		var h api.Health
		e.CtlJSON(&h, "health")
		for _, a := range h.Adapters {
			if a.Name == "codex" {
				return a.LastScan
			}
		}
		return time.Time{}
	}
	testenv.Eventually(e.T, 10*time.Second, "a codex pass after "+now.String(), func() bool { return last().After(now) })
	first := last()
	testenv.Eventually(e.T, 10*time.Second, "a second codex pass", func() bool { return last().After(first) })
}

// killCodexMidTool sets up the home, starts the fake Codex and the
// daemon (with args), lets the daemon see the Codex's tools, and kills
// the Codex.
func killCodexMidTool(t *testing.T, e *env, args ...string) codexLeftovers {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux")
	}
	up := newThreadID(t)
	home := filepath.Join(e.Home, ".codex")
	day := filepath.Join(home, "sessions", "2026", "11", "25")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	const killed = "01a2100e-73e8-7692-b08b-41c0e0969ddc"
	b := bytes.ReplaceAll(codextest.Fixture("killed.jsonl"), []byte(killed), []byte(up))
	if err := os.WriteFile(filepath.Join(day, "rollout-2026-11-25T00-15-09-"+up+".jsonl"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(e.Dir, "tmux")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })

	// The tool starts a tmux server (its pane gets the tool's environment)
	// and goes on to a command of its own, which outlives the Codex.
	c := fakecodex.StartCodex(t, "TestFakeCodexHelper", fakecodex.Spec{
		Lock: filepath.Join(home, "thread-writer-locks", up+".lock"), Thread: up,
		Tools: []fakecodex.Tool{{Cmd: fmt.Sprintf("unset TMUX TMUX_PANE; %s -S %s -f /dev/null new-session -d 'exec sleep 310'; sleep 311; echo done", tmux, sock)}},
	}, false)
	bystander := exec.Command("sleep", "312")
	bystander.Env = append(os.Environ(), "CODEX_THREAD_ID="+up)
	startChild(t, bystander)

	var orphan, pane, server *proc.Process
	testenv.EventuallyOK(t, 10*time.Second, "the tool's sleep and the tmux pane", func() (bool, string) {
		snap, err := proc.NewHost().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		orphan, pane, server = nil, nil, nil
		for _, p := range snap.Procs {
			switch {
			case p.PPID == c.Tools[0] && len(p.Argv) > 0 && p.Argv[0] == "sleep":
				orphan = p
			case len(p.Argv) == 2 && p.Argv[0] == "sleep" && p.Argv[1] == "310" && p.Env["CODEX_THREAD_ID"] == up:
				pane = p
				server = snap.Procs[p.PPID]
			}
		}
		return orphan != nil && pane != nil && server != nil, fmt.Sprintf("orphan %v pane %v", orphan, pane)
	})
	if server.Env["CODEX_THREAD_ID"] != up || pane.SID != pane.Identity.PID {
		t.Fatalf("the premise: the tmux server %+v carries the variable, the pane %+v leads its own session", server, pane)
	}

	toolTicks := identify(t, c.Tools[0]).StartTicks
	l := codexLeftovers{up: up, orphan: orphan.Identity, suspects: map[string]proc.Identity{
		"the process the test started": identify(t, bystander.Process.Pid),
		"the tmux server":              server.Identity,
		"the tmux pane":                pane.Identity,
	}}
	e.StartDaemon(args...)
	s := e.waitStatus(up[:13], session.StatusRunning, 10*time.Second)
	l.id = s.ID
	if s.PID != c.Cmd.Process.Pid {
		t.Fatalf("owner %d, want the fake Codex %d", s.PID, c.Cmd.Process.Pid)
	}
	e.waitScans(time.Now())
	c.Kill()
	// The tool's bash dies of its death signal; what it forked lives on.
	testenv.Eventually(t, 10*time.Second, "the tool's bash gone", func() bool {
		return proc.NewHost().Probe(proc.Identity{BootID: orphan.Identity.BootID, PID: c.Tools[0], StartTicks: toolTicks}).Liveness == proc.Dead
	})
	return l
}

func alive(id proc.Identity) bool { return proc.NewHost().Probe(id).Liveness == proc.Alive }

// A Codex killed -9 mid tool: `sessionctl reap` targets the tool's own
// leftover and signals it, and never the processes that only carry the
// session's CODEX_THREAD_ID (the tmux server a tool started, its pane, a
// process started elsewhere), which the session shows as suspects.
func TestCodexReapSparesSuspects(t *testing.T) {
	e := newEnv(t)
	l := killCodexMidTool(t, e)
	e.waitStatus(l.id, session.StatusInterrupted, 5*time.Second)

	var orphans []session.Problem
	testenv.EventuallyOK(t, 5*time.Second, "the orphan and 3 suspects named", func() (bool, string) {
		orphans = nil
		for _, p := range e.Show(l.id).Problems {
			if p.Kind == session.ProblemOrphanProcesses {
				orphans = append(orphans, p)
			}
		}
		return len(orphans) == 4, fmt.Sprintf("%+v", orphans)
	})
	for _, p := range orphans {
		suspect := strings.Contains(p.Detail, "suspect, not reaped")
		if (p.Key == strconv.Itoa(l.orphan.PID)) == suspect {
			t.Errorf("pid %s: %q", p.Key, p.Detail)
		}
	}

	plan, errs, code := e.action("reap", l.id)
	if code != 0 || len(plan.Steps) != 1 || plan.Steps[0].Outcome != session.OutcomePlanned || !strings.Contains(plan.Steps[0].Target, strconv.Itoa(l.orphan.PID)) {
		t.Fatalf("reap plan: exit %d %s %+v; want only the orphan %d", code, errs, plan.Steps, l.orphan.PID)
	}
	done, errs, code := e.action("reap", l.id, "--apply", "--timeout", "2s")
	if code != 0 || !done.Applied || len(done.Steps) != 1 || done.Steps[0].Outcome != session.OutcomeDone {
		t.Fatalf("reap --apply: exit %d %s %+v", code, errs, done.Steps)
	}
	if alive(l.orphan) {
		t.Errorf("the orphan %d survived reap --apply", l.orphan.PID)
	}
	for what, id := range l.suspects {
		if !alive(id) {
			t.Errorf("reap killed %s (pid %d), which only carries the variable", what, id.PID)
		}
	}
	// Nothing is left that reap would touch; the suspects stay named.
	again, _, code := e.action("reap", l.id)
	if code != 0 || len(again.Steps) != 1 || again.Steps[0].Outcome != session.OutcomeSkipped || !strings.Contains(again.Steps[0].Detail, "3 suspect") {
		t.Errorf("reap after reap: exit %d %+v", code, again.Steps)
	}
}

// With --auto-repair reap, the watchdog reaps the tool's own leftover on
// its own and leaves the suspects alone.
func TestCodexAutoReapSparesSuspects(t *testing.T) {
	e := newEnv(t)
	l := killCodexMidTool(t, e, "--auto-repair", "reap", "--grace", "1s")
	e.waitStatus(l.id, session.StatusInterrupted, 5*time.Second)
	var evs string
	testenv.EventuallyOK(t, 10*time.Second, "the orphan auto-reaped", func() (bool, string) {
		evs, _, _ = e.Ctl("events", "--json")
		return !alive(l.orphan) && strings.Contains(evs, "auto-reap:"), evs
	})
	if !strings.Contains(evs, "auto-reap: 1 done") {
		t.Errorf("auto-reap signalled more than the orphan: %s", evs)
	}
	// A few more passes: the watchdog keeps looking at the session, which
	// still has its suspects.
	e.waitScans(time.Now())
	var killed []string
	for what, id := range l.suspects {
		if !alive(id) {
			killed = append(killed, fmt.Sprintf("%s (pid %d)", what, id.PID))
		}
	}
	slices.Sort(killed)
	if len(killed) > 0 {
		t.Errorf("auto-reap killed %v, which only carry the variable", killed)
	}
}
