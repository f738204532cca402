package realagents

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// Claude Code 2.1.332 runs a skill's embedded shell command (!`…` in its
// SKILL.md) when the skill is loaded, after a PreSkillShellCommand hook
// whose tool_use_id names no call in the transcript. With sessiond's hook
// command on that event (added beside what `sessionctl hooks install
// claude` writes, which leaves it out: docs/agents/claude.md), `claude -p
// /probe` is running and busy while the command runs, owned by the claude
// process, the hook taken from it; it never shows waiting, then stops
// when claude exits.
func TestClaudeSkillShellCommandBusyFromHook(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.seedClaudeHome(w.proj())
	const marker = "skill-slept-5f2"
	skill := filepath.Join(w.proj(), ".claude", "skills", "probe", "SKILL.md")
	if err := os.MkdirAll(filepath.Dir(skill), 0o755); err != nil {
		t.Fatal(err)
	}
	// python3 is what the seeded settings allow: a skill command they do
	// not allow is refused before any hook.
	body := "---\nname: probe\ndescription: Runs a shell command as it loads.\n---\n" +
		"Marker: !`python3 -c \"import time; time.sleep(8); print('" + marker + "')\"`\n\nSay what the marker was.\n"
	if err := os.WriteFile(skill, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	d := w.startDaemon("--claude-bin", bin, "--grace", "5s")
	lw := w.watchLiveNeverDead()
	if out, errs, code := w.Ctl("hooks", "install", "claude", "--root", w.claudeRoot()); code != 0 {
		t.Fatalf("hooks install claude: exit %d: %s %s", code, out, errs)
	}
	w.addClaudeHook("PreSkillShellCommand")
	w.step("daemon ready, hooks installed")

	const up = "5e55d0e5-0000-4000-8000-0000005c111a"
	cmd, out := w.start("claude -p /probe", w.proj(), bin, "-p", "/probe", "--session-id", up,
		"--output-format", "stream-json", "--verbose")
	diag := func() string { return tail(out.String(), 2000) }
	var py procInfo
	w.waitFor(60*time.Second, "the skill's python3 running", func() (bool, string) {
		ps := procs(func(p procInfo) bool {
			return w.mine(p) && isPython(p) && strings.Contains(strings.Join(p.Args, " "), marker)
		})
		if len(ps) == 0 {
			return false, diag()
		}
		py = ps[0]
		return true, ""
	})
	lw.claim("claude", up, cmd.Process.Pid)
	w.step("skill command running")

	s := w.waitUpstream(up, 3*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, cmd.Process.Pid, "claude -p")
	// The hook was taken, from the owner's tree (the daemon logs only
	// those). Busy comes from it or from the registry, whichever Claude
	// wrote last: both say the same.
	w.waitFor(3*time.Second, "the daemon took the PreSkillShellCommand hook", func() (bool, string) {
		return strings.Contains(d.Stderr.String(), `"event": "PreSkillShellCommand", "upstream_id": "`+up+`", "activity": "busy"`), ""
	})
	if s, _ = w.session(up); s.ActivitySource != session.SourceHook && s.ActivitySource != session.SourceRegistry {
		t.Errorf("busy from %q, want the hook or the registry", s.ActivitySource)
	}
	t.Logf("busy from the %s", s.ActivitySource)
	w.step("busy, the hook taken")
	// Never waiting while the command runs: nothing is asked of anyone.
	polls := 0
	for deadline := time.Now().Add(time.Minute); alive(py.PID) && time.Now().Before(deadline); {
		if s, ok := w.session(up); ok && s.Activity == session.ActivityWaiting {
			t.Fatalf("waiting while the skill's command runs: %s", sessionLine(s))
		}
		polls++
		time.Sleep(50 * time.Millisecond)
	}
	w.step("never waiting (" + itoa(polls) + " looks)")
	// start's own goroutine reaps it.
	w.waitFor(time.Minute, "claude -p exited after its skill's command", func() (bool, string) {
		return !alive(cmd.Process.Pid), diag()
	})
	if !strings.Contains(out.String(), marker) {
		t.Errorf("the command's output never reached the model's turn:\n%s", diag())
	}
	w.waitUpstream(up, 15*time.Second, "stopped after claude exited", func(s api.Session) bool { return s.Status == session.StatusStopped })
	w.step("stopped")
}

// addClaudeHook adds sessiond's hook command, as `hooks install` wrote it
// for UserPromptSubmit, to event in the world's settings.json.
func (w *world) addClaudeHook(event string) {
	w.t.Helper()
	path := filepath.Join(w.claudeRoot(), "settings.json")
	b, err := os.ReadFile(path)
	if err != nil {
		w.t.Fatal(err)
	}
	var settings map[string]any
	if err := json.Unmarshal(b, &settings); err != nil {
		w.t.Fatal(err)
	}
	hooks, _ := settings["hooks"].(map[string]any)
	groups, _ := hooks["UserPromptSubmit"].([]any)
	if len(groups) == 0 {
		w.t.Fatalf("no UserPromptSubmit hook in %s", b)
	}
	g := groups[0].(map[string]any)
	hooks[event] = []any{map[string]any{"matcher": "*", "hooks": g["hooks"]}}
	if b, err = json.MarshalIndent(settings, "", "  "); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		w.t.Fatal(err)
	}
}
