package realagents

import (
	"encoding/json"
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

const qwenBinEnv = "SESSIOND_QWEN_BIN"

// useQwen points Qwen Code at the fake model's OpenAI chat-completions
// API: its API key, base URL and model from the environment, as the
// world's every process gets it.
func (w *world) useQwen() {
	var extra []string
	for _, kv := range w.Extra {
		if !strings.HasPrefix(kv, "OPENAI_API_KEY=") {
			extra = append(extra, kv)
		}
	}
	w.Extra = append(extra,
		"OPENAI_API_KEY=fake-key",
		"OPENAI_BASE_URL="+w.model.OpenAIBaseURL(),
		"OPENAI_MODEL=fake-model",
		"QWEN_CODE_SUPPRESS_YOLO_WARNING=1",
	)
	// Turns that offer Qwen's shell tool take the script; anything else
	// (the auto mode's classifier, a title) gets a short answer without
	// consuming it.
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		if offersQwenShell(r) {
			return fakemodel.Reply{}, false
		}
		return fakemodel.Say("ok"), true
	})
}

func offersQwenShell(r *fakemodel.Request) bool {
	for _, t := range r.Tools {
		if t == qwenShell {
			return true
		}
	}
	return false
}

// qwenShell is Qwen Code's shell tool.
const qwenShell = "run_shell_command"

// qwenRun is a reply that runs command with Qwen's shell tool.
func qwenRun(command, description string) fakemodel.Reply {
	return fakemodel.Reply{ToolCalls: []fakemodel.ToolCall{{Name: qwenShell, Input: map[string]any{"command": command, "description": description}}}}
}

// qwenTools are the live processes of a Qwen session's tools: they carry
// the session id in QWEN_CODE_SESSION_ID.
func qwenTools(upstream string) []procInfo {
	return procs(func(p procInfo) bool { return p.Env["QWEN_CODE_SESSION_ID"] == upstream })
}

// qwenInner is the innermost qwen below pid (pid itself if it has no
// qwen child): `qwen` runs cli.js, which relaunches itself once more, and
// the last one does the work.
func qwenInner(pid int) int {
	for {
		kids := procs(func(p procInfo) bool {
			return p.PPID == pid && len(p.Args) > 0 && strings.Contains(strings.Join(p.Args, " "), "qwen-code/cli.js")
		})
		if len(kids) != 1 {
			return pid
		}
		pid = kids[0].PID
	}
}

// `qwen -p` started outside sessiond, its tool a shell that forks a long
// python3: running and busy while the tool runs, owned by the innermost
// qwen process (the one that runs the tool); kill -9 of it makes the
// session interrupted at once, with the call in flight and the surviving
// bash and python3 as orphans, which reap kills.
func TestQwenHeadlessKilledMidToolReap(t *testing.T) {
	bin := agentBin(t, qwenBinEnv, "@qwen-code/qwen-code")
	w := newWorld(t)
	w.useQwen()
	w.model.Enqueue(qwenRun(longTool+"; echo done", "Run the long job"))
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	_, out := w.start("qwen -p", w.proj(), bin, "-p", "Run the long job", "--yolo")
	diag := func() string { return tail(out.String(), 2000) }
	var up string
	var python procInfo
	w.waitFor(90*time.Second, "qwen's python3 tool running", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return w.mine(p) && p.Env["QWEN_CODE_SESSION_ID"] != "" && isPython(p) })
		if len(ps) == 0 {
			return false, diag()
		}
		python, up = ps[0], ps[0].Env["QWEN_CODE_SESSION_ID"]
		return true, ""
	})
	w.step("tool running")
	bash, ok := readProc(python.PPID)
	if !ok {
		t.Fatalf("the python3's parent %d is gone", python.PPID)
	}
	owner := bash.PPID
	if o, _ := readProc(owner); !strings.Contains(strings.Join(o.Args, " "), "qwen-code/cli.js") || qwenInner(owner) != owner {
		t.Fatalf("the tool's qwen %d is not the innermost cli.js: %+v", owner, o)
	}
	lw.claim("qwen", up, owner)
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	if s.Agent != "qwen" || s.Cwd != w.proj() || s.Title != "Run the long job" {
		t.Errorf("session %+v", s)
	}
	w.checkOwner(s, owner, "the qwen running the tool")
	w.waitPassSaw(time.Now(), "the tool started")
	w.step("running/busy")

	killed := time.Now()
	if err := syscall.Kill(owner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses)
	t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
	if d := problemDetails(s, session.ProblemOrphanedToolCall); !strings.Contains(d, qwenShell) {
		t.Errorf("orphaned_tool_call %q does not name the shell call", d)
	}
	orphans := qwenTools(up)
	if len(orphans) != 2 {
		t.Fatalf("left behind: %+v, want the bash and its python3", orphans)
	}
	w.reapAll(s.ID, orphans)
	w.step("reaped")
}

