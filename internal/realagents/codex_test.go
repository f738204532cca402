package realagents

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

const codexBinEnv = "SESSIOND_CODEX_BIN"

// codexHome is where the world's Codex keeps its data: ~/.codex, with a
// config that points it at the fake model's Responses API.
func (w *world) codexHome() string { return filepath.Join(w.Home, ".codex") }

func (w *world) writeCodexConfig() {
	w.t.Helper()
	cfg := fmt.Sprintf(`model = "fake-model"
model_provider = "fake"
check_for_update_on_startup = false
[analytics]
enabled = false
[model_providers.fake]
name = "fake"
base_url = %q
wire_api = "responses"
env_key = "FAKE_CODEX_KEY"
`, w.model.OpenAIBaseURL())
	if err := os.MkdirAll(w.codexHome(), 0o755); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.codexHome(), "config.toml"), []byte(cfg), 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.Extra = append(w.Extra, "FAKE_CODEX_KEY=fake-key")
}

// codexTools are the live processes a Codex session's tools left or run:
// they carry the session id in CODEX_THREAD_ID.
func codexTools(upstream string) []procInfo {
	return procs(func(p procInfo) bool { return p.Env["CODEX_THREAD_ID"] == upstream })
}

// Codex started outside sessiond (`codex exec`, no special flags), its
// tool a shell that forks a long python3: running and busy while the tool
// runs, owned by the native binary that holds the writer lock (not the
// npm wrapper); kill -9 of that binary makes it interrupted within a
// second with the call in flight and the surviving python3 as an orphan;
// reap kills exactly that python3.
func TestCodexExecKilledMidToolReap(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	w := newWorld(t)
	w.writeCodexConfig()
	// "; echo done": bash forks python3 instead of exec'ing it, so the
	// python3 is a grandchild that outlives codex (docs/agents/codex.md).
	w.model.Enqueue(fakemodel.RunCommand(longTool+"; echo done", "Run the long job", 10*time.Minute))
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("codex exec", w.proj(), bin, "exec", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox", "Run the long job")
	diag := func() string { return tail(out.String(), 2000) }
	var up string
	w.waitFor(60*time.Second, "codex's python3 tool running", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return w.mine(p) && p.Env["CODEX_THREAD_ID"] != "" && isPython(p) })
		if len(ps) == 0 {
			return false, diag()
		}
		up = ps[0].Env["CODEX_THREAD_ID"]
		return true, ""
	})
	w.step("tool running")

	// The owner is the native binary below the npm wrapper: the process
	// that holds the rollout's writer lock.
	var native int
	for _, p := range procs(func(p procInfo) bool { return p.PPID == cmd.Process.Pid }) {
		if filepath.Base(p.Exe) == "codex" {
			native = p.PID
		}
	}
	if native == 0 {
		t.Fatalf("no native codex below the wrapper %d", cmd.Process.Pid)
	}
	lw.claim("codex", up, native)
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	if s.PID != native || s.Agent != "codex" || s.Cwd != w.proj() {
		t.Fatalf("session %+v: want owner %d (the native codex, not the wrapper %d), cwd %s", s, native, cmd.Process.Pid, w.proj())
	}
	// The python3 is attributed by what the daemon saw while codex lived.
	w.waitPassSaw(time.Now(), "the tool started")
	w.step("running/busy")

	killed := time.Now()
	if err := syscall.Kill(native, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
	if _, err := os.Stat(filepath.Join(w.codexHome(), "thread-writer-locks", up+".lock")); err != nil {
		t.Errorf("the writer lock file should stay behind a kill -9: %v", err)
	}

	orphans := codexTools(up)
	if len(orphans) != 1 || !isPython(orphans[0]) {
		t.Fatalf("left behind: %+v, want the one python3", orphans)
	}
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(orphans[0].PID)+" ") {
		t.Errorf("orphan_processes %q does not name the python3 %d", d, orphans[0].PID)
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
	if alive(orphans[0].PID) {
		t.Errorf("python3 %d survived reap --apply", orphans[0].PID)
	}
	w.step("reaped")
}

