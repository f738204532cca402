package realagents

import (
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// Scenario 6: sessiond is kill -9ed while real agents run. The agents it
// launched keep running; restarted, it re-adopts every session with the
// right status (one that died while it was down is interrupted) and
// watches the re-adopted owners again.
func TestDaemonKilledWhileAgentsRun(t *testing.T) {
	claudeBin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	opencodeBin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	// Every agent's first turn runs the long tool; anything after it ends.
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		for _, m := range r.Messages {
			if len(m.ToolResults) > 0 {
				return fakemodel.Say("done"), true
			}
		}
		return fakemodel.RunCommand(longTool, "Run the long job", 10*time.Minute), true
	})
	args := []string{"--claude-bin", claudeBin, "--opencode-bin", opencodeBin, "--grace", "5s"}
	d := w.startDaemon(args...)
	w.step("daemon ready")

	cl := w.launch("launch", "--agent", "claude", "--cwd", w.proj(), "--prompt", "run the long job", "--", "--allowedTools", "Bash")
	oc := w.launch("launch", "--agent", "opencode", "--cwd", w.proj(), "--prompt", "run the long job")
	const outsideUp = "0d75a1de-0000-4000-8000-00000000beef"
	outside, _ := w.start("outside claude", w.proj(), claudeBin, "--session-id", outsideUp, "-p", "run the long job",
		"--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")

	busy := func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy && s.UpstreamID != ""
	}
	before := map[string]api.Session{}
	for _, id := range []string{cl.Session.ID, oc.Session.ID} {
		before[id] = w.waitSession(id, 90*time.Second, "running and busy", busy)
	}
	w.waitFor(30*time.Second, "the outside claude discovered", func() (bool, string) {
		_, _, code := w.Ctl("show", outsideUp)
		return code == 0, "not found"
	})
	before[outsideUp] = w.waitSession(outsideUp, 30*time.Second, "running and busy", busy)
	if before[outsideUp].PID != outside.Process.Pid {
		t.Fatalf("outside claude tracked as pid %d, it is %d", before[outsideUp].PID, outside.Process.Pid)
	}
	w.waitFor(30*time.Second, "every agent's python3 tool running", func() (bool, string) {
		n := 0
		for _, ps := range [][]procInfo{claudeTools(cl.Session.PID), opencodeTools(oc.Session.PID), claudeTools(outside.Process.Pid)} {
			if pythonPID(ps) != 0 {
				n++
			}
		}
		return n == 3, itoa(n) + " of 3"
	})
	w.step("three agents busy")

	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.Done
	w.step("sessiond killed")
	// While it is down: the outside claude dies; the launched agents live on.
	syscall.Kill(outside.Process.Pid, syscall.SIGKILL)
	w.waitFor(10*time.Second, "the outside claude dead", func() (bool, string) {
		return !alive(outside.Process.Pid), "still alive"
	})
	for _, id := range []string{cl.Session.ID, oc.Session.ID} {
		if !alive(before[id].PID) {
			t.Fatalf("%s agent pid %d died with sessiond", before[id].Agent, before[id].PID)
		}
	}

	d = w.startDaemon(args...)
	w.step("sessiond restarted (ready after reconciliation)")
	for _, id := range []string{cl.Session.ID, oc.Session.ID} {
		s, b := w.Show(id), before[id]
		if !busy(s) || s.PID != b.PID || s.PIDStart != b.PIDStart || s.UpstreamID != b.UpstreamID || !s.Launched {
			t.Errorf("%s after the restart: %s/%s pid %d start %d upstream %s; before: pid %d start %d upstream %s (%s)",
				b.Agent, s.Status, s.Activity, s.PID, s.PIDStart, s.UpstreamID, b.PID, b.PIDStart, b.UpstreamID, s.StatusReason)
		}
	}
	s := w.Show(outsideUp)
	if s.Status != session.StatusInterrupted || !hasProblems(s, session.ProblemOrphanedToolCall) {
		p, _ := readProc(s.PID)
		t.Errorf("the outside claude that died while sessiond was down: %s %v (%s); its owner now: pid %d ppid %d %s %q",
			s.Status, problemKinds(s), s.StatusReason, p.PID, p.PPID, p.Comm, p.Args)
	}
	var list api.SessionList
	w.CtlJSON(&list, "ls", "--all")
	if len(list.Sessions) != 3 {
		t.Errorf("%d sessions after the restart, want 3 (no duplicates)", len(list.Sessions))
	}

	// The re-adopted owners are watched again: a death is seen at once.
	for _, id := range []string{cl.Session.ID, oc.Session.ID} {
		killed := time.Now()
		syscall.Kill(before[id].PID, syscall.SIGKILL)
		s, took := w.waitInterrupted(id, killed, 2*time.Second, session.ProblemOrphanedToolCall)
		t.Logf("%s: interrupted %s after kill -9 (event time), problems %v", s.Agent, took.Round(time.Millisecond), problemKinds(s))
	}
	w.step("re-adopted agents killed and seen")
}