// The interactive TUI typed into a tmux pane, no flags: a session as soon
// as Qwen registers it (running, idle, in that pane, owned by the
// innermost qwen), busy while its approved tool runs and idle after the
// answer; busy again on the next long tool, and interrupted within
// seconds of a kill -9 of the qwen, with the call in flight. Qwen asks
// before running the tool (its auto mode's classifier cannot answer), and
// nothing in its files says so: the session is busy meanwhile.
func TestQwenInteractiveTmux(t *testing.T) {
	bin := agentBin(t, qwenBinEnv, "@qwen-code/qwen-code")
	w := newWorld(t)
	w.useQwen()
	// Answered by what was asked: the TUI sends other requests with its
	// tools too (the order of the turns is not the script's).
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		if !offersQwenShell(r) || len(r.Messages) == 0 {
			return fakemodel.Say("ok"), true
		}
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			return fakemodel.Say("Job done."), true
		case strings.Contains(last.Text, "Run a short job"):
			return qwenRun(`python3 -c "import time; time.sleep(2)"; echo short-done`, "A short job"), true
		case strings.Contains(last.Text, "Run the long job"):
			return qwenRun(longTool+"; echo done", "Run the long job"), true
		}
		return fakemodel.Say("ok"), true
	})
	w.startDaemon("--grace", "5s", "--reconcile-interval", "1s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("qwen")
	p.waitScreen(180*time.Second, "Type your message")
	diag := func() string { return compactScreen(p.capture()) }
	wrapper, ok := p.child(func(procInfo) bool { return true })
	if !ok {
		t.Fatalf("no qwen below the pane's shell %d:\n%s", p.ShellPID, diag())
	}
	owner := qwenInner(wrapper.PID)
	if owner == wrapper.PID {
		t.Fatalf("no cli.js below the qwen %d", wrapper.PID)
	}
	w.step("TUI ready")

	// The registry names the session before any prompt.
	var up string
	w.waitFor(30*time.Second, "the TUI's registry entry", func() (bool, string) {
		b, err := os.ReadFile(filepath.Join(w.Home, ".qwen", "sessions", itoa(owner)+".json"))
		if err != nil {
			return false, err.Error()
		}
		var e struct {
			SessionID string `json:"sessionId"`
		}
		json.Unmarshal(b, &e)
		up = e.SessionID
		return up != "", string(b)
	})
	lw.claim("qwen", up, owner)
	t.Cleanup(func() {
		if t.Failed() {
			w.logQwenChat(up)
		}
	})
	s := w.waitUpstream(up, 15*time.Second, "running and idle before the first prompt", runningWith(session.ActivityIdle))
	w.checkOwner(s, owner, "the TUI's innermost qwen")
	w.checkPane(up, p)
	w.step("registered, idle")

	p.submit("Run a short job", "Type your message", "Allow execution", 90*time.Second)
	w.waitUpstream(up, 15*time.Second, "busy while Qwen asks", runningWith(session.ActivityBusy))
	w.step("asks, busy")
	p.keys("Enter") // 1. Yes, allow once
	s = w.waitUpstream(up, 90*time.Second, "idle after the answer", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityIdle && s.Title == "Run a short job"
	})
	w.step("idle after the turn")

	p.submit("Run the long job", "Type your message", "Allow execution", 90*time.Second)
	p.keys("Enter")
	w.waitFor(90*time.Second, "the TUI's python3 tool running", func() (bool, string) {
		for _, t := range qwenTools(up) {
			if isPython(t) {
				return true, ""
			}
		}
		return false, diag()
	})
	s = w.waitUpstream(up, 15*time.Second, "running and busy in the long tool", runningWith(session.ActivityBusy))
	w.step("busy in the long tool")

	// Qwen queues its records and writes them in order, and the TUI's
	// queue may lag well behind it (docs/agents/qwen.md): the call is in
	// flight once the chat shows it, the prompt until then.
	want := session.ProblemIncompleteMessage
	if w.qwenChatHas(up, 30*time.Second, "time.sleep(300)") {
		want = session.ProblemOrphanedToolCall
	} else {
		t.Logf("the chat did not show the running call within 30 s: the prompt is what is in flight")
	}
	killed := time.Now()
	if err := syscall.Kill(owner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, want)
	t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
	// The TUI runs its tools on a pseudo-terminal: they die with it.
	w.waitFor(10*time.Second, "the TUI's tools gone with it", func() (bool, string) {
		left := qwenTools(up)
		return len(left) == 0, pidsString(left)
	})
}

