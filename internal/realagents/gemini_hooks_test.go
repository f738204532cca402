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

// With `sessionctl hooks install gemini` done, the TUI's shell call that
// asks for approval shows as waiting for it, with the command, from the
// ToolPermission notification (the chat shows nothing before the call
// finished); approved, busy while it runs (the tool's start is newer than
// the hook); idle once the turn ended (AfterAgent). Uninstall gives
// settings.json back byte for byte.
func TestGeminiHooksPermissionWaiting(t *testing.T) {
	bin := agentBin(t, geminiBinEnv, "@google/gemini-cli")
	w := newWorld(t)
	w.writeGeminiConfig()
	const command = `python3 -c "import time; time.sleep(12)"; echo approved-and-done`
	w.model.Enqueue(fakemodel.RunCommand(command, "The job", 0), fakemodel.Say("All done."))
	w.startDaemon("--grace", "5s", "--reconcile-interval", "1s")
	settings := filepath.Join(w.geminiDir(), "settings.json")
	before, err := os.ReadFile(settings)
	if err != nil {
		t.Fatal(err)
	}
	if out, errs, code := w.Ctl("hooks", "install", "gemini", "--root", w.geminiDir()); code != 0 {
		t.Fatalf("hooks install gemini: exit %d: %s %s", code, out, errs)
	}
	if b, _ := os.ReadFile(settings); !strings.Contains(string(b), `"timeout": 5000`) {
		t.Fatalf("settings.json after install, want timeouts in ms:\n%s", b)
	}
	w.step("hooks installed")

	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("gemini -m " + geminiModel)
	p.waitScreen(90*time.Second, "Type your message")
	w.step("TUI ready")
	p.submit("Run the job", "Type your message", "Allow execution", 60*time.Second)
	shown := time.Now()
	want := session.WaitingFor{Kind: session.WaitingPermission, Tool: "run_shell_command", Input: command}
	var s api.Session
	w.waitFor(30*time.Second, "a Gemini session waiting for the permission", func() (bool, string) {
		for _, c := range w.sessions("gemini") {
			if c.Status == session.StatusRunning && c.Activity == session.ActivityWaiting && c.WaitingFor != nil &&
				*c.WaitingFor == want && c.ActivitySource == session.SourceHook {
				s = c
				return true, ""
			}
			return false, sessionLine(c)
		}
		return false, "no Gemini session yet"
	})
	up := s.UpstreamID
	w.step(fmt.Sprintf("waiting for permission %s after the prompt showed", time.Since(shown).Round(time.Millisecond)))
	w.waitPassAfter(time.Now(), "the permission prompt")
	if s = w.Show(s.ID); s.Activity != session.ActivityWaiting {
		t.Fatalf("a pass later: %s", sessionLine(s))
	}

	p.keys("Enter") // 1. Allow once
	w.waitFor(30*time.Second, "the approved python3", func() (bool, string) {
		return len(procs(func(c procInfo) bool { return w.mine(c) && isPython(c) })) > 0, ""
	})
	w.waitUpstream(up, 30*time.Second, "busy while the approved command runs", func(s api.Session) bool {
		return runningWith(session.ActivityBusy)(s) && s.WaitingFor == nil
	})
	if len(procs(func(c procInfo) bool { return w.mine(c) && isPython(c) })) == 0 {
		t.Fatal("busy only after the command ended: the tool's start did not end the wait")
	}
	w.step("approved: busy while the command runs")
	w.waitUpstream(up, 90*time.Second, "idle once the turn ends", runningWith(session.ActivityIdle))
	w.step("turn ended: idle")

	if out, errs, code := w.Ctl("hooks", "uninstall", "gemini", "--root", w.geminiDir()); code != 0 {
		t.Fatalf("hooks uninstall: exit %d: %s %s", code, out, errs)
	}
	if b, _ := os.ReadFile(settings); string(b) != string(before) {
		t.Fatalf("settings.json after uninstall:\n%s\nwant:\n%s", b, before)
	}
}
