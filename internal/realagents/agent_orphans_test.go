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

// tmuxTool is a tool command that starts a tmux server on sock (a pane
// running a python3) before its own long python3.
func tmuxTool(sock string) string {
	const paneTool = `python3 -c "import time; time.sleep(301)"`
	return fmt.Sprintf("unset TMUX TMUX_PANE; tmux -S %s -f /dev/null new-session -d 'exec %s'; %s; echo done", sock, paneTool, longTool)
}

// tmuxLeftovers is what a real agent killed -9 mid tmuxTool leaves: its
// own tool processes (the orphans), and what only carries its variables
// (the tmux server, its pane, a pane opened after the kill).
type tmuxLeftovers struct {
	orphans, suspects []procInfo
}

// killedMidTmuxTool waits for the agent (owner, whose tools name it in
// pidVar) to run tmuxTool and for a whole pass to see it, kills it -9,
// waits for the session to be interrupted with its orphan_processes,
// and opens one more pane.
func (w *world) killedMidTmuxTool(id string, owner int, pidVar, sock string, kinds []session.ProblemKind, diag func() string) tmuxLeftovers {
	w.t.Helper()
	sleeping := func(p procInfo, secs string) bool {
		return w.mine(p) && isPython(p) && strings.Contains(strings.Join(p.Args, " "), "time.sleep("+secs+")")
	}
	var own, pane procInfo
	w.waitFor(90*time.Second, "the tool's python3 and the tmux pane's", func() (bool, string) {
		a := procs(func(p procInfo) bool { return sleeping(p, "300") && p.Env[pidVar] == itoa(owner) })
		b := procs(func(p procInfo) bool { return sleeping(p, "301") && p.Env[pidVar] == itoa(owner) })
		if len(a) != 1 || len(b) != 1 {
			return false, diag()
		}
		own, pane = a[0], b[0]
		return true, ""
	})
	server, ok := readProc(pane.PPID)
	if !ok || server.Env[pidVar] != itoa(owner) || !strings.HasPrefix(server.Comm, "tmux") {
		w.t.Fatalf("the premise: the pane's python3 %+v and its tmux server %+v carry %s=%d", pane, server, pidVar, owner)
	}
	w.waitPassSaw(time.Now(), "the tools started")
	w.step("tools running and seen")

	// The agent's own tool processes: its python3 and the tool's shell
	// between the agent and it (neither agent's shell dies with it).
	tool := procs(func(p procInfo) bool { return w.mine(p) && p.Env[pidVar] == itoa(owner) && p.PGID == own.PGID })
	s, ok := w.session(id)
	if !ok {
		w.t.Fatalf("no session %s", id)
	}
	w.killInterrupted(s, owner, kinds...)

	// A pane opened now, by a client that never carried the variables.
	if out, err := exec.Command("tmux", "-S", sock, "new-window", "-d", "exec python3 -c 'import time; time.sleep(302)'").CombinedOutput(); err != nil {
		w.t.Fatalf("new-window: %v %s", err, out)
	}
	var later procInfo
	w.waitFor(10*time.Second, "the later pane's python3", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return sleeping(p, "302") && p.Env[pidVar] == itoa(owner) })
		if len(ps) != 1 {
			return false, fmt.Sprint(ps)
		}
		later = ps[0]
		return true, ""
	})
	return tmuxLeftovers{orphans: tool, suspects: []procInfo{server, pane, later}}
}

