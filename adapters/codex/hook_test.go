package codex

import (
	"bufio"
	"os"
	"testing"

	"github.com/sessiond/sessiond/session"
)

// The payloads the real Codex wrote (testdata/hooks.md): the approval
// prompt is waiting for permission with the command; the tool's start
// and end and the prompt are busy; Stop waits for input; the session's
// start and end say nothing.
func TestReadHookRealPayloads(t *testing.T) {
	f, err := os.Open("testdata/hooks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]struct {
		act  session.Activity
		wait *session.WaitingFor
	}{
		"SessionStart":      {},
		"UserPromptSubmit":  {act: session.ActivityBusy},
		"PreToolUse":        {act: session.ActivityBusy},
		"PermissionRequest": {session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "sleep 6; echo hi"}},
		"PostToolUse":       {act: session.ActivityBusy},
		"Stop":              {session.ActivityIdle, &session.WaitingFor{Kind: session.WaitingInput}},
		"SessionEnd":        {},
	}
	a := &Adapter{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	seen := 0
	for sc.Scan() {
		h, err := a.ReadHook(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		w, ok := want[h.Event]
		if !ok {
			t.Fatalf("event %q not expected", h.Event)
		}
		seen++
		if h.Activity != w.act || !h.WaitingFor.Equal(w.wait) {
			t.Errorf("%s: activity %q waiting %+v; want %q %+v", h.Event, h.Activity, h.WaitingFor, w.act, w.wait)
		}
		if h.UpstreamID == "" || h.Cwd != "/tmp/cx/w3" {
			t.Errorf("%s: session %q cwd %q", h.Event, h.UpstreamID, h.Cwd)
		}
	}
	if seen != len(want) {
		t.Fatalf("read %d payloads, want %d", seen, len(want))
	}
	for _, bad := range []string{``, `[]`, `{"hook_event_name":"Stop"}`, `{"session_id":"x"}`, `{"session_id":"x","hook_event_name":"Stop"`} {
		if _, err := a.ReadHook([]byte(bad)); err == nil {
			t.Errorf("%q read without error", bad)
		}
	}
}
