//go:build linux

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// agentLeftovers is a launched Claude or OpenCode (the fake) killed -9
// mid tool, seen by the daemon while it lived, and what is left: the
// tool's own bash and what it forked (the orphans), and what only carries
// the agent's marker variables (the suspects): a tmux server the tool
// started, its pane, and a process the test started with the variables.
type agentLeftovers struct {
	id       string
	orphans  map[string]proc.Identity
	suspects map[string]proc.Identity
}

// waitAdapterScans waits for two passes of the named adapter that began
// after now: the daemon has looked at the process table as it is now.
func (e *env) waitAdapterScans(name string, now time.Time) {
	e.T.Helper()
	last := func() time.Time {
		var h api.Health
		e.CtlJSON(&h, "health")
		for _, a := range h.Adapters {
			if a.Name == name {
				return a.LastScan
			}
		}
		return time.Time{}
	}
	testenv.Eventually(e.T, 10*time.Second, "a "+name+" pass after "+now.String(), func() bool { return last().After(now) })
	first := last()
	testenv.Eventually(e.T, 10*time.Second, "a second "+name+" pass", func() bool { return last().After(first) })
}

// killAgentMidTool starts the daemon (with args) and launches the fake
// agent ("claude" or "opencode") with a long tool that the fake runs for
// real, as the real CLI runs one: `bash -c` in a session of its own, with
// the agent's variables. The tool starts a tmux server (whose pane gets
// the tool's environment) and goes on to a long sleep. Once the daemon has
// looked at the tool, the agent is killed -9.
func killAgentMidTool(t *testing.T, agent string, args ...string) (*env, agentLeftovers) {
	t.Helper()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux")
	}
	e, proj := launchEnv(t)
	sock := filepath.Join(e.Dir, "tmux")
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	tool := fmt.Sprintf("unset TMUX TMUX_PANE; %s -S %s -f /dev/null new-session -d 'exec sleep 310'; sleep 311; echo done", tmux, sock)
	var bin, knob, pidVar string
	switch agent {
	case "claude":
		bin, knob, pidVar = fakeClaude(t), "FAKE_CLAUDE", "CLAUDE_PID"
	case "opencode":
		bin, knob, pidVar = fakeOpenCode(t), "FAKE_OPENCODE", "OPENCODE_PID"
	}
	e.StartDaemon(append([]string{"--" + agent + "-bin", bin}, args...)...)
	r, errs, code := e.launchJSON("launch", "--agent", agent, "--cwd", proj, "--prompt", "run the long job",
		"--env", knob+"_TOOL_SLEEP=300", "--env", knob+"_TOOL_CMD="+tool)
	if code != 0 {
		t.Fatalf("launch: %d %s", code, errs)
	}
	pid := r.Session.PID
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })

	var bash, left, pane, server *proc.Process
	testenv.EventuallyOK(t, 10*time.Second, "the tool, its sleep and the tmux pane", func() (bool, string) {
		snap, err := proc.NewHost().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		bash, left, pane, server = nil, nil, nil, nil
		for _, p := range snap.Children(pid) {
			if len(p.Argv) > 0 && p.Argv[0] == "bash" {
				bash = p
			}
		}
		for _, p := range snap.Procs {
			switch {
			case bash != nil && p.PPID == bash.Identity.PID && slices.Equal(p.Argv, []string{"sleep", "311"}):
				left = p
			case slices.Equal(p.Argv, []string{"sleep", "310"}) && p.Env[pidVar] == strconv.Itoa(pid):
				pane, server = p, snap.Procs[p.PPID]
			}
		}
		return left != nil && pane != nil && server != nil, fmt.Sprintf("bash %v left %v pane %v", bash, left, pane)
	})
	t.Cleanup(func() { syscall.Kill(-bash.Identity.PID, syscall.SIGKILL) }) // the tool's session is its group
	if bash.SID != bash.Identity.PID || server.Env[pidVar] != strconv.Itoa(pid) || pane.SID != pane.Identity.PID {
		t.Fatalf("the premise: the tool %+v leads its own session, the tmux server %+v carries %s, the pane %+v leads its own session", bash, server, pidVar, pane)
	}
	bystander := exec.Command("sleep", "312")
	bystander.Env = append(os.Environ(), pidVar+"="+strconv.Itoa(pid))
	if agent == "claude" {
		bystander.Env = append(bystander.Env, "CLAUDE_CODE_SESSION_ID="+bash.Env["CLAUDE_CODE_SESSION_ID"])
	}
	startChild(t, bystander)

	l := agentLeftovers{id: r.Session.ID,
		orphans: map[string]proc.Identity{"the tool's bash": bash.Identity, "the tool's sleep": left.Identity},
		suspects: map[string]proc.Identity{
			"the process the test started": identify(t, bystander.Process.Pid),
			"the tmux server":              server.Identity,
			"the tmux pane":                pane.Identity,
		}}
	if agent == "opencode" {
		e.waitCursor(l.id)
	}
	if s := e.waitStatus(l.id, session.StatusRunning, 10*time.Second); s.PID != pid {
		t.Fatalf("owner %d, want the launched %s %d", s.PID, agent, pid)
	}
	e.waitAdapterScans(agent, time.Now())
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	return e, l
}