// reapSpares checks that the session names every carrier of the agent's
// variables, only the tool's own processes as orphans, and that reap
// --apply kills exactly those and leaves the suspects alive.
func (w *world) reapSpares(id string, l tmuxLeftovers) {
	w.t.Helper()
	want := pids(l.orphans)
	slices.Sort(want)
	all := append(pids(l.orphans), pids(l.suspects)...)
	s := w.waitSession(id, 10*time.Second, "every carrier of the variables named", func(s api.Session) bool {
		named := 0
		for _, p := range s.Problems {
			if p.Kind == session.ProblemOrphanProcesses && slices.Contains(all, atoi(p.Key)) {
				named++
			}
		}
		return named == len(all)
	})
	for _, p := range s.Problems {
		if p.Kind != session.ProblemOrphanProcesses {
			continue
		}
		if suspect := strings.Contains(p.Detail, "suspect, not reaped"); suspect == slices.Contains(want, atoi(p.Key)) {
			w.t.Errorf("pid %s: %q", p.Key, p.Detail)
		}
	}
	plan := w.action("reap", id)
	if got := stepPIDs(plan.Steps); !sameInts(got, want) {
		w.t.Fatalf("reap plan targets %v, want only the tool's own %v: %+v", got, want, plan.Steps)
	}
	res := w.action("reap", id, "--apply", "--timeout", "3s")
	if got := stepPIDs(res.Steps); !sameInts(got, want) {
		w.t.Fatalf("reap --apply %+v", res.Steps)
	}
	for _, st := range res.Steps {
		if st.Outcome != "done" {
			w.t.Errorf("reap step %+v", st)
		}
	}
	for _, p := range l.orphans {
		if alive(p.PID) {
			w.t.Errorf("the tool's %s %d survived reap --apply", p.Comm, p.PID)
		}
	}
	for _, p := range l.suspects {
		if !alive(p.PID) {
			w.t.Errorf("reap killed pid %d (%s), which only carries the variables", p.PID, p.Comm)
		}
	}
	w.step("reaped the tool's own, the tmux panes live on")
}

// `claude -p` (2.1.328) whose Bash tool starts a tmux server before its
// own long python3, killed -9. The tool's bash and python3 are reapable
// orphans (the daemon saw them below claude); the tmux server, its pane
// and a pane opened afterwards all carry CLAUDE_PID and
// CLAUDE_CODE_SESSION_ID, and are suspects only: reap --apply leaves them
// alive.
func TestClaudeTmuxPanesNotReaped(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	if _, err := exec.LookPath("tmux"); err != nil {
		skipLoudly(t, "REAL AGENTS NOT TESTED: tmux is not on PATH (%v)", err)
	}
	w := newWorld(t)
	sock := filepath.Join(w.Dir, "tool-tmux.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	w.model.Enqueue(fakemodel.RunCommand(tmuxTool(sock), "Run the long job", 10*time.Minute))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	const up = "5e55d0e5-0000-4000-8000-00000000a7e1"
	cmd, out := w.start("claude", w.proj(), bin, "--session-id", up, "-p", "run the long job", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
	pid := cmd.Process.Pid
	s := w.waitUpstream(up, 60*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, pid, "claude -p")
	l := w.killedMidTmuxTool(s.ID, pid, "CLAUDE_PID", sock,
		[]session.ProblemKind{session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses}, func() string { return tail(out.String(), 2000) })
	w.reapSpares(s.ID, l)
}

// `opencode run` (1.18.33) whose bash tool starts a tmux server before
// its own long python3, killed -9: the same, by OPENCODE_PID.
func TestOpenCodeTmuxPanesNotReaped(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	if _, err := exec.LookPath("tmux"); err != nil {
		skipLoudly(t, "REAL AGENTS NOT TESTED: tmux is not on PATH (%v)", err)
	}
	w := newWorld(t)
	sock := filepath.Join(w.Dir, "tool-tmux.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", sock, "kill-server").Run() })
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"TMUX-4c1": fakemodel.RunCommand(tmuxTool(sock), "Run the long job", 10*time.Minute),
	}))
	w.startDaemon("--opencode-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	cmd, out := w.start("opencode run", w.proj(), bin, "run", "Run the long job, marker TMUX-4c1")
	diag := func() string { return tail(out.String(), 2000) }
	up := w.waitOpenCodeSession("TMUX-4c1", diag)
	// The wrapper may exec or spawn the native binary: the owner is the
	// process the tools name.
	var owner int
	w.waitFor(90*time.Second, "opencode's tool", func() (bool, string) {
		for _, p := range procs(func(p procInfo) bool { return w.mine(p) && p.Env["OPENCODE_PID"] != "" }) {
			owner = atoi(p.Env["OPENCODE_PID"])
			return true, ""
		}
		return false, diag()
	})
	s := w.waitUpstream(up, 30*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, owner, "opencode run")
	l := w.killedMidTmuxTool(s.ID, owner, "OPENCODE_PID", sock, opencodeKilledProblems, diag)
	if owner != cmd.Process.Pid {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	}
	w.reapSpares(s.ID, l)
}
