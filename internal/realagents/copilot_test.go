package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

const copilotBinEnv = "SESSIOND_COPILOT_BIN"

// copilotHome is where the world's Copilot keeps its data.
func (w *world) copilotHome() string { return filepath.Join(w.Home, ".copilot") }

// copilotEnv points Copilot at the fake model's chat-completions API, as
// a BYOK provider, offline: no GitHub sign-in, no telemetry, no update.
// Its JavaScript is the one scripts/install-agents.sh unpacked beside the
// binary (bin is <prefix>/node_modules/.bin/copilot).
func (w *world) copilotEnv(bin string) {
	prefix := filepath.Dir(filepath.Dir(filepath.Dir(bin)))
	w.Extra = append(w.Extra,
		"COPILOT_OFFLINE=true",
		"COPILOT_AUTO_UPDATE=false",
		"COPILOT_PKG_CACHE_HOME="+filepath.Join(prefix, "pkg-cache"),
		"COPILOT_PROVIDER_BASE_URL="+w.model.OpenAIBaseURL(),
		"COPILOT_PROVIDER_API_KEY=fake-key",
		"COPILOT_MODEL=fake-model",
	)
}

// copilotTools are the live processes a Copilot session's tools left or
// run: they carry the session id in COPILOT_AGENT_SESSION_ID.
func copilotTools(upstream string) []procInfo {
	return procs(func(p procInfo) bool { return p.Env["COPILOT_AGENT_SESSION_ID"] == upstream })
}

// copilotNative is the native copilot binary the npm loader at pid
// spawned: the process that has the session.
func copilotNative(t *testing.T, loader int) procInfo {
	t.Helper()
	for _, p := range procs(func(p procInfo) bool { return p.PPID == loader }) {
		if filepath.Base(p.Exe) == "copilot" {
			return p
		}
	}
	t.Fatalf("no native copilot below the loader %d", loader)
	return procInfo{}
}

// copilotKilledMidTool kills the native copilot with -9 while its python3
// tool runs, and checks: interrupted within limit (from the event log)
// with the call in flight and the surviving tool as an orphan; reap
// kills exactly what the session left.
func (w *world) copilotKilledMidTool(s api.Session, native int) {
	w.t.Helper()
	up := s.UpstreamID
	// The python3 is attributed by what the daemon saw while copilot lived.
	w.waitPassSaw(time.Now(), "the tool started")
	killed := time.Now()
	if err := syscall.Kill(native, syscall.SIGKILL); err != nil {
		w.t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	w.t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
	for _, lock := range []string{"lock", "hold"} {
		p := filepath.Join(w.copilotHome(), "session-state", up, fmt.Sprintf("inuse.%d.%s", native, lock))
		if _, err := os.Stat(p); err != nil {
			w.t.Errorf("a kill -9 should leave %s behind: %v", p, err)
		}
	}
	orphans := copilotTools(up)
	var python *procInfo
	for i := range orphans {
		if isPython(orphans[i]) {
			python = &orphans[i]
		}
	}
	if python == nil {
		w.t.Fatalf("left behind: %+v, want the python3", orphans)
	}
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(python.PID)+" ") {
		w.t.Errorf("orphan_processes %q does not name the python3 %d", d, python.PID)
	}
	w.reapAll(s.ID, orphans)
	w.step("reaped")
}

