//go:build linux

package opencode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// orphansByPID is a session's orphan_processes issues by pid.
func orphansByPID(t *testing.T, o adapters.Observed) map[int]adapters.Issue {
	t.Helper()
	out := map[int]adapters.Issue{}
	for _, is := range o.Problems {
		if is.Kind != session.ProblemOrphanProcesses {
			continue
		}
		pid, err := strconv.Atoi(is.Key)
		if err != nil {
			t.Fatalf("issue key %q is no pid: %+v", is.Key, is)
		}
		out[pid] = is
	}
	return out
}

func liveRow(t *testing.T, pid int) *proc.Process {
	t.Helper()
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	p := snap.Procs[pid]
	if p == nil || p.State == 'Z' {
		t.Fatalf("pid %d is gone", pid)
	}
	return p
}

// A real `opencode run` (the fake, holding the database) whose bash tool,
// run in a session of its own as OpenCode 1.18.33 runs it, starts a real
// tmux server and goes on to a long sleep; then it is killed -9. The
// server took the tool's environment, OPENCODE_PID included, and hands it
// to every pane, the first and one opened after the kill. The tool's own
// bash and sleep are reapable orphans of the session; the server, its
// panes and a process started elsewhere with the variable are suspects,
// named and never reapable. After a restart nothing is reapable.
func TestOpenCodeTmuxPanesAreSuspects(t *testing.T) {
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux")
	}
	dataDir, work := t.TempDir(), t.TempDir()
	dbPath := filepath.Join(dataDir, "opencode.db")
	db := opencodetest.MustCreate(t, dbPath)
	dir, err := os.MkdirTemp("", "octmux")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s")
	t.Cleanup(func() {
		exec.Command(tmux, "-S", sock, "kill-server").Run()
		os.RemoveAll(dir)
	})
	tool := fmt.Sprintf("unset TMUX TMUX_PANE; %s -S %s -f /dev/null new-session -d -s oc 'exec sleep 305'; sleep 306; echo done", tmux, sock)
	cmd, toolPID := startFakeOpenCode(t, work, dbPath, []string{helperToolCmdEnv + "=" + tool}, "run", "fix the tests")
	t.Cleanup(func() { syscall.Kill(-toolPID, syscall.SIGKILL) }) // the tool's session is its group
	sh, err := db.InterruptedMidTool(work, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	createdNow(t, db, sh.SessionID)
	owner := cmd.Process.Pid
	bystander := exec.Command("sleep", "302")
	bystander.Env = append(os.Environ(), "OPENCODE_PID="+strconv.Itoa(owner))
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })

	var left *proc.Process
	testenv.Eventually(t, 10*time.Second, "the tool's sleep past tmux", func() bool {
		snap, err := proc.NewHost().Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range snap.Children(toolPID) {
			if len(p.Argv) == 2 && p.Argv[0] == "sleep" && p.Argv[1] == "306" {
				left = p
			}
		}
		return left != nil
	})
	bash := liveRow(t, toolPID)
	if bash.SID != toolPID || bash.PPID != owner {
		t.Fatalf("the premise: the tool %+v leads its own session below the opencode %d", bash, owner)
	}
	host := proc.NewHost()
	a := New(Config{DataDir: dataDir})
	o := find(t, realDiscover(t, a, host), sh.SessionID)
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != owner || len(orphansByPID(t, o)) != 0 {
		t.Fatalf("owner alive: owners %+v, problems %+v", o.Owners, o.Problems)
	}

	killAndReap(t, cmd)
	if out, err := exec.Command(tmux, "-S", sock, "new-window", "-d", "exec sleep 307").CombinedOutput(); err != nil {
		t.Fatalf("new-window: %v %s", err, out)
	}
	var panes []int
	testenv.Eventually(t, 10*time.Second, "the second pane", func() bool {
		out, err := exec.Command(tmux, "-S", sock, "list-panes", "-a", "-F", "#{pane_pid}").Output()
		if err != nil {
			t.Fatalf("list panes: %v", err)
		}
		panes = nil
		for _, f := range strings.Fields(string(out)) {
			pid, _ := strconv.Atoi(f)
			panes = append(panes, pid)
		}
		return len(panes) == 2
	})
	server := liveRow(t, liveRow(t, panes[0]).PPID)
	suspects := append([]int{server.Identity.PID, bystander.Process.Pid}, panes...)
	for _, pid := range suspects {
		if p := liveRow(t, pid); p.Env["OPENCODE_PID"] != strconv.Itoa(owner) {
			t.Fatalf("the premise: pid %d (%v) carries OPENCODE_PID=%d: %+v", pid, p.Argv, owner, p.Env)
		}
	}

	got := orphansByPID(t, find(t, realDiscover(t, a, host), sh.SessionID))
	for _, p := range []*proc.Process{bash, left} {
		if is, ok := got[p.Identity.PID]; !ok || is.Process == nil || *is.Process != p.Identity || !strings.Contains(is.Detail, "opencode pid "+strconv.Itoa(owner)) {
			t.Errorf("the tool's own %v (pid %d) is not a reapable orphan: %+v", p.Argv, p.Identity.PID, is)
		}
	}
	for _, pid := range suspects {
		if is, ok := got[pid]; !ok || is.Process != nil || !strings.Contains(is.Detail, "suspect, not reaped") {
			t.Errorf("pid %d only carries OPENCODE_PID: want a suspect, got %+v (named %v)", pid, is, ok)
		}
	}
	if len(got) != 2+len(suspects) {
		t.Errorf("named %d, want %d: %+v", len(got), 2+len(suspects), got)
	}

	// A restart (a new adapter) knows neither the tree nor the sessions
	// the dead opencode owned: nothing is reapable.
	for pid, is := range orphansByPID(t, find(t, realDiscover(t, New(Config{DataDir: dataDir}), host), sh.SessionID)) {
		if is.Process != nil {
			t.Errorf("after a restart pid %d is reapable: %+v", pid, is)
		}
	}
}