// codexExecArgs are what a headless codex needs in a test's project, a
// folder that is no git repository and has no sandbox to offer.
var codexExecArgs = []string{"--", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"}

// codexRollout is the one rollout of upstream under the world's home.
func (w *world) codexRollout(upstream string) string {
	w.t.Helper()
	m, _ := filepath.Glob(filepath.Join(w.codexHome(), "sessions", "*", "*", "*", "rollout-*-"+upstream+".jsonl"))
	if len(m) != 1 {
		w.t.Fatalf("rollouts of %s: %v", upstream, m)
	}
	return m[0]
}

// A headless Codex session launched through sessiond is linked to the id
// Codex picked (from its JSON output); killed mid tool it is interrupted,
// its repair writes nothing and says why, and a resume through sessiond
// continues the same session: the same id, the same rollout appended to,
// and the model gets the earlier turns with the dangling call answered
// "aborted" by Codex itself.
func TestCodexLaunchKilledRepairResume(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	w := newWorld(t)
	w.writeCodexConfig()
	w.model.Enqueue(fakemodel.RunCommand("echo TOOL-OUTPUT-7c2; "+longTool, "Run the long job", 10*time.Minute))
	w.startDaemon("--codex-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	r := w.launch(append([]string{"launch", "--agent", "codex", "--cwd", w.proj(), "--prompt", "Run the job FIRST-PROMPT-4e1"}, codexExecArgs...)...)
	id := r.Session.ID
	s := w.waitSession(id, 60*time.Second, "linked, running and busy in its tool", func(s api.Session) bool {
		return s.UpstreamID != "" && s.Resume != nil && s.Status == session.StatusRunning && s.Activity == session.ActivityBusy
	})
	up := s.UpstreamID
	w.step("linked " + up + ", busy")
	if s.Resume.Root != w.codexHome() || s.Resume.Cwd != w.proj() || s.Agent != "codex" {
		t.Errorf("session %+v, resume cursor %+v", s, s.Resume)
	}
	rollout := w.codexRollout(up)
	var native int
	w.waitFor(30*time.Second, "the native codex and its python3 tool", func() (bool, string) {
		for _, p := range procs(func(p procInfo) bool { return filepath.Base(p.Exe) == "codex" && p.Env["CODEX_HOME"] == w.codexHome() }) {
			native = p.PID
		}
		return native != 0 && len(codexTools(up)) > 0, fmt.Sprint(codexTools(up))
	})
	// Its leftovers are attributed by what the daemon saw while it lived.
	w.waitPassSaw(time.Now(), "the tool started")

	killed := time.Now()
	if err := syscall.Kill(native, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(id, killed, time.Second, session.ProblemOrphanedToolCall)
	w.step("interrupted after " + took.Round(time.Millisecond).String())
	if orphans := codexTools(up); len(orphans) > 0 {
		w.reapAll(id, orphans)
	}

	size := func() int64 {
		fi, err := os.Stat(rollout)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	before := size()
	plan := w.action("repair", id, "--apply")
	var actions []string
	for _, st := range plan.Steps {
		if st.Outcome != "skipped" {
			t.Errorf("repair step %+v: a Codex repair writes nothing", st)
		}
		actions = append(actions, st.Action)
	}
	if !strings.Contains(strings.Join(actions, ","), "keep tool call without output") || size() != before {
		t.Errorf("repair %v changed the rollout %d -> %d or did not name the call", plan.Steps, before, size())
	}
	w.step("repair planned nothing")

	w.model.Enqueue(fakemodel.Say("Second answer, marker SECOND-ANSWER-a90."))
	n := len(w.model.Turns())
	r2 := w.launch(append([]string{"resume", id, "--prompt", "And again SECOND-PROMPT-b38"}, codexExecArgs...)...)
	if r2.Session.ID != id || r2.Session.UpstreamID != up || r2.Fresh || r2.Forked {
		t.Fatalf("resume answer %+v", r2)
	}
	s = w.waitSession(id, 60*time.Second, "stopped after the resumed turn", func(s api.Session) bool {
		return s.Status == session.StatusStopped && s.Exit != nil && s.Exit.PID == r2.Session.PID
	})
	if s.Exit.Code != 0 || s.UpstreamID != up {
		t.Fatalf("resumed run ended %+v, upstream %s, problems %v; log:\n%s", s.Exit, s.UpstreamID, problemKinds(s), logTail(r2.LogPath))
	}
	w.step("resumed turn stopped")
	if w.codexRollout(up) != rollout || size() <= before {
		t.Errorf("the resume did not append to %s (%d bytes before)", rollout, before)
	}
	var resumed *fakemodel.Request
	for _, tr := range w.model.Turns()[n:] {
		if strings.Contains(tr.LastUserText(), "SECOND-PROMPT-b38") {
			resumed = tr
		}
	}
	if resumed == nil {
		t.Fatal("the model never got the resumed prompt")
	}
	if txt := resumed.Text(); !strings.Contains(txt, "FIRST-PROMPT-4e1") || !strings.Contains(txt, "TOOL-OUTPUT-7c2") {
		t.Fatalf("the resumed request lacks the earlier turn and its call:\n%s", tail(txt, 3000))
	}
	var answered []string
	for _, m := range resumed.Messages {
		for _, tr := range m.ToolResults {
			answered = append(answered, tr.Content)
		}
	}
	if len(answered) != 1 || !strings.Contains(answered[0], "aborted") {
		t.Errorf("tool results sent on resume %q: want the killed call answered \"aborted\" by Codex", answered)
	}
	metas, _ := os.ReadFile(rollout)
	if c := strings.Count(string(metas), `"type":"session_meta"`); c != 1 {
		t.Errorf("%d session_meta lines in %s, want 1 (a resume appends)", c, rollout)
	}
}

// The interactive TUI typed into a tmux pane, as people run it: the
// session is owned by Codex's app-server daemon (it holds the writer lock),
// never by the TUI. Busy while the long tool runs; the TUI killed with -9,
// the turn goes on in the daemon and the session stays running and busy;
// the daemon killed with -9, interrupted within a second with the call in
// flight; whatever tool process is left is reaped.
func TestCodexInteractiveTmux(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	w := newWorld(t)
	w.writeCodexConfig()
	w.model.Enqueue(fakemodel.RunCommand(longTool+"; echo done", "Run the long job", 10*time.Minute))
	w.startDaemon("--codex-bin", bin, "--grace", "5s", "--reconcile-interval", "1s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("codex")
	p.waitScreen(60*time.Second, "Ask Codex to do anything")
	diag := func() string { return compactScreen(p.capture()) }
	wrapper, ok := p.child(func(procInfo) bool { return true })
	if !ok {
		t.Fatalf("no codex below the pane's shell %d:\n%s", p.ShellPID, diag())
	}
	tui := procs(func(c procInfo) bool { return c.PPID == wrapper.PID && filepath.Base(c.Exe) == "codex" })
	if len(tui) != 1 {
		t.Fatalf("the TUI below the wrapper %d: %+v", wrapper.PID, tui)
	}
	w.step("TUI ready")

	p.typeLine("Run the long job")
	var up string
	w.waitFor(60*time.Second, "the TUI's python3 tool running", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return w.mine(p) && p.Env["CODEX_THREAD_ID"] != "" && isPython(p) })
		if len(ps) == 0 {
			return false, diag()
		}
		up = ps[0].Env["CODEX_THREAD_ID"]
		return true, ""
	})
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	owner, ok := readProc(s.PID)
	if !ok || s.PID == wrapper.PID || s.PID == tui[0].PID || !strings.Contains(strings.Join(owner.Args, " "), "app-server") {
		t.Fatalf("owner %d %q: want Codex's app-server daemon, not the TUI %d or its wrapper %d", s.PID, owner.Args, tui[0].PID, wrapper.PID)
	}
	// The daemon serves the TUIs of every pane and left the pane's
	// process tree: it is in no pane, whatever its environment says.
	if s.Pane != nil {
		t.Errorf("owner %d (parent %d) shown in pane %+v", s.PID, owner.PPID, *s.Pane)
	}
	lw.claim("codex", up, s.PID)
	w.step("running/busy, owner the app-server daemon")

	// The TUI goes; the daemon keeps the turn running (docs/agents/codex.md).
	// The npm wrapper exits as soon as the TUI below it dies, so it may be
	// gone before its own kill.
	for _, pid := range []int{tui[0].PID, wrapper.PID} {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			t.Fatal(err)
		}
	}
	w.waitFor(10*time.Second, "the TUI gone", func() (bool, string) { return !alive(tui[0].PID) && !alive(wrapper.PID), "" })
	w.waitPassAfter(time.Now(), "the TUI died")
	s = w.waitUpstream(up, 5*time.Second, "still running and busy after the TUI's kill -9", runningWith(session.ActivityBusy))
	if s.PID != owner.PID || len(codexTools(up)) == 0 {
		t.Fatalf("after the TUI died: owner %d (want %d), tools %+v", s.PID, owner.PID, codexTools(up))
	}
	w.step("TUI killed: still running/busy")

	killed := time.Now()
	if err := syscall.Kill(owner.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, time.Second, session.ProblemOrphanedToolCall)
	w.step("daemon killed: interrupted after " + took.Round(time.Millisecond).String())
	if orphans := codexTools(up); len(orphans) > 0 {
		t.Logf("left behind by the daemon: %+v", orphans)
		w.reapAll(s.ID, orphans)
	}
}

// `sessionctl launch --agent codex --tmux`: the TUI in a detached tmux
// session, linked to the rollout its first prompt makes (by cwd and time:
// the TUI prints no id, and its app-server daemon, not the TUI, holds the
// writer lock), titled with its first prompt. Running and idle after the
// answer; a resume is refused while it runs (single writer); the tmux
// session killed, running and owned by Codex's daemon while it keeps the
// thread, and stopped (not interrupted: the turn ended) once the daemon
// lets it go or is killed.
func TestCodexLaunchTmux(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	if _, err := exec.LookPath("tmux"); err != nil {
		skipLoudly(t, "REAL AGENTS NOT TESTED: tmux is not on PATH (%v)", err)
	}
	w := newWorld(t)
	w.writeCodexConfig()
	w.Extra = append(w.Extra, "TMUX_TMPDIR="+w.Dir) // a tmux server of the test's own
	w.model.Enqueue(fakemodel.Say("Hello from the TUI, marker TUI-ANSWER-1f3."))
	w.startDaemon("--codex-bin", bin, "--grace", "5s", "--reconcile-interval", "1s")
	w.step("daemon ready")

	r := w.launch("launch", "--agent", "codex", "--cwd", w.proj(), "--tmux", "--prompt", "Say hello TUI-PROMPT-2a7")
	tmux := func(args ...string) string {
		cmd := exec.Command("tmux", args...)
		cmd.Env = w.Environ()
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	t.Cleanup(func() { tmux("kill-server") })
	if r.Session.Tmux == "" || r.Attach != "tmux attach -t "+r.Session.Tmux {
		t.Fatalf("launch answer %+v", r)
	}
	id := r.Session.ID
	s := w.waitSession(id, 60*time.Second, "linked, running and idle after its first answer", func(s api.Session) bool {
		return s.UpstreamID != "" && s.Resume != nil && s.Status == session.StatusRunning && s.Activity == session.ActivityIdle
	})
	w.step("linked " + s.UpstreamID + ", running/idle")
	if !strings.Contains(s.Title, "TUI-PROMPT-2a7") {
		t.Errorf("title %q, want the first prompt", s.Title)
	}
	rollout, err := os.ReadFile(w.codexRollout(s.UpstreamID))
	if err != nil || !strings.Contains(string(rollout), "TUI-ANSWER-1f3") {
		t.Fatalf("the rollout of %s lacks the answer (%v)", s.UpstreamID, err)
	}
	if _, errs, code := w.Ctl("resume", id, "--prompt", "again"); code != 1 || !strings.Contains(errs, "running") {
		t.Errorf("resume of a running TUI session: exit %d %q, want 1 and why", code, errs)
	}

	// The TUI closed with its terminal: Codex's daemon keeps the thread
	// loaded for a while (~60 s here), then lets it go. Either way the
	// session is never interrupted, and while running its owner is the
	// daemon holding the lock, not the dead TUI.
	tui := s.PID
	tmux("kill-session", "-t", "="+r.Session.Tmux)
	w.waitFor(10*time.Second, "the TUI gone", func() (bool, string) { return !alive(tui), "" })
	w.waitPassAfter(time.Now(), "the TUI died")
	s = w.Show(id)
	if s.Status == session.StatusRunning {
		p, ok := readProc(s.PID)
		if !ok || s.PID == tui || !strings.Contains(strings.Join(p.Args, " "), "app-server") {
			t.Fatalf("running after the TUI %d died, owner %d %q: want Codex's app-server daemon", tui, s.PID, p.Args)
		}
		w.step("tmux session killed: running, owner the daemon")
		if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
	}
	s = w.waitSession(id, 5*time.Second, "stopped", func(s api.Session) bool { return s.Status == session.StatusStopped })
	if len(s.Problems) != 0 {
		t.Errorf("a session whose turn ended is stopped with problems %v (%s)", problemKinds(s), s.StatusReason)
	}
	w.step("stopped: " + s.StatusReason)
}

// waitPassAfter waits for a reconcile pass that began after t (health's
// last_reconcile), so what the test checks next was decided after what
// happened at t.
func (w *world) waitPassAfter(t time.Time, what string) {
	w.t.Helper()
	w.waitFor(10*time.Second, "a reconcile pass after "+what, func() (bool, string) {
		var h api.Health
		w.CtlJSON(&h, "health")
		return h.LastReconcile.After(t), h.LastReconcile.String()
	})
}

// Codex in a tmux pane asks before it runs a command (`-a on-request`;
// the model asks for an unsandboxed run). Nothing in the rollout shows
// the pending approval: it reads like a running tool (docs/agents/codex.md).
// With sessiond's hooks installed by `sessionctl hooks install
// codex` and trusted at the TUI's own prompt, the session is waiting for
// that permission, with the command, within a second of the prompt
// showing; approved, busy while the command runs; idle, waiting for
// input, once the turn ends. Uninstalled, hooks.json is gone again.
func TestCodexTUIPermissionWaiting(t *testing.T) {
	bin := agentBin(t, codexBinEnv, "@openai/codex")
	w := newWorld(t)
	w.writeCodexConfig()
	const command = "sleep 4; echo approved-and-done"
	ask := fakemodel.RunCommand(command, "", 30*time.Second)
	ask.ToolCalls[0].Input["sandbox_permissions"] = "require_escalated"
	ask.ToolCalls[0].Input["justification"] = "May I run the job?"
	w.model.Enqueue(ask, fakemodel.Say("All done."))
	w.startDaemon("--codex-bin", bin, "--grace", "5s", "--reconcile-interval", "1s")

	out, errs, code := w.Ctl("hooks", "install", "codex", "--root", w.codexHome())
	if code != 0 || !strings.Contains(out, "trust") {
		t.Fatalf("hooks install codex: exit %d: %s %s", code, out, errs)
	}
	w.step("hooks installed")

	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("codex -a on-request -s read-only")
	p.waitScreen(60*time.Second, "Hooks need review")
	// "2. Trust all and continue", then Enter; again while the dialog
	// stays (it can be drawn a moment before it takes keys). A "2" it
	// did not take leaves Enter on "1. Review hooks", which opens Codex's
	// hooks browser (seen in CI): there "t" trusts them all and Escape
	// closes it. Done when
	// the prompt shows and sessionctl says every hook is trusted.
	var pressed time.Time
	w.waitFor(30*time.Second, "the hooks trusted and the prompt shown", func() (bool, string) {
		screen := p.capture()
		switch {
		case time.Since(pressed) < 2*time.Second:
		case strings.Contains(screen, "Hooks need review"):
			p.keys("2")
			time.Sleep(300 * time.Millisecond)
			p.keys("Enter")
			pressed = time.Now()
		case strings.Contains(screen, "t trust all"):
			p.keys("t")
			pressed = time.Now()
		case strings.Contains(screen, "esc close"):
			p.keys("Escape") // the browser, once all are trusted
			pressed = time.Now()
		}
		var st []struct{ Events, Untrusted []string }
		w.CtlJSON(&st, "hooks", "status", "codex", "--root", w.codexHome())
		trusted := len(st) == 1 && len(st[0].Events) > 0 && len(st[0].Untrusted) == 0
		return trusted && strings.Contains(screen, "Ask Codex to do anything"), fmt.Sprintf("hooks status %+v\n%s", st, compactScreen(screen))
	})
	w.step("hooks trusted in the TUI")

	p.typeLine("Run the job")
	p.waitScreen(60*time.Second, "Would you like to run the following command?")
	shown := time.Now()
	want := session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: command}
	var s api.Session
	w.waitFor(time.Second, "a Codex session waiting for the permission", func() (bool, string) {
		for _, c := range w.sessions("codex") {
			if c.Status == session.StatusRunning && c.Activity == session.ActivityWaiting && c.WaitingFor != nil &&
				*c.WaitingFor == want && c.ActivitySource == session.SourceHook {
				s = c
				return true, ""
			}
			return false, sessionLine(c)
		}
		return false, "no Codex session yet"
	})
	up := s.UpstreamID
	w.step(fmt.Sprintf("waiting for permission %s after the prompt showed", time.Since(shown).Round(time.Millisecond)))
	if tools := codexTools(up); len(tools) != 0 {
		t.Fatalf("a tool runs before the approval: %+v", tools)
	}
	// Still waiting a pass later: nothing the rollout shows ends it.
	w.waitPassAfter(time.Now(), "the permission prompt")
	if s = w.Show(s.ID); s.Activity != session.ActivityWaiting {
		t.Fatalf("a pass later: %s", sessionLine(s))
	}

	p.keys("y")
	var started time.Time
	w.waitFor(10*time.Second, "the approved command running", func() (bool, string) {
		if len(codexTools(up)) == 0 {
			return false, compactScreen(p.capture())
		}
		started = time.Now()
		return true, ""
	})
	w.waitUpstream(up, 3*time.Second, "busy while the approved command runs", func(s api.Session) bool {
		return runningWith(session.ActivityBusy)(s) && s.WaitingFor == nil
	})
	w.step(fmt.Sprintf("approved: busy %s after the command started", time.Since(started).Round(time.Millisecond)))
	// `sessionctl wait --until idle` returns as the turn ends.
	out, errs, code = w.Ctl("--json", "wait", s.ID, "--until", "idle", "--timeout", "30s")
	var idle api.Session
	if err := json.Unmarshal([]byte(out), &idle); code != 0 || err != nil || idle.ID != s.ID || idle.Activity != session.ActivityIdle ||
		idle.WaitingFor == nil || idle.WaitingFor.Kind != session.WaitingInput {
		t.Fatalf("wait --until idle: exit %d: %s %s", code, out, errs)
	}
	w.step("turn ended: `sessionctl wait --until idle` returned; waiting for input")

	if out, errs, code = w.Ctl("hooks", "uninstall", "codex", "--root", w.codexHome()); code != 0 {
		t.Fatalf("hooks uninstall: exit %d: %s %s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(w.codexHome(), "hooks.json")); !os.IsNotExist(err) {
		t.Fatalf("hooks.json after uninstall: %v", err)
	}
}
