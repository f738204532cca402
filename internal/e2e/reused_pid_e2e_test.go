package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// A reused pid is never signalled, end to end: whatever the record or the
// agent's data says, stop and reap through the built daemon leave alone a
// live process that is not the session's owner. The unit tests hold each
// guard alone (actions' probe before each signal, the daemon's probe
// before a stop, the adapter's start checks); this holds them together,
// as a user meets them. Two sessions are another process's account:
//
//   - a record (sessiond launched it, so stop would signal its group)
//     whose owner's pid now belongs to another process, with other start
//     ticks: the kernel reused the pid;
//   - a session whose registry entry, of a Claude version that writes no
//     procStart, names the pid of a claude that started after the entry:
//     the entry's claude died and another took its pid.
//
// A third, whose procStart-less entry names its own claude, is the
// control: it runs, and stop ends it.
func TestReusedPIDNeverSignalledE2E(t *testing.T) {
	e := newEnv(t)
	root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
	cwd := filepath.Join(e.Home, "proj")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	host := proc.NewHost()

	// The launched record's owner pid, now another process: a session
	// leader of its own, so a signal to the recorded group would reach it.
	bystander := exec.Command("sleep", "300")
	bystander.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	startChild(t, bystander)
	byID, err := host.Identify(bystander.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	recorded := byID
	recorded.StartTicks-- // the owner sessiond launched, gone; its pid is the bystander's now
	launched := "5e55000000b1"
	e.Seed(&session.Record{ID: launched, Agent: "claude", UpstreamID: claudetest.NewSessionID(), Status: session.StatusRunning,
		Activity: session.ActivityBusy, Owner: &recorded, OwnerEvidence: "launched by sessiond", Launched: true,
		LaunchedAt: ptime(time.Now().Add(-time.Hour)), Cwd: cwd, CreatedAt: time.Now().Add(-time.Hour)})

	// A claude that took the pid of a procStart-less entry after it.
	taker := startClaude(t, e)
	stale := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(stale, cwd, time.Now().Add(-2*time.Minute))
	tr.Turn("run the tests", "go test ./...", "ok", "All pass.")
	root.WriteTranscript(t, tr)
	root.WriteRegistry(t, claudetest.NewEntry(taker.PID, "", claudetest.HostDomain(), stale, cwd, "busy", startOf(t, taker).Add(-time.Minute)))

	// The control: a procStart-less entry its own claude wrote as it
	// started.
	own := startClaude(t, e)
	live := claudetest.NewSessionID()
	tr = claudetest.NewTranscript(live, cwd, time.Now().Add(-time.Minute))
	tr.Turn("list the files", "ls", "", "Listed.")
	root.WriteTranscript(t, tr)
	root.WriteRegistry(t, claudetest.NewEntry(own.PID, "", claudetest.HostDomain(), live, cwd, "idle", startOf(t, own).Add(500*time.Millisecond)))

	e.StartDaemon()
	if s := e.waitStatus(live, session.StatusRunning, 5*time.Second); s.PID != own.PID {
		t.Fatalf("the control runs as pid %d, want its claude %d", s.PID, own.PID)
	}
	testenv.EventuallyOK(t, 5*time.Second, "both sessions of another process's pid stopped", func() (bool, string) {
		a, b := e.Show(launched), e.Show(stale)
		return a.Status.Terminal() && b.Status.Terminal(), fmt.Sprintf("%s (%s); %s (%s)", a.Status, a.StatusReason, b.Status, b.StatusReason)
	})

	for _, id := range []string{launched, stale} {
		if _, errs, code := e.Ctl("stop", id, "--timeout", "1s"); code != 1 || !strings.Contains(errs, "not running") {
			t.Errorf("stop %s: exit %d: %s", id, code, errs)
		}
		for _, args := range [][]string{{"reap", id}, {"reap", id, "--apply", "--timeout", "1s"}, {"reap", id, "--apply", "--force"}} {
			res, errs, code := e.action(args...)
			if code != 0 {
				t.Errorf("%v: exit %d: %s", args, code, errs)
				continue
			}
			if n := outcomes(res.Steps); n[session.OutcomeDone]+n[session.OutcomePlanned]+n[session.OutcomeFailed] != 0 {
				t.Errorf("%v: steps %+v, want nothing to reap", args, res.Steps)
			}
		}
	}
	time.Sleep(300 * time.Millisecond) // a signal sent is delivered by now
	for what, id := range map[string]proc.Identity{"the launched record's pid, reused": byID, "the claude that took the entry's pid": taker} {
		if r := host.Probe(id); r.Liveness != proc.Alive {
			t.Errorf("%s (pid %d) was hurt: %s", what, id.PID, r.Reason)
		}
	}
	if s := e.Show(stale); s.Status == session.StatusRunning {
		t.Errorf("the stale session runs on pid %d's account", s.PID)
	}

	// The control's stop reaches its claude: the guards above refuse
	// another process's pid, not every pid.
	if res, errs, code := e.action("stop", live, "--timeout", "2s"); code != 0 || outcomes(res.Steps)[session.OutcomeDone] != 1 {
		t.Fatalf("stop of the control: exit %d %s %+v", code, errs, res)
	}
	testenv.Eventually(t, 3*time.Second, "the control's claude dead after its stop", func() bool {
		return host.Probe(own).Liveness != proc.Alive
	})
}

// startClaude starts a process whose argv is a claude's (a sleep run as
// "claude", naming no session) in the test's world, and waits until a
// snapshot shows it so.
func startClaude(t *testing.T, e *env) proc.Identity {
	t.Helper()
	cmd := exec.Command("bash", "-c", "exec -a claude sleep 300")
	cmd.Env = e.Environ()
	cmd.Dir = e.Dir
	startChild(t, cmd)
	host := proc.NewHost()
	var id proc.Identity
	testenv.EventuallyOK(t, 5*time.Second, "a claude argv", func() (bool, string) {
		snap, err := host.Snapshot()
		if err != nil {
			return false, err.Error()
		}
		p := snap.Procs[cmd.Process.Pid]
		if p == nil || len(p.Argv) == 0 || p.Argv[0] != "claude" {
			return false, fmt.Sprintf("%+v", p)
		}
		id = p.Identity
		return true, ""
	})
	return id
}

// startOf is when id started, in wall time, as the adapter reads it.
func startOf(t *testing.T, id proc.Identity) time.Time {
	t.Helper()
	st, err := proc.NewHost().StartTime(id)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ptime(t time.Time) *time.Time { return &t }