func pidsString(ps []procInfo) string {
	var out []string
	for _, p := range ps {
		out = append(out, itoa(p.PID)+" "+p.Comm)
	}
	return strings.Join(out, ", ")
}

// logQwenChat logs the records of a session's chat, one line each, and
// the model's turns: what sessiond read, for a failure message.
func (w *world) logQwenChat(up string) {
	m, _ := filepath.Glob(filepath.Join(w.Home, ".qwen", "projects", "*", "chats", up+".jsonl"))
	for _, path := range m {
		b, _ := os.ReadFile(path)
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			var r struct {
				Timestamp, Type, Subtype string
				Message                  json.RawMessage
			}
			if json.Unmarshal([]byte(l), &r) == nil {
				lines = append(lines, r.Timestamp+" "+r.Type+" "+r.Subtype+" "+tail(string(r.Message), 160))
			}
		}
		w.t.Logf("%s:\n%s", path, strings.Join(lines, "\n"))
	}
	for _, r := range w.model.Turns() {
		last := ""
		if n := len(r.Messages); n > 0 {
			last = r.Messages[n-1].Role + ": " + tail(r.Messages[n-1].Text, 120)
		}
		w.t.Logf("model turn %d at %s: %d tools, last %s, reply %+v", r.Seq, r.Time.Format("15:04:05.000"), len(r.Tools), last, r.Reply)
	}
}

// qwenChatHas waits until the session's chat holds text, and reports
// whether it did within d.
func (w *world) qwenChatHas(up string, d time.Duration, text string) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		m, _ := filepath.Glob(filepath.Join(w.Home, ".qwen", "projects", "*", "chats", up+".jsonl"))
		for _, path := range m {
			if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), text) {
				return true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return false
}

