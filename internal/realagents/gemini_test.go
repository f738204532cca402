package realagents

import (
	"encoding/json"
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

const geminiBinEnv = "SESSIOND_GEMINI_BIN"

// geminiModel is the model asked for with -m: without it Gemini CLI
// 0.61.0 first asks a router model which one to use.
const geminiModel = "gemini-2.5-flash"

// geminiDir is where the world's Gemini CLI keeps its data.
func (w *world) geminiDir() string { return filepath.Join(w.Home, ".gemini") }

// writeGeminiConfig points Gemini CLI at the fake model's Gemini API: an
// API key (any), the base URL, the auth type chosen in settings.json, and
// the project folder trusted (else --yolo is refused).
func (w *world) writeGeminiConfig() {
	w.t.Helper()
	if err := os.MkdirAll(w.geminiDir(), 0o755); err != nil {
		w.t.Fatal(err)
	}
	write := func(name string, v any) {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(w.geminiDir(), name), b, 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
	write("settings.json", map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":  map[string]any{"usageStatisticsEnabled": false},
	})
	write("trustedFolders.json", map[string]any{w.proj(): "TRUST_FOLDER"})
	w.Extra = append(w.Extra, "GEMINI_API_KEY=fake-key", "GOOGLE_GEMINI_BASE_URL="+w.model.URL, "GEMINI_CLI_HOME=")
}

// geminiOwner is the gemini that does the work below a started one:
// Gemini CLI relaunches itself (node … bin/gemini spawns node
// --max-old-space-size=… bin/gemini and waits for it).
func geminiOwner(top int) (procInfo, bool) {
	isGemini := func(p procInfo) bool {
		return len(p.Args) > 1 && strings.HasPrefix(filepath.Base(p.Args[0]), "node") && strings.Contains(strings.Join(p.Args, " "), "bin/gemini")
	}
	kids := procs(func(p procInfo) bool { return p.PPID == top && isGemini(p) })
	if len(kids) != 1 {
		return procInfo{}, false
	}
	return kids[0], true
}

// geminiSession waits for the one gemini session of the world.
func (w *world) geminiSession(within time.Duration) api.Session {
	w.t.Helper()
	var s api.Session
	w.waitFor(within, "a gemini session", func() (bool, string) {
		ss := w.sessions("gemini")
		if len(ss) != 1 {
			return false, itoa(len(ss)) + " sessions"
		}
		s = ss[0]
		return true, ""
	})
	return s
}

// Gemini CLI headless (`gemini -p`, started outside sessiond), its shell
// tool a bash that forks a long python3: running and busy while the tool
// runs, owned by the relaunched node that writes the chat; kill -9 of it
// makes the session interrupted with the call in flight and the surviving
// python3 an orphan of it, which reap kills. The daemon never shows the
// live session dead.
func TestGeminiHeadlessKilledMidTool(t *testing.T) {
	bin := agentBin(t, geminiBinEnv, "@google/gemini-cli")
	w := newWorld(t)
	w.writeGeminiConfig()
	w.model.Enqueue(fakemodel.RunCommand(longTool+"; echo done", "Run the long job", 0))
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("gemini -p", w.proj(), bin, "-m", geminiModel, "--yolo", "-p", "Run the long job")
	var tool procInfo
	w.waitFor(90*time.Second, "gemini's python3 tool running", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return w.mine(p) && isPython(p) })
		if len(ps) == 0 {
			return false, tail(out.String(), 2000)
		}
		tool = ps[0]
		return true, ""
	})
	owner, ok := geminiOwner(cmd.Process.Pid)
	if !ok {
		t.Fatalf("no relaunched gemini below %d", cmd.Process.Pid)
	}
	s := w.geminiSession(15 * time.Second)
	lw.claim("gemini", s.UpstreamID, owner.PID)
	s = w.waitUpstream(s.UpstreamID, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	if s.PID != owner.PID || s.Cwd != w.proj() || s.Agent != "gemini" {
		t.Fatalf("session %+v: want owner %d (the relaunched node, not %d), cwd %s", s, owner.PID, cmd.Process.Pid, w.proj())
	}
	w.waitPassSaw(time.Now(), "the tool started")
	w.step("running/busy")

	killed := time.Now()
	if err := syscall.Kill(owner.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	t.Logf("interrupted %s after kill -9, problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
	// The python3 and the two bash of Gemini CLI's shell wrapper live on
	// in the tool's session.
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(tool.PID)+" ") {
		t.Errorf("orphan_processes %q does not name the python3 %d", d, tool.PID)
	}
	res := w.action("reap", s.ID, "--apply", "--timeout", "3s")
	for _, st := range res.Steps {
		if st.Outcome != "done" {
			t.Errorf("reap step %+v", st)
		}
	}
	if alive(tool.PID) {
		t.Errorf("python3 %d survived reap --apply", tool.PID)
	}
	w.step("reaped")
}

// Gemini CLI's interactive TUI typed into a tmux pane, as a person starts
// it: idle at its prompt, busy while an approved tool runs, idle again
// once the answer is written; then busy in a long tool, and interrupted
// after kill -9. Never shown dead while it lives.
func TestGeminiTUIBusyIdleKilled(t *testing.T) {
	bin := agentBin(t, geminiBinEnv, "@google/gemini-cli")
	w := newWorld(t)
	w.writeGeminiConfig()
	w.model.Enqueue(
		fakemodel.RunCommand(`python3 -c "import time; time.sleep(6)"`, "Short job", 0),
		fakemodel.Say("Short job done."),
		fakemodel.RunCommand(longTool, "Long job", 0),
	)
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	ts := w.startTmux(bin)
	p := ts.newPane(w.proj())
	p.typeLine("gemini -m " + geminiModel)
	p.waitScreen(90*time.Second, "Type your message")
	top, ok := p.child(func(c procInfo) bool { return strings.Contains(strings.Join(c.Args, " "), "gemini") })
	if !ok {
		t.Fatalf("no gemini in the pane:\n%s", p.capture())
	}
	owner, ok := geminiOwner(top.PID)
	if !ok {
		t.Fatalf("no relaunched gemini below %d", top.PID)
	}
	w.step("TUI ready")

	p.submit("Run the short job", "Type your message", "Allow execution", 60*time.Second)
	s := w.geminiSession(15 * time.Second)
	lw.claim("gemini", s.UpstreamID, owner.PID)
	p.keys("Enter") // 1. Allow once
	w.waitFor(30*time.Second, "the short tool", func() (bool, string) {
		return len(procs(func(c procInfo) bool { return w.mine(c) && isPython(c) })) > 0, ""
	})
	s = w.waitUpstream(s.UpstreamID, 15*time.Second, "running and busy in the short tool", runningWith(session.ActivityBusy))
	if s.PID != owner.PID || s.Cwd != w.proj() {
		t.Fatalf("session %+v: want owner %d, cwd %s", s, owner.PID, w.proj())
	}
	w.step("busy")
	s = w.waitUpstream(s.UpstreamID, 60*time.Second, "idle after the answer", runningWith(session.ActivityIdle))
	w.step("idle")

	p.submit("Run the long job", "Type your message", "Allow execution", 60*time.Second)
	p.keys("Enter")
	w.waitFor(30*time.Second, "the long tool", func() (bool, string) {
		return len(procs(func(c procInfo) bool { return w.mine(c) && isPython(c) })) > 0, ""
	})
	s = w.waitUpstream(s.UpstreamID, 15*time.Second, "busy in the long tool", runningWith(session.ActivityBusy))
	w.waitPassSaw(time.Now(), "the tool started")
	killed := time.Now()
	if err := syscall.Kill(owner.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall)
	t.Logf("interrupted %s after kill -9, problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
}

// A headless Gemini CLI session launched through sessiond is linked at
// once to the id sessiond chose (--session-id); killed mid tool it is
// interrupted; a resume through sessiond continues the same session: the
// same id, the same chat appended to, and the model gets the earlier
// turns.
func TestGeminiLaunchKilledResume(t *testing.T) {
	bin := agentBin(t, geminiBinEnv, "@google/gemini-cli")
	w := newWorld(t)
	w.writeGeminiConfig()
	w.model.Enqueue(fakemodel.RunCommand("echo TOOL-OUTPUT-5d1; "+longTool, "Run the long job", 0))
	w.startDaemon("--gemini-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	args := []string{"--", "-m", geminiModel, "--yolo"}
	r := w.launch(append([]string{"launch", "--agent", "gemini", "--cwd", w.proj(), "--prompt", "Run the job FIRST-PROMPT-8a2"}, args...)...)
	id := r.Session.ID
	s := w.waitSession(id, 90*time.Second, "linked, running and busy in its tool", func(s api.Session) bool {
		return s.UpstreamID != "" && s.Resume != nil && s.Status == session.StatusRunning && s.Activity == session.ActivityBusy
	})
	up := s.UpstreamID
	w.step("linked " + up + ", busy")
	if s.Resume.Root != w.geminiDir() || s.Resume.Cwd != w.proj() || s.Agent != "gemini" {
		t.Errorf("session %+v, resume cursor %+v", s, s.Resume)
	}
	chats, _ := filepath.Glob(filepath.Join(w.geminiDir(), "tmp", "*", "chats", "session-*-"+up[:8]+".jsonl"))
	if len(chats) != 1 {
		t.Fatalf("chats of %s: %v", up, chats)
	}
	var owner procInfo
	w.waitFor(30*time.Second, "the relaunched gemini and its python3 tool", func() (bool, string) {
		for _, p := range procs(func(p procInfo) bool {
			return w.mine(p) && strings.Contains(strings.Join(p.Args, " "), "max-old-space-size")
		}) {
			owner = p
		}
		return owner.PID != 0 && len(procs(func(p procInfo) bool { return w.mine(p) && isPython(p) })) > 0, ""
	})
	w.waitPassSaw(time.Now(), "the tool started")
	killed := time.Now()
	if err := syscall.Kill(owner.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(id, killed, 2*time.Second, session.ProblemOrphanedToolCall)
	w.step("interrupted after " + took.Round(time.Millisecond).String())
	for _, p := range procs(func(p procInfo) bool { return w.mine(p) && isPython(p) }) {
		syscall.Kill(p.PID, syscall.SIGKILL)
	}
	before, err := os.Stat(chats[0])
	if err != nil {
		t.Fatal(err)
	}

	w.model.Enqueue(fakemodel.Say("Resumed fine."))
	w.launch(append([]string{"resume", id, "--prompt", "Continue SECOND-PROMPT-3f7"}, args...)...)
	s = w.waitSession(id, 90*time.Second, "stopped after the resumed turn", func(s api.Session) bool {
		return s.Status == session.StatusStopped && s.UpstreamID == up
	})
	w.step("resumed, stopped")
	after, err := os.Stat(chats[0])
	if err != nil || after.Size() <= before.Size() {
		t.Fatalf("the resume did not append to %s: %v %d -> %d", chats[0], err, before.Size(), after.Size())
	}
	turns := w.model.Turns()
	last := turns[len(turns)-1]
	if txt := last.Text(); !strings.Contains(txt, "FIRST-PROMPT-8a2") || !strings.Contains(txt, "SECOND-PROMPT-3f7") {
		t.Errorf("the resumed turn did not carry the first one:\n%s", tail(txt, 2000))
	}
	if ss := w.sessions("gemini"); len(ss) != 1 {
		t.Errorf("%d gemini sessions after the resume, want 1: %+v", len(ss), ss)
	}
}