// `copilot -p` started outside sessiond, its tool a shell that forks a
// long python3: running and busy while the tool runs, owned by the native
// binary (it holds the session's inuse.<pid>.hold open; the npm loader
// above it does not); kill -9 of it makes the session interrupted with the
// call in flight and the surviving processes as orphans, which reap kills.
func TestCopilotHeadlessKilledMidTool(t *testing.T) {
	bin := agentBin(t, copilotBinEnv, "@github/copilot")
	w := newWorld(t)
	w.copilotEnv(bin)
	// "; echo done": bash forks python3 rather than exec'ing it.
	w.model.Enqueue(fakemodel.RunCommand(longTool+"; echo done", "Run the long job", 10*time.Minute))
	w.startDaemon("--copilot-dir", w.copilotHome(), "--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("copilot -p", w.proj(), bin, "-p", "Run the long job", "--allow-all-tools")
	diag := func() string { return tail(out.String(), 2000) }
	var up string
	w.waitFor(90*time.Second, "copilot's python3 tool running", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return w.mine(p) && p.Env["COPILOT_AGENT_SESSION_ID"] != "" && isPython(p) })
		if len(ps) == 0 {
			return false, diag()
		}
		up = ps[0].Env["COPILOT_AGENT_SESSION_ID"]
		return true, ""
	})
	w.step("tool running")
	native := copilotNative(t, cmd.Process.Pid).PID
	lw.claim("copilot", up, native)
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	if s.PID != native || s.Agent != "copilot" || s.Cwd != w.proj() || s.Title != "Run the long job" {
		t.Fatalf("session %+v: want owner %d (the native copilot, not the loader %d), cwd %s, the prompt as title", s, native, cmd.Process.Pid, w.proj())
	}
	if s.OwnerInferred {
		t.Errorf("owner inferred (%s): its descriptor names it exactly", s.OwnerEvidence)
	}
	w.step("running/busy")
	w.copilotKilledMidTool(s, native)
}

// The interactive TUI typed into a tmux pane, as people run it (no
// approval flags): the session is seen before its first prompt; waiting
// for the permission of the model's command, with the command; busy once
// approved while the tool runs; the native binary killed with -9,
// interrupted with the call in flight and the tool as an orphan.
func TestCopilotInteractiveTmux(t *testing.T) {
	bin := agentBin(t, copilotBinEnv, "@github/copilot")
	w := newWorld(t)
	w.copilotEnv(bin)
	w.model.Enqueue(fakemodel.RunCommand(longTool+"; echo done", "Run the long job", 10*time.Minute))
	w.startDaemon("--copilot-dir", w.copilotHome(), "--grace", "5s", "--reconcile-interval", "1s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("copilot")
	diag := func() string { return compactScreen(p.capture()) }
	// Copilot asks whether to trust the folder first.
	w.waitFor(90*time.Second, "the TUI asking to trust the folder", func() (bool, string) {
		s := p.capture()
		return strings.Contains(s, "Do you trust the files in this folder?"), compactScreen(s)
	})
	p.keys("Enter")
	loader, ok := p.child(func(procInfo) bool { return true })
	if !ok {
		t.Fatalf("no copilot below the pane's shell %d:\n%s", p.ShellPID, diag())
	}
	native := copilotNative(t, loader.PID).PID
	// The TUI makes its session's folder at its start, before any prompt.
	var up string
	w.waitFor(30*time.Second, "the TUI's session folder", func() (bool, string) {
		m, _ := filepath.Glob(filepath.Join(w.copilotHome(), "session-state", "*", fmt.Sprintf("inuse.%d.hold", native)))
		if len(m) != 1 {
			return false, diag()
		}
		up = filepath.Base(filepath.Dir(m[0]))
		return true, ""
	})
	lw.claim("copilot", up, native)
	s := w.waitUpstream(up, 15*time.Second, "running and idle before its first prompt", runningWith(session.ActivityIdle))
	if s.PID != native || s.Pane == nil || s.Pane.ID != p.ID {
		t.Fatalf("session %+v: want owner %d in pane %s", s, native, p.ID)
	}
	w.step("TUI ready, running/idle")

	p.typeLine("Run the long job")
	s = w.waitUpstream(up, 60*time.Second, "waiting for the command's permission", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityWaiting && s.WaitingFor != nil &&
			s.WaitingFor.Kind == session.WaitingPermission
	})
	if s.WaitingFor.Tool != "bash" || !strings.Contains(s.WaitingFor.Input, "time.sleep(300)") {
		t.Errorf("waiting for %+v, want bash and the command", *s.WaitingFor)
	}
	w.step("waiting for permission")
	p.waitScreen(10*time.Second, "Do you want to run this command?")
	p.keys("Enter")
	w.waitFor(30*time.Second, "the approved python3 running", func() (bool, string) {
		return len(procs(func(p procInfo) bool { return p.Env["COPILOT_AGENT_SESSION_ID"] == up && isPython(p) })) > 0, diag()
	})
	s = w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.step("approved: running/busy")
	w.copilotKilledMidTool(s, native)
}
