package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/internal/testkit/toolowner"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

func (e *env) action(args ...string) (api.ActionResult, string, int) {
	e.T.Helper()
	out, errs, code := e.Ctl(append([]string{"--json"}, args...)...)
	var r api.ActionResult
	if code == 0 {
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			e.T.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	return r, errs, code
}

func outcomes(steps []api.Step) map[string]int {
	n := map[string]int{}
	for _, s := range steps {
		n[s.Outcome]++
	}
	return n
}

// TestToolOwnerHelper is a fake agent's process (toolowner.Start).
func TestToolOwnerHelper(t *testing.T) { toolowner.Helper(t) }

// After a kill -9 mid tool: reap terminates exactly the attributed orphan,
// repair removes the stale registry entry and its key file, a second repair
// plans nothing.
func TestClaudeReapAndRepair(t *testing.T) {
	e := newEnv(t)
	root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
	cwd := filepath.Join(e.Home, "proj")
	os.MkdirAll(cwd, 0o755)
	id := claudetest.NewSessionID()
	// The owner runs its tool as Claude Code 2.1.328 does: its child, in a
	// session of its own, naming it and the session. (The variables alone
	// prove nothing: orphans are attributed by the tree seen while the
	// owner lived.)
	owner := toolowner.Start(t, "TestToolOwnerHelper", toolowner.Spec{
		Env:   []string{"CLAUDECODE=1", "CLAUDE_PID={pid}", "CLAUDE_CODE_SESSION_ID=" + id},
		Tools: []toolowner.Tool{{Cmd: "exec sleep 300"}},
	})
	tool, err := proc.NewHost().Identify(owner.Tools[0])
	if err != nil {
		t.Fatal(err)
	}
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
	tr.CrashMidTool("run the tests", "python3 -c 'import time; time.sleep(300)'")
	root.WriteTranscript(t, tr)
	regPath := root.WriteRegistry(t, claudetest.LiveEntry(t, owner.PID(), id, cwd, "busy"))
	keyPath := root.WriteKey(t, owner.PID())
	os.Chmod(keyPath, 0o000) // never opened: as non-root, opening it would fail the repair

	bystander := exec.Command("sleep", "300") // same command, not attributed
	startChild(t, bystander)

	e.StartDaemon()
	e.waitStatus(id, session.StatusRunning, 3*time.Second)
	if _, errs, code := e.Ctl("reap", id); code != 1 || !strings.Contains(errs, "not orphans") {
		t.Fatalf("reap with the owner alive: exit %d: %s", code, errs)
	}
	owner.Kill()
	e.waitStatus(id, session.StatusInterrupted, 3*time.Second)

	plan, errs, code := e.action("reap", id)
	if code != 0 || plan.Applied || outcomes(plan.Steps)[session.OutcomePlanned] != 1 || !strings.Contains(plan.Steps[0].Target, fmt.Sprint(tool.PID)) {
		t.Fatalf("reap plan: exit %d %s %+v", code, errs, plan)
	}
	if syscall.Kill(tool.PID, 0) != nil {
		t.Fatal("a dry run signalled")
	}
	done, _, code := e.action("reap", id, "--apply", "--timeout", "2s")
	if code != 0 || !done.Applied || outcomes(done.Steps)[session.OutcomeDone] != 1 {
		t.Fatalf("reap --apply: %+v", done)
	}
	testenv.Eventually(t, 3*time.Second, "the reaped tool gone", func() bool { return proc.NewHost().Probe(tool).Liveness == proc.Dead })
	if syscall.Kill(bystander.Process.Pid, 0) != nil {
		t.Fatal("reap hit a process it did not attribute")
	}

	rp, _, code := e.action("repair", id)
	if code != 0 || outcomes(rp.Steps)[session.OutcomePlanned] != 2 {
		t.Fatalf("repair plan: %+v", rp)
	}
	if _, err := os.Stat(regPath); err != nil {
		t.Fatal("a dry run removed the entry")
	}
	human, _, _ := e.Ctl("repair", id, "--apply")
	if !strings.Contains(human, "[x] remove registry entry") || !strings.Contains(human, "[-] leave transcript") {
		t.Fatalf("repair --apply output:\n%s", human)
	}
	for _, p := range []string{regPath, keyPath} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	again, _, _ := e.action("repair", id)
	if outcomes(again.Steps)[session.OutcomePlanned] != 0 {
		t.Fatalf("a repaired session plans %+v", again.Steps)
	}
	evs, _, _ := e.Ctl("events", "--json")
	for _, want := range []string{"reap: 1 done", "repair: 2 done"} {
		if !strings.Contains(evs, want) {
			t.Errorf("no event %q", want)
		}
	}
}

// startChild starts cmd, failing the test if it cannot (a test whose
// process never ran would pass vacuously), and kills it when the test ends.
func startChild(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
}

// Stop of a launched session kills its whole process group; the status
// comes from the tracker noticing the exit.
func TestStopLaunchedSessionKillsItsGroup(t *testing.T) {
	e, proj := launchEnv(t)
	// The agent's own tool child, as a real agent's bash would be: forked
	// by the agent, so in its process group. (A process of the test cannot
	// join that group: the agent is launched in a session of its own, and
	// setpgid across sessions is EPERM.)
	agent := filepath.Join(e.Dir, "claude-with-tool")
	script := fmt.Sprintf("#!/bin/sh\nsleep 300 &\necho $! > \"$TOOL_PID_FILE.tmp\" && mv \"$TOOL_PID_FILE.tmp\" \"$TOOL_PID_FILE\"\nexec %q \"$@\"\n", fakeClaude(t))
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	toolPIDFile := filepath.Join(e.Dir, "tool.pid")
	e.StartDaemon("--claude-bin", agent)
	r, errs, code := e.launchJSON("launch", "--agent", "claude", "--cwd", proj, "--prompt", "long",
		"--env", "FAKE_CLAUDE_TOOL_SLEEP=300", "--env", "TOOL_PID_FILE="+toolPIDFile)
	if code != 0 {
		t.Fatalf("launch: %d %s", code, errs)
	}
	pid := r.Session.PID
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	var b []byte
	testenv.EventuallyOK(t, 5*time.Second, "the agent's tool child started", func() (bool, string) {
		var err error
		b, err = os.ReadFile(toolPIDFile)
		return err == nil, fmt.Sprint(err)
	})
	cpid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("tool pid file %s: %q", toolPIDFile, b)
	}
	child, err := proc.NewHost().Identify(cpid)
	if err != nil {
		t.Fatalf("the agent's tool child %d: %v", cpid, err)
	}
	if pgid, err := syscall.Getpgid(child.PID); err != nil || pgid != pid {
		t.Fatalf("the tool child %d is in group %d (%v), not the agent's %d", child.PID, pgid, err, pid)
	}
	e.waitStatus(r.Session.ID, session.StatusRunning, 5*time.Second)

	res, errs, code := e.action("stop", r.Session.ID, "--timeout", "2s")
	if code != 0 || outcomes(res.Steps)[session.OutcomeDone] != 1 || !strings.Contains(res.Steps[0].Target, "process group") {
		t.Fatalf("stop: exit %d %s %+v", code, errs, res)
	}
	if res.Session.Status == session.StatusRunning {
		t.Fatalf("still running after stop: %+v", res.Session)
	}
	// The tool child is the agent's, not the test's: it is reaped by
	// whoever inherits it, so watch its identity die rather than Wait.
	testenv.Eventually(t, 3*time.Second, fmt.Sprintf("the group's tool child %d dead after the stop", child.PID), func() bool {
		return proc.NewHost().Probe(child).Liveness == proc.Dead
	})
	if _, errs, code := e.Ctl("stop", r.Session.ID); code != 1 || !strings.Contains(errs, "not running") {
		t.Fatalf("stop of a stopped session: exit %d: %s", code, errs)
	}
}

