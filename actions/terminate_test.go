package actions

import (
	"context"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

func start(t *testing.T, setsid bool, args ...string) (*exec.Cmd, proc.Identity) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Reap in the background so a dead child does not stay a zombie (a
	// zombie probes dead anyway).
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Process.Kill(); <-done })
	id, err := proc.NewHost().Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return cmd, id
}

// A PID the kernel reused is never signalled: the identity probe runs
// just before each signal.
func TestReusedPIDNeverSignalled(t *testing.T) {
	_, id := start(t, false, "sleep", "30")
	reused := id
	reused.StartTicks++ // the process we recorded is gone; this pid is someone else
	var signalled []int
	term := &Terminator{Probe: proc.NewHost(), Signal: func(pid int, sig syscall.Signal) error {
		signalled = append(signalled, pid)
		return nil
	}}
	steps := term.Terminate(context.Background(), []Target{{ID: reused, What: "orphan"}}, time.Second, false)
	if len(signalled) != 0 {
		t.Fatalf("signalled %v", signalled)
	}
	if steps[0].Outcome != session.OutcomeSkipped || !strings.Contains(steps[0].Detail, "reused") {
		t.Fatalf("step %+v", steps[0])
	}
	if p := term.Plan([]Target{{ID: reused}}, time.Second, false); p[0].Outcome != session.OutcomeSkipped {
		t.Fatalf("plan %+v", p[0])
	}
	if syscall.Kill(id.PID, 0) != nil {
		t.Fatal("the live process was hurt")
	}
}

func TestTerminateThenKill(t *testing.T) {
	_, polite := start(t, false, "sleep", "30")
	// A process that ignores SIGTERM needs the SIGKILL after the timeout.
	_, stubborn := start(t, false, "sh", "-c", "trap '' TERM; while :; do sleep 0.05; done")
	time.Sleep(200 * time.Millisecond) // let the shell install its trap
	term := &Terminator{Probe: proc.NewHost()}
	plan := term.Plan([]Target{{ID: polite}, {ID: stubborn}}, 300*time.Millisecond, false)
	if plan[0].Outcome != session.OutcomePlanned || plan[1].Outcome != session.OutcomePlanned {
		t.Fatalf("plan %+v", plan)
	}
	steps := term.Terminate(context.Background(), []Target{{ID: polite, What: "sleep"}, {ID: stubborn, What: "sh"}}, 300*time.Millisecond, false)
	if steps[0].Outcome != session.OutcomeDone || !strings.HasSuffix(steps[0].Detail, "exited") {
		t.Errorf("polite: %+v", steps[0])
	}
	if steps[1].Outcome != session.OutcomeDone || !strings.Contains(steps[1].Action, "SIGKILL after") || !strings.HasSuffix(steps[1].Detail, "killed") {
		t.Errorf("stubborn: %+v", steps[1])
	}
	for _, id := range []proc.Identity{polite, stubborn} {
		if r := proc.NewHost().Probe(id); r.Liveness != proc.Dead {
			t.Errorf("pid %d: %v", id.PID, r)
		}
	}
}

// A group target takes the leader's children with it.
func TestTerminateGroup(t *testing.T) {
	cmd, leader := start(t, true, "sh", "-c", "sleep 30 & echo $!; wait")
	time.Sleep(100 * time.Millisecond) // let the shell start its child
	host := proc.NewHost()
	snap, err := host.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	kids := snap.Children(cmd.Process.Pid)
	if len(kids) == 0 {
		t.Fatal("no child of the group leader")
	}
	term := &Terminator{Probe: host}
	steps := term.Terminate(context.Background(), []Target{{ID: leader, Group: true, What: "launched agent"}}, time.Second, false)
	if steps[0].Outcome != session.OutcomeDone || steps[0].Target != "process group "+strconv.Itoa(leader.PID) {
		t.Fatalf("step %+v", steps[0])
	}
	testenv.Eventually(t, 2*time.Second, "the child dead after its group's SIGTERM", func() bool {
		return host.Probe(kids[0].Identity).Liveness != proc.Alive
	})
}
