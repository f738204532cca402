package realagents

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// waitPassSaw waits until a whole reconcile pass ran after t: one ended
// after t, and another after that one, whose process snapshot was taken
// after t. Codex's leftovers are attributed from what the daemon saw
// while their Codex lived, so a test kills a Codex only once a pass saw
// its tools.
func (w *world) waitPassSaw(t time.Time, what string) {
	w.t.Helper()
	last := func() time.Time {
		var h api.Health
		w.CtlJSON(&h, "health")
		return h.LastReconcile
	}
	var first time.Time
	w.waitFor(10*time.Second, "a reconcile pass after "+what, func() (bool, string) {
		first = last()
		return first.After(t), first.String()
	})
	w.waitFor(10*time.Second, "a whole reconcile pass after "+what, func() (bool, string) {
		l := last()
		return l.After(first), l.String()
	})
}

// mine is a process this world started (its marker), so another test's
// processes on the machine never count.
func (w *world) mine(p procInfo) bool { return p.Env[markerEnv] == w.marker }

// `codex exec` whose tool starts a tmux server (a pane running a python3)
// before its own long python3, then killed -9. Every one of them carries
// the session's CODEX_THREAD_ID, and so does a pane opened afterwards: the
// server hands its environment to every pane. Only the tool's own python3
// (in the session of the tool's bash, which Codex started setsid'd and
// the daemon saw) is a reapable orphan; the tmux server and its panes are
// suspects, named but never signalled, and live on after reap --apply.
func TestCodexExecTmuxPanesNotReaped(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	if _, err := exec.LookPath("tmux"); err != nil {
		skipLoudly(t, "REAL AGENTS NOT TESTED: tmux is not on PATH (%v)", err)
	}
	w := newWorld(t)
	w.writeCodexConfig()
	sock := filepath.Join(w.Dir, "tool-tmux.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	const paneTool = `python3 -c "import time; time.sleep(301)"`
	tool := fmt.Sprintf("unset TMUX TMUX_PANE; tmux -S %s -f /dev/null new-session -d 'exec %s'; %s; echo done", sock, paneTool, longTool)
	w.model.Enqueue(fakemodel.RunCommand(tool, "Run the long job", 10*time.Minute))
	w.startDaemon("--grace", "5s")
	w.step("daemon ready")

	cmd, out := w.start("codex exec", w.proj(), bin, "exec", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox", "Run the long job")
	diag := func() string { return tail(out.String(), 2000) }
	sleeping := func(p procInfo, secs string) bool {
		return w.mine(p) && isPython(p) && strings.Contains(strings.Join(p.Args, " "), "time.sleep("+secs+")")
	}
	var own, pane procInfo
	w.waitFor(60*time.Second, "the tool's python3 and the tmux pane's", func() (bool, string) {
		a := procs(func(p procInfo) bool { return sleeping(p, "300") })
		b := procs(func(p procInfo) bool { return sleeping(p, "301") })
		if len(a) != 1 || len(b) != 1 {
			return false, diag()
		}
		own, pane = a[0], b[0]
		return true, ""
	})
	up := own.Env["CODEX_THREAD_ID"]
	server, ok := readProc(pane.PPID)
	if up == "" || pane.Env["CODEX_THREAD_ID"] != up || !ok || server.Env["CODEX_THREAD_ID"] != up || !strings.HasPrefix(server.Comm, "tmux") {
		t.Fatalf("the premise: the tool's python3 %+v, the pane's %+v and its tmux server %+v all carry the session's CODEX_THREAD_ID", own, pane, server)
	}
	var native int
	for _, p := range procs(func(p procInfo) bool { return p.PPID == cmd.Process.Pid }) {
		if filepath.Base(p.Exe) == "codex" {
			native = p.PID
		}
	}
	if native == 0 {
		t.Fatalf("no native codex below the wrapper %d", cmd.Process.Pid)
	}
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.waitPassSaw(time.Now(), "the tools started")
	w.step("running/busy, tools seen")

	killed := time.Now()
	if err := syscall.Kill(native, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	w.step("interrupted after " + took.Round(time.Millisecond).String())

	// A pane opened now, by a client that never carried the variable.
	if out, err := exec.Command("tmux", "-S", sock, "new-window", "-d", "exec python3 -c 'import time; time.sleep(302)'").CombinedOutput(); err != nil {
		t.Fatalf("new-window: %v %s", err, out)
	}
	var later procInfo
	w.waitFor(10*time.Second, "the later pane's python3", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return sleeping(p, "302") && p.Env["CODEX_THREAD_ID"] == up })
		if len(ps) != 1 {
			return false, fmt.Sprint(ps)
		}
		later = ps[0]
		return true, ""
	})
	suspects := []procInfo{server, pane, later}

	// Everything that carries the variable is named; only the tool's own
	// python3 as an orphan.
	carriers := procs(func(p procInfo) bool { return w.mine(p) && p.Env["CODEX_THREAD_ID"] == up })
	s = w.waitSession(s.ID, 10*time.Second, "every carrier of the variable named", func(s api.Session) bool {
		named := 0
		for _, p := range s.Problems {
			if p.Kind == session.ProblemOrphanProcesses {
				named++
			}
		}
		return named == len(carriers)
	})
	for _, p := range s.Problems {
		if p.Kind != session.ProblemOrphanProcesses {
			continue
		}
		if suspect := strings.Contains(p.Detail, "suspect, not reaped"); suspect == (p.Key == itoa(own.PID)) {
			t.Errorf("pid %s: %q", p.Key, p.Detail)
		}
	}

	plan := w.action("reap", s.ID)
	if got := stepPIDs(plan.Steps); !slices.Equal(got, []int{own.PID}) {
		t.Fatalf("reap plan targets %v, want only the tool's python3 %d: %+v", got, own.PID, plan.Steps)
	}
	res := w.action("reap", s.ID, "--apply", "--timeout", "3s")
	if got := stepPIDs(res.Steps); !slices.Equal(got, []int{own.PID}) || res.Steps[0].Outcome != "done" {
		t.Fatalf("reap --apply %+v", res.Steps)
	}
	if alive(own.PID) {
		t.Errorf("the tool's python3 %d survived reap --apply", own.PID)
	}
	for _, p := range suspects {
		if !alive(p.PID) {
			t.Errorf("reap killed pid %d (%s), which only carries the variable", p.PID, p.Comm)
		}
	}
	w.step("reaped the orphan, the tmux panes live on")
}
