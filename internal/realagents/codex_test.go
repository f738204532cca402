package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

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
	// python3 is a grandchild that outlives codex (the fact sheet, §6).
	w.model.Enqueue(fakemodel.RunCommand(longTool+"; echo done", "Run the long job", 10*time.Minute))
	w.startDaemon("--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("codex exec", w.proj(), bin, "exec", "--skip-git-repo-check",
		"--dangerously-bypass-approvals-and-sandbox", "Run the long job")
	diag := func() string { return tail(out.String(), 2000) }
	var up string
	w.waitFor(60*time.Second, "codex's python3 tool running", func() (bool, string) {
		ps := procs(func(p procInfo) bool { return p.Env["CODEX_THREAD_ID"] != "" && isPython(p) })
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
