package pi

import (
	"context"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// A real process stands for pi (its argv "pi", as Pi's process.title
// leaves it) with a tool as Pi runs one: a detached child leading a
// session of its own. While it lives, the session is its and nothing is
// an orphan; after kill -9 the tool, still running, is the session's
// orphan with its identity, and a process merely in the same directory
// is not.
func TestOrphanOfAKilledPi(t *testing.T) {
	dir := t.TempDir()
	root := t.TempDir()
	cmd := exec.Command("bash", "-c", "setsid sleep 301 & exec -a pi sleep 300")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-done })
	other := exec.Command("sleep", "299")
	other.Dir = dir
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })

	host := proc.NewHost()
	var tool *proc.Process
	snap := func() *proc.Snapshot {
		s, err := host.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	deadline := time.Now().Add(10 * time.Second)
	for tool == nil {
		s := snap()
		if p := s.Procs[cmd.Process.Pid]; p != nil && len(p.Argv) > 0 && p.Argv[0] == "pi" {
			for _, c := range s.Children(cmd.Process.Pid) {
				if strings.Contains(strings.Join(c.Argv, " "), "sleep 301") && c.SID == c.Identity.PID {
					tool = c
				}
			}
		}
		if tool == nil {
			if time.Now().After(deadline) {
				t.Fatal("the fake pi and its tool did not start")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	toolPID := tool.Identity.PID
	t.Cleanup(func() { syscall.Kill(toolPID, syscall.SIGKILL) })
	time.Sleep(50 * time.Millisecond)
	writeSession(t, root, dir, id1, user(1, "run it"), callBash(2, "c1", "sleep 301"))
	a := New(Config{Roots: []string{root}})
	obs, _ := discover(t, a, snap())
	o := obs[id1]
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != cmd.Process.Pid || !o.Owners[0].Inferred || len(o.Problems) != 0 {
		t.Fatalf("live: owners %+v, problems %+v", o.Owners, o.Problems)
	}

	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-done
	res, err := a.Discover(context.Background(), snap())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.All() {
		if o.UpstreamID != id1 {
			continue
		}
		if len(o.Owners) != 0 {
			t.Errorf("owners of a dead pi: %+v", o.Owners)
		}
		if len(o.Problems) != 1 || o.Problems[0].Kind != session.ProblemOrphanProcesses || o.Problems[0].Process == nil ||
			*o.Problems[0].Process != tool.Identity {
			t.Fatalf("problems %+v, want the tool %v as an orphan", o.Problems, tool.Identity)
		}
		t.Logf("orphan: %s", o.Problems[0].Detail)
		return
	}
	t.Fatal("the session is gone")
}