// reapSparesSuspects: `sessionctl reap` targets the tool's own leftovers
// and signals them, and never what only carries the agent's variables,
// which the session shows as suspects.
func reapSparesSuspects(t *testing.T, agent string) {
	e, l := killAgentMidTool(t, agent)
	e.waitStatus(l.id, session.StatusInterrupted, 5*time.Second)

	var orphans []session.Problem
	testenv.EventuallyOK(t, 5*time.Second, "the 2 orphans and 3 suspects named", func() (bool, string) {
		orphans = nil
		for _, p := range e.Show(l.id).Problems {
			if p.Kind == session.ProblemOrphanProcesses {
				orphans = append(orphans, p)
			}
		}
		return len(orphans) == 5, fmt.Sprintf("%+v", orphans)
	})
	want := []string{}
	for _, id := range l.orphans {
		want = append(want, strconv.Itoa(id.PID))
	}
	slices.Sort(want)
	for _, p := range orphans {
		suspect := strings.Contains(p.Detail, "suspect, not reaped")
		if slices.Contains(want, p.Key) == suspect {
			t.Errorf("pid %s: %q", p.Key, p.Detail)
		}
	}
	targets := func(steps []api.Step) []string {
		var out []string
		for _, st := range steps {
			out = append(out, strings.TrimPrefix(st.Target, "pid "))
		}
		slices.Sort(out)
		return out
	}

	plan, errs, code := e.action("reap", l.id)
	if code != 0 || outcomes(plan.Steps)[session.OutcomePlanned] != 2 || !slices.Equal(targets(plan.Steps), want) {
		t.Fatalf("reap plan: exit %d %s %+v; want only the orphans %v", code, errs, plan.Steps, want)
	}
	done, errs, code := e.action("reap", l.id, "--apply", "--timeout", "2s")
	if code != 0 || !done.Applied || outcomes(done.Steps)[session.OutcomeDone] != 2 || !slices.Equal(targets(done.Steps), want) {
		t.Fatalf("reap --apply: exit %d %s %+v", code, errs, done.Steps)
	}
	for what, id := range l.orphans {
		testenv.Eventually(t, 3*time.Second, what+" reaped", func() bool { return !alive(id) })
	}
	for what, id := range l.suspects {
		if !alive(id) {
			t.Errorf("reap killed %s (pid %d), which only carries the variables", what, id.PID)
		}
	}
	// Nothing is left that reap would touch; the suspects stay named.
	again, _, code := e.action("reap", l.id)
	if code != 0 || len(again.Steps) != 1 || again.Steps[0].Outcome != session.OutcomeSkipped || !strings.Contains(again.Steps[0].Detail, "3 suspect") {
		t.Errorf("reap after reap: exit %d %+v", code, again.Steps)
	}
}

// autoReapSparesSuspects: with --auto-repair reap, the watchdog reaps the
// tool's own leftovers on its own and leaves the suspects alone.
func autoReapSparesSuspects(t *testing.T, agent string) {
	e, l := killAgentMidTool(t, agent, "--auto-repair", "reap", "--grace", "1s")
	e.waitStatus(l.id, session.StatusInterrupted, 5*time.Second)
	var evs string
	testenv.EventuallyOK(t, 10*time.Second, "the orphans auto-reaped", func() (bool, string) {
		evs, _, _ = e.Ctl("events", "--json")
		gone := true
		for _, id := range l.orphans {
			gone = gone && !alive(id)
		}
		return gone && strings.Contains(evs, "auto-reap:"), evs
	})
	if !strings.Contains(evs, "auto-reap: 2 done") {
		t.Errorf("auto-reap signalled other than the 2 orphans: %s", evs)
	}
	// A few more passes: the watchdog keeps looking at the session, which
	// still has its suspects.
	e.waitAdapterScans(agent, time.Now())
	var killed []string
	for what, id := range l.suspects {
		if !alive(id) {
			killed = append(killed, fmt.Sprintf("%s (pid %d)", what, id.PID))
		}
	}
	slices.Sort(killed)
	if len(killed) > 0 {
		t.Errorf("auto-reap killed %v, which only carry the variables", killed)
	}
}

// A Claude killed -9 mid tool: reap spares what only carries CLAUDE_PID
// and CLAUDE_CODE_SESSION_ID.
func TestClaudeReapSparesSuspects(t *testing.T) { reapSparesSuspects(t, "claude") }

// The same with --auto-repair reap.
func TestClaudeAutoReapSparesSuspects(t *testing.T) { autoReapSparesSuspects(t, "claude") }

// An `opencode run` killed -9 mid tool: reap spares what only carries
// OPENCODE_PID.
func TestOpenCodeReapSparesSuspects(t *testing.T) { reapSparesSuspects(t, "opencode") }

// The same with --auto-repair reap.
func TestOpenCodeAutoReapSparesSuspects(t *testing.T) { autoReapSparesSuspects(t, "opencode") }