// A headless Qwen session launched through sessiond is linked at once
// (sessiond picks its id, --session-id); killed mid tool it is
// interrupted; a resume through sessiond continues the same session: the
// same id and chat, appended to, and the model gets the earlier turns.
func TestQwenLaunchKilledResume(t *testing.T) {
	bin := agentBin(t, qwenBinEnv, "@qwen-code/qwen-code")
	w := newWorld(t)
	w.useQwen()
	w.model.Enqueue(qwenRun("echo TOOL-OUTPUT-5d1; "+longTool+"; echo done", "Run the long job"))
	w.startDaemon("--qwen-bin", bin, "--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	r := w.launch("launch", "--agent", "qwen", "--cwd", w.proj(), "--prompt", "Run the job FIRST-PROMPT-8a2", "--", "--yolo")
	id := r.Session.ID
	if r.Session.UpstreamID == "" {
		t.Fatalf("launch answer %+v: not linked", r)
	}
	up := r.Session.UpstreamID
	var python procInfo
	w.waitFor(90*time.Second, "the launched qwen's python3 tool", func() (bool, string) {
		for _, p := range qwenTools(up) {
			if isPython(p) {
				python = p
				return true, ""
			}
		}
		return false, logTail(r.LogPath)
	})
	owner := qwenAbove(python.PID)
	lw.claim("qwen", up, owner)
	s := w.waitSession(id, 30*time.Second, "running and busy in its tool", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy && s.Resume != nil
	})
	if s.Resume.Root != filepath.Join(w.Home, ".qwen") || s.Resume.Cwd != w.proj() || s.Agent != "qwen" || s.UpstreamID != up {
		t.Errorf("session %+v, resume cursor %+v", s, s.Resume)
	}
	w.waitPassSaw(time.Now(), "the tool started")
	w.step("linked " + up + ", busy")

	killed := time.Now()
	if err := syscall.Kill(owner, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s, took := w.waitInterrupted(id, killed, 2*time.Second, session.ProblemOrphanedToolCall)
	w.step("interrupted after " + took.Round(time.Millisecond).String())
	if orphans := qwenTools(up); len(orphans) > 0 {
		w.reapAll(id, orphans)
	}

	w.model.Enqueue(fakemodel.Say("Second answer, marker SECOND-ANSWER-c47."))
	n := len(w.model.Turns())
	r2 := w.launch("resume", id, "--prompt", "And again SECOND-PROMPT-e90", "--", "--yolo")
	if r2.Session.ID != id || r2.Session.UpstreamID != up || r2.Fresh || r2.Forked {
		t.Fatalf("resume answer %+v", r2)
	}
	s = w.waitSession(id, 90*time.Second, "stopped after the resumed turn", func(s api.Session) bool {
		return s.Status == session.StatusStopped && s.Exit != nil && s.Exit.PID == r2.Session.PID
	})
	if s.Exit.Code != 0 || s.UpstreamID != up || s.Activity != "" && s.Activity != session.ActivityIdle {
		t.Fatalf("resumed run ended %+v, upstream %s, activity %s, problems %v; log:\n%s", s.Exit, s.UpstreamID, s.Activity, problemKinds(s), logTail(r2.LogPath))
	}
	w.step("resumed turn stopped")
	var resumed *fakemodel.Request
	for _, tr := range w.model.Turns()[n:] {
		if strings.Contains(tr.Text(), "SECOND-PROMPT-e90") {
			resumed = tr
		}
	}
	if resumed == nil {
		t.Fatal("the model never got the resumed prompt")
	}
	if txt := resumed.Text(); !strings.Contains(txt, "FIRST-PROMPT-8a2") || !strings.Contains(txt, "TOOL-OUTPUT-5d1") && !strings.Contains(txt, "echo TOOL-OUTPUT-5d1") {
		t.Fatalf("the resumed request lacks the earlier turn:\n%s", tail(txt, 3000))
	}
	m, _ := filepath.Glob(filepath.Join(w.Home, ".qwen", "projects", "*", "chats", "*.jsonl"))
	if len(m) != 1 || filepath.Base(m[0]) != up+".jsonl" {
		t.Errorf("chats %v, want the one of %s", m, up)
	}
}

// qwenAbove is the nearest qwen (cli.js) ancestor of pid, 0 if none.
func qwenAbove(pid int) int {
	for i := 0; i < 16 && pid > 1; i++ {
		p, ok := readProc(pid)
		if !ok {
			return 0
		}
		if strings.Contains(strings.Join(p.Args, " "), "qwen-code/cli.js") {
			return pid
		}
		pid = p.PPID
	}
	return 0
}

// The Qwen Code TUI in a tmux pane asks before it runs a command (its auto
// mode's classifier cannot judge it). Nothing in the chat shows the
// question: it reads like a running tool (docs/agents/qwen.md). With
// sessiond's hooks installed by `sessionctl hooks install qwen`, the
// session is waiting for that permission, with the command, from its
// PermissionRequest hook; approved, busy; idle once the turn ends.
// Uninstalled, settings.json keeps no hook of sessiond's.
func TestQwenTUIPermissionWaiting(t *testing.T) {
	bin := agentBin(t, qwenBinEnv, "@qwen-code/qwen-code")
	w := newWorld(t)
	w.useQwen()
	const command = `python3 -c "import time; time.sleep(4)"; echo approved-and-done`
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		if !offersQwenShell(r) || len(r.Messages) == 0 {
			return fakemodel.Say("ok"), true
		}
		last := r.Messages[len(r.Messages)-1]
		switch {
		case last.Role == "tool":
			return fakemodel.Say("All done."), true
		case strings.Contains(last.Text, "Run the job"):
			return qwenRun(command, "The job"), true
		}
		return fakemodel.Say("ok"), true
	})
	w.startDaemon("--qwen-bin", bin, "--grace", "5s", "--reconcile-interval", "1s")
	root := filepath.Join(w.Home, ".qwen")
	if err := os.MkdirAll(root, 0o700); err != nil { // as a qwen run before makes it
		t.Fatal(err)
	}
	if out, errs, code := w.Ctl("hooks", "install", "qwen", "--root", root); code != 0 {
		t.Fatalf("hooks install qwen: exit %d: %s %s", code, out, errs)
	}
	w.step("hooks installed")

	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("qwen")
	p.waitScreen(180*time.Second, "Type your message")
	w.step("TUI ready")
	p.submit("Run the job", "Type your message", "Allow execution", 90*time.Second)
	shown := time.Now()
	want := session.WaitingFor{Kind: session.WaitingPermission, Tool: qwenShell, Input: command}
	var s api.Session
	w.waitFor(30*time.Second, "a Qwen session waiting for the permission", func() (bool, string) {
		for _, c := range w.sessions("qwen") {
			if c.Status == session.StatusRunning && c.Activity == session.ActivityWaiting && c.WaitingFor != nil &&
				*c.WaitingFor == want && c.ActivitySource == session.SourceHook {
				s = c
				return true, ""
			}
			return false, sessionLine(c)
		}
		return false, "no Qwen session yet"
	})
	up := s.UpstreamID
	w.step(fmt.Sprintf("waiting for permission %s after the prompt showed", time.Since(shown).Round(time.Millisecond)))
	w.waitPassAfter(time.Now(), "the permission prompt")
	if s = w.Show(s.ID); s.Activity != session.ActivityWaiting {
		t.Fatalf("a pass later: %s", sessionLine(s))
	}

	p.keys("Enter") // 1. Yes, allow once
	w.waitUpstream(up, 30*time.Second, "busy while the approved command runs", func(s api.Session) bool {
		return runningWith(session.ActivityBusy)(s) && s.WaitingFor == nil
	})
	w.step("approved: busy")
	w.waitUpstream(up, 90*time.Second, "idle once the turn ends", runningWith(session.ActivityIdle))
	w.step("turn ended: idle")

	if out, errs, code := w.Ctl("hooks", "uninstall", "qwen", "--root", root); code != 0 {
		t.Fatalf("hooks uninstall: exit %d: %s %s", code, out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(root, "settings.json")); err == nil && strings.Contains(string(b), "sessionctl") {
		t.Fatalf("settings.json after uninstall: %s", b)
	}
}
