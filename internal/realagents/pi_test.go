package realagents

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

const piBinEnv = "SESSIOND_PI_BIN"

// piDir is where the world's Pi keeps its data: ~/.pi/agent.
func (w *world) piDir() string { return filepath.Join(w.Home, ".pi", "agent") }

// writePiConfig points Pi at the fake model (an openai-completions
// provider in models.json, the default in settings.json, so a bare `pi`
// uses it) and keeps it offline (PI_OFFLINE: no download of fd and
// ripgrep at the TUI's start).
func (w *world) writePiConfig() {
	w.t.Helper()
	models := map[string]any{"providers": map[string]any{"fake": map[string]any{
		"baseUrl": w.model.OpenAIBaseURL(), "api": "openai-completions", "apiKey": "fake-key",
		"compat": map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
		"models": []any{map[string]any{"id": "m1"}},
	}}}
	settings := map[string]any{"defaultProvider": "fake", "defaultModel": "m1", "lastChangelogVersion": "0.73.1"}
	if err := os.MkdirAll(w.piDir(), 0o755); err != nil {
		w.t.Fatal(err)
	}
	for name, v := range map[string]any{"models.json": models, "settings.json": settings} {
		b, _ := json.MarshalIndent(v, "", "  ")
		if err := os.WriteFile(filepath.Join(w.piDir(), name), b, 0o644); err != nil {
			w.t.Fatal(err)
		}
	}
	w.Extra = append(w.Extra, "PI_OFFLINE=1")
}

var piSessionName = regexp.MustCompile(`_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$`)

// piSessions are the ids of the session files of the world's Pi.
func (w *world) piSessions() []string {
	files, _ := filepath.Glob(filepath.Join(w.piDir(), "sessions", "*", "*.jsonl"))
	var out []string
	for _, f := range files {
		if m := piSessionName.FindStringSubmatch(f); m != nil {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

// piTool is the python3 running a tool of the pi process pid: its child
// (bash -c exec'd it) or its grandchild (pi → bash → python3).
func (w *world) piTool(pid int, tag string) (procInfo, bool) {
	for _, p := range procs(func(p procInfo) bool {
		return w.mine(p) && isPython(p) && strings.Contains(strings.Join(p.Args, " "), tag)
	}) {
		if sh, ok := readProc(p.PPID); p.PPID == pid || (ok && sh.PPID == pid) {
			return p, true
		}
	}
	return procInfo{}, false
}

// Pi run headless (`pi -p`, started outside sessiond, no special flags)
// whose tool forks a long python3: the session is running and busy while
// the tool runs, owned by the pi process (inferred: Pi writes nothing that
// names its process), in its directory; kill -9 of pi makes it
// interrupted with the call in flight and the tool's shell and python3 as
// orphans, found by the process tree the daemon saw; reap kills exactly
// those. The daemon never shows the live session dead.
func TestPiHeadlessKilledMidTool(t *testing.T) {
	bin := agentBin(t, piBinEnv, "@mariozechner/pi-coding-agent")
	w := newWorld(t)
	w.writePiConfig()
	// "; echo done": bash forks python3 instead of exec'ing it.
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"LONG-JOB-P1": fakemodel.RunCommand(longTool+" P1; echo done", "Run the long job", 0),
	}))
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("pi -p", w.proj(), bin, "-p", "Run LONG-JOB-P1")
	pid := cmd.Process.Pid
	diag := func() string { return tail(out.String(), 2000) }
	var tool procInfo
	w.waitFor(90*time.Second, "pi's python3 tool running", func() (bool, string) {
		var ok bool
		tool, ok = w.piTool(pid, "P1")
		return ok, diag()
	})
	ids := w.piSessions()
	if len(ids) != 1 {
		t.Fatalf("Pi session files: %v, want one", ids)
	}
	up := ids[0]
	w.step("tool running")
	if p, _ := readProc(pid); p.Comm != "pi" || len(p.Args) == 0 || p.Args[0] != "pi" {
		t.Errorf("the premise: pi %d is comm %q argv %q (Pi sets process.title)", pid, p.Comm, p.Args)
	}
	lw.claim("pi", up, pid)
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, pid, "the pi process")
	if s.Agent != "pi" || s.Cwd != w.proj() || !s.OwnerInferred || s.Title != "Run LONG-JOB-P1" {
		t.Errorf("session %s", sessionLine(s))
	}
	w.waitPassSaw(time.Now(), "the tool started")
	w.step("running/busy")

	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")

	// The tool's shell and its python3 live on, in the shell's session.
	orphans := procs(func(p procInfo) bool { return w.mine(p) && p.PGID == tool.PGID })
	if len(orphans) != 2 || !slices.ContainsFunc(orphans, isPython) {
		t.Fatalf("left behind: %+v, want the tool's bash and python3", orphans)
	}
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(tool.PID)+" ") {
		t.Errorf("orphan_processes %q does not name the python3 %d", d, tool.PID)
	}
	plan := w.action("reap", s.ID)
	if got, want := stepPIDs(plan.Steps), pids(orphans); !sameInts(got, want) {
		t.Fatalf("reap plan targets %v, want exactly %v: %+v", got, want, plan.Steps)
	}
	res := w.action("reap", s.ID, "--apply", "--timeout", "3s")
	for _, st := range res.Steps {
		if st.Outcome != "done" {
			t.Errorf("reap step %+v", st)
		}
	}
	for _, p := range orphans {
		if alive(p.PID) {
			t.Errorf("%d survived reap --apply", p.PID)
		}
	}
	w.step("reaped")
}

