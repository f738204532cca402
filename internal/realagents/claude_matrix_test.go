package realagents

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// Matrix: an interactive claude typed into a tmux pane, as people run it,
// with no --session-id (only its registry entry names its owner). While it
// waits for its first prompt it is running and idle; a tool call that needs
// approval makes it waiting; approved and answered, idle again; its long
// tool makes it busy; all with the claude process (not the pane's shell) as
// owner. kill -9: interrupted with the orphaned tool call, the stale busy
// marker and the orphaned tool processes.
func TestClaudeInteractiveTmux(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.seedClaudeHome(w.proj())
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		// Not python3: the settings allow only that, so Claude asks.
		"APPROVE-7c1": fakemodel.RunCommand("touch approved-7c1.txt", "Touch the approval marker", 0),
		"LONG-3e8":    longJob(""),
	}))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.watchLiveNeverDead()
	w.step("daemon ready")
	// sessiond's hooks, merged into the settings the seed wrote; they
	// come out again byte for byte at the end.
	settings := filepath.Join(w.claudeRoot(), "settings.json")
	seeded, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	if out, errs, code := w.Ctl("hooks", "install", "claude", "--root", w.claudeRoot()); code != 0 {
		t.Fatalf("hooks install claude: exit %d: %s %s", code, out, errs)
	}
	defer func() {
		if out, errs, code := w.Ctl("hooks", "uninstall", "claude", "--root", w.claudeRoot()); code != 0 {
			t.Errorf("hooks uninstall claude: exit %d: %s %s", code, out, errs)
		}
		if b, _ := os.ReadFile(settings); string(b) != string(seeded) {
			t.Errorf("settings.json after uninstall:\n%s\nwant byte-identical:\n%s", b, seeded)
		}
	}()

	p, cl, reg := w.startClaudeInPane(bin)
	t.Logf("claude pid %d (shell %d) %q: registry kind %q entrypoint %q tmux %q pidDomain %q",
		cl.PID, p.ShellPID, cl.Args, reg.Kind, reg.Entrypoint, reg.Tmux, reg.PIDDomain)
	if reg.Kind != "interactive" || reg.SessionID == "" || reg.Cwd != w.proj() {
		t.Fatalf("registry entry %+v", reg)
	}
	up := reg.SessionID
	w.step("claude idle in the pane")
	diag := func() string { return compactScreen(p.capture()) }

	s := w.waitUpstream(up, 15*time.Second, "running and idle before the first prompt", runningWith(session.ActivityIdle))
	w.checkOwner(s, cl.PID, "interactive claude")
	w.step("running/idle, owner the claude process")
	// The pane, from the owner's environment and process tree, is the
	// one Claude's registry names ("main:@0.%0").
	w.checkPane(up, p)
	if !strings.HasSuffix(reg.Tmux, "."+p.ID) {
		t.Errorf("registry tmux %q, sessiond found pane %s", reg.Tmux, p.ID)
	}
	w.step("the pane found, as the registry names it")

	// A tool call that needs approval: waiting for the user.
	p.typeLine("Touch the approval marker, marker APPROVE-7c1")
	w.waitFor(30*time.Second, "claude asks for permission", func() (bool, string) {
		r, _ := readClaudeReg(w.claudeRoot(), cl.PID)
		return r.Status == "waiting", r.Status + " " + r.WaitingFor + "\n" + diag()
	})
	sawWaiting := time.Now()
	if r, _ := readClaudeReg(w.claudeRoot(), cl.PID); r.WaitingFor != "permission prompt" {
		t.Errorf("registry waitingFor %q, want \"permission prompt\"", r.WaitingFor)
	}
	// Within a second of Claude's own registry: waiting, for which tool
	// and what for (the registry says a permission; the PermissionRequest
	// hook which tool, for what).
	s = w.waitUpstream(up, time.Second, "waiting for permission for Bash: touch", func(s api.Session) bool {
		wf := s.WaitingFor
		return s.Status == session.StatusRunning && s.Activity == session.ActivityWaiting && wf != nil && wf.Kind == session.WaitingPermission &&
			wf.Tool == "Bash" && wf.Input == "touch approved-7c1.txt"
	})
	t.Logf("waiting_for %+v from the %s, %s after the registry", *s.WaitingFor, s.ActivitySource, time.Since(sawWaiting).Round(time.Millisecond))
	if s.ActivitySource != session.SourceHook && s.ActivitySource != session.SourceRegistry {
		t.Errorf("activity_source %q, want the registry or the hook", s.ActivitySource)
	}
	w.checkOwner(s, cl.PID, "interactive claude")
	w.step("running/waiting for permission, with the tool and its command")
	// Approve: Enter on the first choice (Yes), once the dialog is drawn
	// and takes keys (the registry says waiting a moment before).
	p.waitScreen(10*time.Second, "Do you want to proceed?")
	var pressed time.Time
	w.waitFor(30*time.Second, "the approved tool ran and the turn ended", func() (bool, string) {
		_, err := os.Stat(filepath.Join(w.proj(), "approved-7c1.txt"))
		r, _ := readClaudeReg(w.claudeRoot(), cl.PID)
		screen := p.capture()
		if r.Status == "waiting" && strings.Contains(screen, "Do you want to proceed?") && time.Since(pressed) > time.Second {
			if !pressed.IsZero() {
				t.Logf("the permission dialog is still open 1s after Enter: pressing it again")
			}
			p.keys("Enter")
			pressed = time.Now()
		}
		return err == nil && r.Status == "idle", r.Status + "\n" + compactScreen(screen)
	})
	// Answered, the wait is gone within a second of the registry's idle.
	s = w.waitUpstream(up, time.Second, "running and idle after the turn, waiting for input", func(s api.Session) bool {
		return runningWith(session.ActivityIdle)(s) && s.WaitingFor != nil && s.WaitingFor.Kind == session.WaitingInput
	})
	w.checkOwner(s, cl.PID, "interactive claude")
	w.step("approved, turn done: running/idle")

	p.typeLine("Run the long job, marker LONG-3e8")
	s = w.claudeBusyThenKilled(cl.PID, w.claudeRoot(), diag)
	if s.UpstreamID != up {
		t.Errorf("upstream %s, the registry said %s", s.UpstreamID, up)
	}
}

