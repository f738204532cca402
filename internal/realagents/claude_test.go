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

// claudeRoot is where a Claude in this world writes.
func (w *world) claudeRoot() string { return filepath.Join(w.Home, ".claude") }

// claudeTranscript finds the transcript of an upstream id under the root.
func (w *world) claudeTranscript(upstream string) string {
	m, _ := filepath.Glob(filepath.Join(w.claudeRoot(), "projects", "*", upstream+".jsonl"))
	if len(m) == 1 {
		return m[0]
	}
	return ""
}

// toolTree is the running tool processes of a Claude process: the ones
// whose environment names it as their owner.
func claudeTools(owner int) []procInfo {
	return procs(func(p procInfo) bool { return p.Env["CLAUDE_PID"] == itoa(owner) })
}

// Scenario 1: Claude launched through sessiond, headless, its tool running
// a long python3 sleep, then kill -9 of claude: interrupted within a second
// with the three problems; reap kills exactly the orphaned tree; repair
// removes the stale registry entry; resume continues the same upstream id,
// with the earlier turns sent to the model; it ends stopped.
func TestClaudeKilledMidToolReapRepairResume(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.model.Enqueue(fakemodel.RunCommand(longTool, "Run the long job", 10*time.Minute))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	const firstPrompt = "Please run the long job, marker FIRST-PROMPT-7f3"
	r := w.launch("launch", "--agent", "claude", "--cwd", w.proj(), "--prompt", firstPrompt, "--", "--allowedTools", "Bash")
	id, up, pid := r.Session.ID, r.Session.UpstreamID, r.Session.PID
	if !r.Session.Launched || pid == 0 || up == "" {
		t.Fatalf("launch answer: %+v", r.Session)
	}
	w.step("launched")

	// The tool runs: its python3 carries CLAUDE_PID and the session id.
	var tools []procInfo
	w.waitFor(60*time.Second, "claude's python3 tool running", func() (bool, string) {
		tools = claudeTools(pid)
		for _, p := range tools {
			if isPython(p) {
				return true, ""
			}
		}
		return false, "tools " + logTail(r.LogPath)
	})
	w.step("tool running")
	for _, p := range tools {
		if p.Env["CLAUDE_CODE_SESSION_ID"] != up {
			t.Errorf("tool process %d (%s) has CLAUDE_CODE_SESSION_ID %q, want %q", p.PID, p.Comm, p.Env["CLAUDE_CODE_SESSION_ID"], up)
		}
	}
	s := w.waitSession(id, 15*time.Second, "running and busy", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy
	})
	if s.PID != pid || s.UpstreamID != up {
		t.Fatalf("tracked pid %d upstream %s, launched pid %d upstream %s", s.PID, s.UpstreamID, pid, up)
	}
	w.step("running/busy")
	registry := filepath.Join(w.claudeRoot(), "sessions", itoa(pid)+".json")
	var entry map[string]any
	if b, err := os.ReadFile(registry); err != nil {
		t.Fatalf("claude's registry entry: %v", err)
	} else if json.Unmarshal(b, &entry); entry["sessionId"] != up {
		t.Fatalf("registry entry %s: %s", registry, b)
	}
	transcript := w.claudeTranscript(up)
	if transcript == "" {
		t.Fatalf("no transcript of %s under %s", up, w.claudeRoot())
	}

	// A bystander with the same kind of command that is not the session's:
	// reap must leave it alone.
	bystander, _ := w.start("bystander", w.proj(), "python3", "-c", "import time; time.sleep(300)")
	// The tool tree is attributed by what the daemon saw while claude lived.
	w.waitPassSaw(time.Now(), "the tool started")

	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Within a second, as sessiond recorded it (the event's time).
	s, took := w.waitInterrupted(id, killed, time.Second,
		session.ProblemOrphanedToolCall, session.ProblemStaleBusyMarker, session.ProblemOrphanProcesses)
	t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
	// The kernel reparents the tool tree as claude's last threads exit,
	// which can be a moment after sessiond saw the death: wait for it, and
	// fail if it never happens.
	var orphans []procInfo
	w.waitFor(5*time.Second, "the tool tree reparented away from the dead claude", func() (bool, string) {
		orphans = claudeTools(pid)
		if len(orphans) == 0 {
			t.Fatal("the tool tree died with claude: nothing orphaned to reap")
		}
		for _, p := range orphans {
			if p.PPID == pid {
				return false, fmt.Sprintf("orphan %d still has the dead claude %d as parent", p.PID, pid)
			}
		}
		return true, ""
	})
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(pythonPID(orphans))+" ") {
		t.Errorf("orphan_processes %q does not name the python3 child %d", d, pythonPID(orphans))
	}

	// reap: the plan names exactly the orphaned tree; --apply kills it.
	plan := w.action("reap", id)
	if got, want := stepPIDs(plan.Steps), pids(orphans); !sameInts(got, want) {
		t.Fatalf("reap plan targets %v, want exactly the orphaned tree %v: %+v", got, want, plan.Steps)
	}
	res := w.action("reap", id, "--apply", "--timeout", "3s")
	for _, st := range res.Steps {
		if st.Outcome != "done" {
			t.Errorf("reap step %+v", st)
		}
	}
	for _, p := range orphans {
		if alive(p.PID) {
			t.Errorf("orphan %d (%s) survived reap --apply", p.PID, p.Comm)
		}
	}
	if !alive(bystander.Process.Pid) {
		t.Error("reap killed a bystander python3 that was not the session's")
	}
	w.step("reaped")
	s = w.waitSession(id, 5*time.Second, "orphan_processes cleared", func(s api.Session) bool {
		return s.Problem(session.ProblemOrphanProcesses) == nil
	})

	// repair: the stale registry entry goes, the transcript stays.
	if _, err := os.Stat(registry); err != nil {
		t.Fatalf("the stale registry entry is already gone before repair: %v", err)
	}
	before, _ := os.ReadFile(transcript)
	plan = w.action("repair", id)
	if len(plan.Steps) == 0 || plan.Applied {
		t.Fatalf("repair plan: %+v", plan)
	}
	if _, err := os.Stat(registry); err != nil {
		t.Fatalf("a dry-run repair removed the registry entry: %v", err)
	}
	res = w.action("repair", id, "--apply")
	if !res.Applied {
		t.Fatalf("repair --apply: %+v", res)
	}
	if _, err := os.Stat(registry); !os.IsNotExist(err) {
		t.Fatalf("registry entry %s after repair --apply: %v (steps %+v)", registry, err, res.Steps)
	}
	if after, _ := os.ReadFile(transcript); len(after) != len(before) {
		t.Fatalf("repair changed the transcript: %d -> %d bytes", len(before), len(after))
	}
	s = w.waitSession(id, 5*time.Second, "stale_busy_marker cleared", func(s api.Session) bool {
		return s.Problem(session.ProblemStaleBusyMarker) == nil
	})
	w.step("repaired")

	// resume: the same upstream id, the same transcript grows, and the
	// model sees the earlier turns (the first prompt and the tool call).
	const secondPrompt = "What happened to the job? marker SECOND-PROMPT-2c9"
	// The resumed turn runs a real tool too: headless as root, Claude
	// denies it ("This command requires approval") unless the resume
	// passes --allowedTools again.
	w.model.Enqueue(
		fakemodel.RunCommand(`python3 -c "print('RESUMED-TOOL-' + 'OK')"`, "Check the job", 0),
		fakemodel.Say("The job was interrupted; marker RESUMED-ANSWER-41d."),
	)
	nTurns := len(w.model.Turns())
	r2 := w.launch("resume", id, "--prompt", secondPrompt, "--", "--allowedTools", "Bash")
	if r2.Session.ID != id || r2.Session.UpstreamID != up || r2.Fresh || r2.Forked || r2.Session.PID == pid {
		t.Fatalf("resume answer: %+v", r2)
	}
	w.step("resumed")
	// The status comes from the owner's death; the exit status from the
	// launcher a moment later.
	s = w.waitSession(id, 60*time.Second, "stopped after the resumed turn, exit collected", func(s api.Session) bool {
		return s.Status == session.StatusStopped && s.Exit != nil && s.Exit.PID == r2.Session.PID
	})
	if s.Exit.Code != 0 {
		t.Errorf("resumed claude exit %+v; log:\n%s", s.Exit, logTail(r2.LogPath))
	}
	w.step("stopped")
	turns := w.model.Turns()[nTurns:]
	var resumed *fakemodel.Request
	for _, tr := range turns {
		if strings.Contains(tr.LastUserText(), "SECOND-PROMPT-2c9") {
			resumed = tr
		}
	}
	if resumed == nil {
		t.Fatalf("the model never got the resumed prompt; turns after resume: %d", len(turns))
	}
	text := resumed.Text()
	if !strings.Contains(text, "FIRST-PROMPT-7f3") || !strings.Contains(text, "time.sleep(300)") {
		t.Fatalf("the resumed request did not carry the earlier turns:\n%s", tail(text, 3000))
	}
	var toolRan bool
	for _, tr := range turns {
		for _, m := range tr.Messages {
			for _, res := range m.ToolResults {
				if strings.Contains(res.Content, "RESUMED-TOOL-OK") && !res.IsError {
					toolRan = true
				}
			}
		}
	}
	if !toolRan {
		t.Errorf("the resumed turn's tool did not run (were the resume's agent args passed?)")
	}
	after, _ := os.ReadFile(transcript)
	if len(after) <= len(before) || !strings.Contains(string(after), "SECOND-PROMPT-2c9") || !strings.Contains(string(after), "RESUMED-ANSWER-41d") {
		t.Fatalf("transcript %s did not grow with the resumed turn: %d -> %d bytes", transcript, len(before), len(after))
	}
	if m, _ := filepath.Glob(filepath.Join(w.claudeRoot(), "projects", "*", "*.jsonl")); len(m) != 1 {
		t.Errorf("want one transcript (the same session), got %v", m)
	}
	if s.Problem(session.ProblemOrphanedToolCall) != nil || len(s.Problems) != 0 {
		t.Errorf("problems after a clean resumed turn: %v", problemKinds(s))
	}
}