// With --auto-repair claude-registry the watchdog removes a dead session's
// stale registry entry once it has been interrupted past the grace period,
// and records it; orphans are left alone because reap was not named.
func TestAutoRepairPolicy(t *testing.T) {
	e := newEnv(t)
	root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
	cwd := filepath.Join(e.Home, "proj")
	os.MkdirAll(cwd, 0o755)
	id := claudetest.NewSessionID()
	owner, _ := daemontest.StartOwner(t)
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
	tr.CrashMidTool("go", "python3 -c 'import time; time.sleep(300)'")
	root.WriteTranscript(t, tr)
	regPath := root.WriteRegistry(t, claudetest.LiveEntry(t, owner.Process.Pid, id, cwd, "busy"))
	tool := exec.Command("sleep", "300")
	tool.Env = append(os.Environ(), fmt.Sprintf("CLAUDE_PID=%d", owner.Process.Pid), "CLAUDE_CODE_SESSION_ID="+id)
	startChild(t, tool)

	e.StartDaemon("--auto-repair", "claude-registry", "--grace", "1s")
	e.waitStatus(id, session.StatusRunning, 3*time.Second)
	owner.Process.Signal(syscall.SIGKILL)
	owner.Wait()
	e.waitStatus(id, session.StatusInterrupted, 3*time.Second)
	testenv.Eventually(t, 5*time.Second, "the stale registry entry auto-repaired away", func() bool {
		_, err := os.Stat(regPath)
		return os.IsNotExist(err)
	})
	// The entry goes first and the event is recorded after it: wait for
	// the event too, rather than read the log in between.
	testenv.EventuallyOK(t, 5*time.Second, "an auto-repair event", func() (bool, string) {
		evs, _, _ := e.Ctl("events", "--json")
		return strings.Contains(evs, "auto-repair: 1 done"), evs
	})
	if syscall.Kill(tool.Process.Pid, 0) != nil {
		t.Error("an orphan was reaped though reap was not named")
	}
	if _, errs, code := e.Ctl("--socket", e.Socket, "version"); code != 0 {
		t.Fatal(errs)
	}
}
