package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// With `sessionctl hooks install copilot` done (user-level hooks in
// settings.json of its home), the TUI's shell call that asks for
// approval shows as waiting for it with the command (from the events:
// no hook of 1.0.102 says it), busy once approved while it runs, idle at
// the turn's end; sessiond takes each hook (read, from the session's
// process tree, not refused as another session's tool's). Copilot writes
// its events right after each hook, so the events mostly have the last
// word. Uninstall removes sessiond's entries.
func TestCopilotHooksPermissionWaiting(t *testing.T) {
	bin := agentBin(t, copilotBinEnv, "@github/copilot")
	w := newWorld(t)
	w.copilotEnv(bin)
	const command = `python3 -c "import time; time.sleep(12)"; echo approved-and-done`
	w.model.Enqueue(fakemodel.RunCommand(command, "The job", time.Minute), fakemodel.Say("All done."))
	d := w.startDaemon("--copilot-dir", w.copilotHome(), "--grace", "5s", "--reconcile-interval", "1s")
	if err := os.MkdirAll(w.copilotHome(), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := w.Ctl("hooks", "install", "copilot", "--root", w.copilotHome()); code != 0 {
		t.Fatalf("hooks install copilot: exit %d: %s %s", code, out, errs)
	}
	w.step("hooks installed")

	sources := map[session.ActivitySource]bool{}
	seen := func(pred func(api.Session) bool) func(api.Session) bool {
		return func(s api.Session) bool {
			if s.Status == session.StatusRunning {
				sources[s.ActivitySource] = true
			}
			return pred(s)
		}
	}
	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("copilot")
	p.waitScreen(90*time.Second, "Do you trust the files in this folder?")
	p.keys("Enter")
	p.waitScreen(30*time.Second, "Manual Approval")
	w.step("TUI ready")
	p.typeLine("Run the job")
	var up string
	w.waitFor(60*time.Second, "a Copilot session waiting for the permission", func() (bool, string) {
		for _, c := range w.sessions("copilot") {
			seen(func(api.Session) bool { return false })(c)
			if c.Status == session.StatusRunning && c.Activity == session.ActivityWaiting && c.WaitingFor != nil &&
				c.WaitingFor.Kind == session.WaitingPermission && c.WaitingFor.Tool == "bash" && strings.Contains(c.WaitingFor.Input, "time.sleep(12)") {
				up = c.UpstreamID
				return true, ""
			}
			return false, sessionLine(c)
		}
		return false, "no Copilot session yet"
	})
	w.step("waiting for permission")
	p.waitScreen(10*time.Second, "Do you want to run this command?")
	p.keys("Enter")
	w.waitUpstream(up, 30*time.Second, "busy while the approved command runs", seen(func(s api.Session) bool {
		return runningWith(session.ActivityBusy)(s) && s.WaitingFor == nil
	}))
	// The approval says busy (its hook) a moment before the command
	// starts; under load that moment was longer than one look. The
	// command runs 12 s: it must show up, and the session be busy while
	// it does.
	running := func() bool {
		return len(procs(func(c procInfo) bool { return c.Env["COPILOT_AGENT_SESSION_ID"] == up && isPython(c) })) > 0
	}
	w.waitFor(8*time.Second, "the approved command running", func() (bool, string) { return running(), "not started" })
	w.waitUpstream(up, 2*time.Second, "busy while the approved command runs", runningWith(session.ActivityBusy))
	if !running() {
		t.Fatal("busy only after the command ended")
	}
	w.step("approved: busy")
	w.waitUpstream(up, 90*time.Second, "idle once the turn ends", seen(runningWith(session.ActivityIdle)))
	w.step("turn ended: idle")
	for _, ev := range []string{"UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop"} {
		taken := fmt.Sprintf(`"agent": "copilot", "event": %q, "upstream_id": %q`, ev, up)
		if !strings.Contains(d.Stderr.String(), taken) {
			t.Errorf("sessiond did not take the %s hook", ev)
		}
	}
	if log := d.Stderr.String(); strings.Contains(log, "not taken") || strings.Contains(log, "does not read") {
		t.Errorf("a hook was refused")
	}
	t.Logf("activity sources seen: %v", sources)
	if out, errs, code := w.Ctl("hooks", "uninstall", "copilot", "--root", w.copilotHome()); code != 0 {
		t.Fatalf("hooks uninstall: exit %d: %s %s", code, out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(w.copilotHome(), "settings.json")); err == nil && strings.Contains(string(b), "sessionctl") {
		t.Fatalf("settings.json after uninstall: %s", b)
	}
}