// Scenario 2: a Claude session started outside sessiond is discovered and
// tracked with its real process as owner; kill -9 makes it interrupted.
func TestClaudeStartedOutsideDiscovered(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.model.Enqueue(fakemodel.RunCommand(longTool, "Run the long job", 10*time.Minute))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	const up = "5e55d0e5-0000-4000-8000-00000000a11e"
	cmd, out := w.start("claude", w.proj(), bin, "--session-id", up, "-p", "run the long job", "--output-format", "stream-json", "--verbose", "--allowedTools", "Bash")
	pid := cmd.Process.Pid
	w.waitFor(60*time.Second, "claude's python3 tool running", func() (bool, string) {
		for _, p := range claudeTools(pid) {
			if isPython(p) {
				return true, ""
			}
		}
		return false, tail(out.String(), 2000)
	})
	w.step("tool running")

	var s api.Session
	w.waitFor(15*time.Second, "the outside session discovered running and busy", func() (bool, string) {
		_, _, code := w.Ctl("show", up)
		if code != 0 {
			return false, "not found"
		}
		s = w.Show(up)
		b, _ := json.Marshal(s)
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy, string(b)
	})
	if s.PID != pid || s.Launched || s.UpstreamID != up || s.Cwd != w.proj() {
		t.Fatalf("discovered session: pid %d (want %d) launched %v upstream %s cwd %s", s.PID, pid, s.Launched, s.UpstreamID, s.Cwd)
	}
	w.step("discovered")

	killed := time.Now()
	syscall.Kill(pid, syscall.SIGKILL)
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemOrphanedToolCall)
	t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
}

func pythonPID(ps []procInfo) int {
	for _, p := range ps {
		if isPython(p) {
			return p.PID
		}
	}
	return 0
}

// stepPIDs are the pids a reap's steps target.
func stepPIDs(steps []api.Step) []int {
	seen := map[int]bool{}
	var out []int
	for _, st := range steps {
		f := strings.FieldsFunc(st.Target, func(r rune) bool { return r < '0' || r > '9' })
		if len(f) == 0 {
			continue
		}
		n := atoi(f[0])
		if n > 0 && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[int]int{}
	for _, x := range a {
		m[x]++
	}
	for _, x := range b {
		m[x]--
	}
	for _, v := range m {
		if v != 0 {
			return false
		}
	}
	return true
}