// startClaudeInPane types `claude` into a new tmux pane in the project, as
// people start it, and waits until it is registered idle at its prompt.
func (w *world) startClaudeInPane(bin string) (p *pane, cl procInfo, reg claudeReg) {
	w.t.Helper()
	p = w.startTmux(bin).newPane(w.proj())
	p.typeLine("claude")
	w.waitFor(60*time.Second, "claude started in the pane, registered idle", func() (bool, string) {
		var ok bool
		if cl, ok = p.child(func(procInfo) bool { return true }); !ok {
			return false, "no child of the pane's shell " + itoa(p.ShellPID) + "\n" + compactScreen(p.capture())
		}
		reg, ok = readClaudeReg(w.claudeRoot(), cl.PID)
		return ok && reg.Status == "idle" && strings.Contains(p.capture(), "❯"), compactScreen(p.capture())
	})
	return p, cl, reg
}

// Matrix: `claude -p` started by hand with no --session-id, in the default
// config root: running and busy with the claude process as owner, then
// interrupted after kill -9.
func TestClaudePrintNoSessionID(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"LONG-0b1": longJob("")}))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("claude -p", w.proj(), bin, "-p", "Run the long job, marker LONG-0b1",
		"--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
	w.claudeBusyThenKilled(cmd.Process.Pid, w.claudeRoot(), func() string { return tail(out.String(), 2000) })
}

// Matrix: `claude -p` with CLAUDE_CONFIG_DIR naming a second config root,
// which the daemon is told about with a second --claude-dir: found there,
// owned by its process, interrupted after kill -9.
func TestClaudePrintSecondConfigRoot(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"LONG-9d4": longJob("")}))
	work := filepath.Join(w.Home, ".claude-work")
	w.startDaemon("--claude-bin", bin, "--grace", "5s", "--claude-dir", w.claudeRoot(), "--claude-dir", work)
	w.watchLiveNeverDead(work)
	w.step("daemon ready")

	cmd, out := w.startEnv("claude -p (second root)", w.proj(), []string{"CLAUDE_CONFIG_DIR=" + work},
		bin, "-p", "Run the long job, marker LONG-9d4", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
	s := w.claudeBusyThenKilled(cmd.Process.Pid, work, func() string { return tail(out.String(), 2000) })
	if _, err := os.Stat(filepath.Join(w.claudeRoot(), "sessions")); err == nil {
		t.Errorf("claude wrote a registry in the default root %s too", w.claudeRoot())
	}
	if !strings.HasPrefix(s.Source, work) {
		t.Errorf("session source %q, want under %s", s.Source, work)
	}
}

// Matrix: two `claude -p` at once in the same directory, neither with
// --session-id: each session's owner is its own process, never the other;
// killing one interrupts only its session while the other stays running
// and busy with its owner; then the other.
func TestClaudeTwoSessionsSameDir(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"RUN-A": longJob("A"), "RUN-B": longJob("B")}))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.watchLiveNeverDead()
	w.step("daemon ready")

	type run struct {
		pid int
		out interface{ String() string }
		up  string
		s   api.Session
	}
	var runs []*run
	for _, tag := range []string{"A", "B"} {
		cmd, out := w.start("claude -p "+tag, w.proj(), bin, "-p", "Run the long job, marker RUN-"+tag,
			"--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
		runs = append(runs, &run{pid: cmd.Process.Pid, out: out})
	}
	for i, r := range runs {
		py := w.waitClaudeTool(r.pid, 60*time.Second, func() string { return tail(r.out.String(), 2000) })
		if want := []string{"A", "B"}[i]; py.Args[len(py.Args)-1] != want {
			t.Fatalf("claude %d runs the tool %q, want the one tagged %s", r.pid, py.Args, want)
		}
		r.up = py.Env["CLAUDE_CODE_SESSION_ID"]
	}
	if runs[0].up == runs[1].up {
		t.Fatalf("both claude processes run session %s", runs[0].up)
	}
	w.step("both tools running")
	for _, r := range runs {
		r.s = w.waitUpstream(r.up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
		w.checkOwner(r.s, r.pid, "claude -p")
	}
	w.step("both running/busy, owners checked")

	w.killInterrupted(runs[0].s, runs[0].pid, session.ProblemOrphanedToolCall, session.ProblemStaleBusyMarker, session.ProblemOrphanProcesses)
	s := w.Show(runs[1].s.ID)
	if s.Status != session.StatusRunning || s.Activity != session.ActivityBusy {
		t.Fatalf("the other session after the first was killed: %s", sessionLine(s))
	}
	w.checkOwner(s, runs[1].pid, "the other claude -p")
	w.killInterrupted(runs[1].s, runs[1].pid, session.ProblemOrphanedToolCall, session.ProblemStaleBusyMarker, session.ProblemOrphanProcesses)
}
