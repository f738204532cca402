package actions

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
)

// groupScript runs script as the leader of a new session and process
// group. Each line the script prints must be the pid of a process it
// started in the background (so in its group), and every background process must leave stdout
// (">/dev/null"), or reading the pids waits for it to exit. done closes
// once the leader has exited and been reaped. Cleanup kills the group.
func groupScript(t *testing.T, script string) (leader proc.Identity, members []proc.Identity, done <-chan struct{}) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start sh -c %q: %v", script, err)
	}
	host := proc.NewHost()
	leader, err = host.Identify(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	pgid := cmd.Process.Pid
	// Read the pids before Wait: Wait closes the pipe.
	sc := bufio.NewScanner(out)
	var pids []int
	for sc.Scan() {
		pid, err := strconv.Atoi(strings.TrimSpace(sc.Text()))
		if err != nil {
			t.Fatalf("sh -c %q printed %q, want a pid", script, sc.Text())
		}
		pids = append(pids, pid)
	}
	ch := make(chan struct{})
	go func() { cmd.Wait(); close(ch) }()
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL); <-ch })
	for _, pid := range pids {
		id, err := host.Identify(pid)
		if err != nil {
			t.Fatalf("identify member %d: %v", pid, err)
		}
		members = append(members, id)
	}
	return leader, members, ch
}

// waitDead fails the test unless id dies within a few seconds.
func waitDead(t *testing.T, id proc.Identity, what string) {
	t.Helper()
	host := proc.NewHost()
	testenv.Eventually(t, 5*time.Second, fmt.Sprintf("%s (pid %d) dead", what, id.PID), func() bool {
		return host.Probe(id).Liveness != proc.Alive
	})
}

// stop of a launched session signals its process group; a member that
// ignores SIGTERM outlives the leader. Terminate must wait for the whole
// group, not the leader alone, and SIGKILL the group after the timeout.
func TestTerminateGroupKillsMemberThatIgnoresTerm(t *testing.T) {
	// The background sleep inherits the ignored SIGTERM; the leader then
	// takes SIGTERM's default again and waits. The pid is printed once the
	// sleep is forked (and so already ignores SIGTERM); the leader then
	// closes stdout so reading the pids does not wait for it.
	leader, members, _ := groupScript(t, `trap '' TERM; sleep 30 >/dev/null & echo $!; trap - TERM; exec >&-; wait`)
	stubborn := members[0]
	host := proc.NewHost()
	term := &Terminator{Probe: host, Poll: 20 * time.Millisecond}
	steps := term.Terminate(context.Background(), []Target{{ID: leader, Group: true, What: "launched agent"}}, 300*time.Millisecond, false)
	if r := host.Probe(stubborn); r.Liveness == proc.Alive {
		t.Fatalf("a member of the stopped group that ignores SIGTERM survived (pid %d); step %+v", stubborn.PID, steps[0])
	}
	if r := host.Probe(leader); r.Liveness == proc.Alive {
		t.Fatalf("the leader survived: step %+v", steps[0])
	}
	if !strings.Contains(steps[0].Action, "SIGKILL after") || !strings.HasSuffix(steps[0].Detail, "killed") {
		t.Fatalf("step does not say the group was killed after the timeout: %+v", steps[0])
	}
}