// Pi's TUI typed into a tmux pane (`pi`, no flags; its provider is the
// settings' default): running and busy while its tool runs, idle waiting
// for input once the turn ended, in that pane; a second turn's long tool,
// then kill -9: interrupted with the call in flight. The daemon never
// shows the live session dead.
func TestPiTUIInPane(t *testing.T) {
	bin := agentBin(t, piBinEnv, "@mariozechner/pi-coding-agent")
	w := newWorld(t)
	w.writePiConfig()
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"SHORT-JOB-T1": fakemodel.RunCommand(`python3 -c "import time; time.sleep(8)" T1`, "Run the short job", 0),
		"LONG-JOB-T2":  fakemodel.RunCommand(longTool+" T2", "Run the long job", 0),
	}))
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	ts := w.startTmux(bin)
	p := ts.newPane(w.proj())
	p.typeLine("pi")
	p.waitScreen(60*time.Second, "pi v0.73.1")
	pi, ok := p.child(func(c procInfo) bool { return c.Comm == "pi" })
	if !ok {
		t.Fatalf("no pi below the pane's shell:\n%s", compactScreen(p.capture()))
	}
	w.step("TUI up")
	if ids := w.piSessions(); len(ids) != 0 {
		t.Errorf("session files before the first prompt: %v (Pi writes one at the first reply)", ids)
	}

	p.typeLine("Run SHORT-JOB-T1")
	var up string
	w.waitFor(60*time.Second, "the tool running and the session file", func() (bool, string) {
		_, ok := w.piTool(pi.PID, "T1")
		ids := w.piSessions()
		if len(ids) == 1 {
			up = ids[0]
		}
		return ok && up != "", compactScreen(p.capture())
	})
	lw.claim("pi", up, pi.PID)
	s := w.waitUpstream(up, 15*time.Second, "running and busy in its tool", runningWith(session.ActivityBusy))
	w.checkOwner(s, pi.PID, "the pi process")
	w.checkPane(up, p)
	w.step("busy in the tool")
	s = w.waitUpstream(up, 60*time.Second, "idle after the turn", runningWith(session.ActivityIdle))
	if s.WaitingFor == nil || s.WaitingFor.Kind != session.WaitingInput || s.ActivitySource != session.SourceTranscript {
		t.Errorf("idle session: %s", sessionLine(s))
	}
	w.step("idle")

	p.typeLine("Run LONG-JOB-T2")
	var tool procInfo
	w.waitFor(60*time.Second, "the second tool running", func() (bool, string) {
		var ok bool
		tool, ok = w.piTool(pi.PID, "T2")
		return ok, compactScreen(p.capture())
	})
	s = w.waitUpstream(up, 15*time.Second, "busy again", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy && s.Problem(session.ProblemOrphanedToolCall) == nil
	})
	w.waitPassSaw(time.Now(), "the second tool started")
	killed := time.Now()
	if err := syscall.Kill(pi.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	t.Logf("interrupted %s after kill -9, problems %v", took.Round(time.Millisecond), problemKinds(s))
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(tool.PID)+" ") {
		t.Errorf("orphan_processes %q does not name the python3 %d", d, tool.PID)
	}
	w.step("interrupted")
}

// piSessionFile is the one session file of upstream under the world's
// Pi dir.
func (w *world) piSessionFile(upstream string) string {
	w.t.Helper()
	m, _ := filepath.Glob(filepath.Join(w.piDir(), "sessions", "*", "*_"+upstream+".jsonl"))
	if len(m) != 1 {
		w.t.Fatalf("session files of %s: %v", upstream, m)
	}
	return m[0]
}

