package qwen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/session"
)

// The payloads the real Qwen Code 0.24.4 handed its hooks.
func TestReadHookFixtures(t *testing.T) {
	a := New(Config{Roots: []string{t.TempDir()}})
	got := map[string]session.Activity{}
	for _, l := range bytes.Split(bytes.TrimSpace(fixture(t, "hooks.jsonl")), []byte("\n")) {
		h, err := a.ReadHook(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if h.UpstreamID != "797e2cee-0fa1-4bc6-9a47-b63c2e3d67b6" || h.Cwd != "/tmp/qx/home6/proj" {
			t.Errorf("%s: %+v", h.Event, h)
		}
		if h.Event == "Notification" {
			if h.Activity != "" || h.WaitingFor != nil {
				t.Errorf("Notification says %s %+v", h.Activity, h.WaitingFor)
			}
			continue
		}
		got[h.Event] = h.Activity
		if h.Event == "PermissionRequest" {
			if h.Activity != session.ActivityWaiting || h.WaitingFor == nil || h.WaitingFor.Kind != session.WaitingPermission ||
				h.WaitingFor.Tool != qwenShellTool || !strings.Contains(h.WaitingFor.Input, "python3") {
				t.Errorf("PermissionRequest: %+v %+v", h, h.WaitingFor)
			}
		}
	}
	if got["PreToolUse"] != session.ActivityBusy || got["PostToolUse"] != session.ActivityBusy || got["UserPromptSubmit"] != session.ActivityBusy ||
		got["Stop"] != session.ActivityIdle {
		t.Errorf("activities %v", got)
	}
	if a.ToolSessionVar() != "QWEN_CODE_SESSION_ID" {
		t.Error(a.ToolSessionVar())
	}
}

const qwenShellTool = "run_shell_command"