// A headless Pi launched through sessiond is linked to the id Pi picked
// (the header its JSON output starts with) and stops when its turn ends;
// a resume through sessiond continues the same session: the same id, the
// same file appended to, and the model gets the earlier turn.
func TestPiLaunchResume(t *testing.T) {
	bin := agentBin(t, piBinEnv, "@mariozechner/pi-coding-agent")
	w := newWorld(t)
	w.writePiConfig()
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"FIRST-PROMPT-5d1":  fakemodel.Say("First answer FIRST-ANSWER-77a."),
		"SECOND-PROMPT-c42": fakemodel.Say("Second answer."),
	}))
	w.startDaemon("--pi-bin", bin, "--grace", "5s")
	w.watchLiveNeverDead()
	w.step("daemon ready")

	r := w.launch("launch", "--agent", "pi", "--cwd", w.proj(), "--prompt", "Say FIRST-PROMPT-5d1")
	id := r.Session.ID
	s := w.waitSession(id, 60*time.Second, "linked and stopped after its turn", func(s api.Session) bool {
		return s.UpstreamID != "" && s.Resume != nil && s.Status == session.StatusStopped
	})
	up := s.UpstreamID
	if s.Exit == nil || s.Exit.Code != 0 || s.Agent != "pi" || s.Resume.Root != w.piDir() || s.Resume.Cwd != w.proj() {
		t.Fatalf("launched session %s; log:\n%s", sessionLine(s), logTail(r.LogPath))
	}
	file := w.piSessionFile(up)
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	w.step("launched " + up + ", stopped")

	n := len(w.model.Turns())
	r2 := w.launch("resume", id, "--prompt", "And SECOND-PROMPT-c42")
	if r2.Session.ID != id || r2.Session.UpstreamID != up || r2.Fresh || r2.Forked {
		t.Fatalf("resume answer %+v", r2)
	}
	s = w.waitSession(id, 60*time.Second, "stopped after the resumed turn", func(s api.Session) bool {
		return s.Status == session.StatusStopped && s.Exit != nil && s.Exit.PID == r2.Session.PID
	})
	if s.Exit.Code != 0 || s.UpstreamID != up {
		t.Fatalf("resumed run ended %+v; log:\n%s", s.Exit, logTail(r2.LogPath))
	}
	w.step("resumed turn stopped")
	if fi2, err := os.Stat(w.piSessionFile(up)); err != nil || !os.SameFile(fi, fi2) || fi2.Size() <= fi.Size() {
		t.Errorf("the resume did not append to %s (%d bytes before)", file, fi.Size())
	}
	var resumed *fakemodel.Request
	for _, tr := range w.model.Turns()[n:] {
		if strings.Contains(tr.LastUserText(), "SECOND-PROMPT-c42") {
			resumed = tr
		}
	}
	if resumed == nil || !strings.Contains(resumed.Text(), "FIRST-ANSWER-77a") {
		t.Fatalf("the resumed turn did not carry the first: %v", resumed)
	}
	if ids := w.piSessions(); len(ids) != 1 {
		t.Errorf("session files %v, want the one", ids)
	}
}

// Two `pi -p` in one directory, each in a long tool: nothing names which
// pi writes which file, so each session has both as candidates
// (owner_ambiguous) and is running; kill -9 of one leaves both running
// (the other candidate lives); kill -9 of the other makes both
// interrupted. The daemon never shows either dead while a pi lives.
func TestPiTwoInOneDirectory(t *testing.T) {
	bin := agentBin(t, piBinEnv, "@mariozechner/pi-coding-agent")
	w := newWorld(t)
	w.writePiConfig()
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"LONG-JOB-A": fakemodel.RunCommand(longTool+" A", "Run the long job", 0),
		"LONG-JOB-B": fakemodel.RunCommand(longTool+" B", "Run the long job", 0),
	}))
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	a, _ := w.start("pi -p A", w.proj(), bin, "-p", "Run LONG-JOB-A")
	b, _ := w.start("pi -p B", w.proj(), bin, "-p", "Run LONG-JOB-B")
	w.waitFor(90*time.Second, "both tools running", func() (bool, string) {
		_, okA := w.piTool(a.Process.Pid, " A")
		_, okB := w.piTool(b.Process.Pid, " B")
		return okA && okB && len(w.piSessions()) == 2, strings.Join(w.piSessions(), " ")
	})
	ids := w.piSessions()
	for _, up := range ids {
		// Which pi writes which file, the test cannot tell either: each
		// may be either's.
		lw.claim("pi", up, a.Process.Pid)
		lw.claim("pi", up, b.Process.Pid)
	}
	ambiguous := func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy && s.Problem(session.ProblemOwnerAmbiguous) != nil &&
			len(s.CandidatePIDs) == 2
	}
	for _, up := range ids {
		w.waitUpstream(up, 15*time.Second, "running, busy, two candidates", ambiguous)
	}
	w.waitPassSaw(time.Now(), "both tools started")
	w.step("both running, ambiguous")

	if err := syscall.Kill(a.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.waitPassSaw(time.Now(), "the first kill")
	for _, up := range ids {
		s, _ := w.session(up)
		if s.Status != session.StatusRunning {
			t.Fatalf("session %s after one of two candidates died: %s", up, sessionLine(s))
		}
	}
	w.step("one killed, both still running")

	killed := time.Now()
	if err := syscall.Kill(b.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for _, up := range ids {
		s, _ := w.session(up)
		w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall)
	}
	w.step("both interrupted")
}
