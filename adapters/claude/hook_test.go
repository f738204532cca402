package claude

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/session"
)

// The payloads the real Claude Code 2.1.332 wrote (testdata/hooks.md):
// PreSkillShellCommand, a guard before a skill's shell command, is busy
// and never a wait, though its tool_use_id names no call; so is one that
// names a question tool (any process can post a hook).
func TestReadHookRealPayloads(t *testing.T) {
	f, err := os.Open("testdata/hooks-2.1.332.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]struct {
		act  session.Activity
		wait *session.WaitingFor
	}{
		"UserPromptSubmit":     {act: session.ActivityBusy},
		"UserPromptExpansion":  {},
		"PreSkillShellCommand": {act: session.ActivityBusy},
		"Stop":                 {session.ActivityIdle, &session.WaitingFor{Kind: session.WaitingInput}},
		"SessionEnd":           {},
	}
	a := &Adapter{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	seen := map[string]bool{}
	for sc.Scan() {
		h, err := a.ReadHook(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		w, ok := want[h.Event]
		if !ok {
			t.Fatalf("unexpected event %s", h.Event)
		}
		seen[h.Event] = true
		if h.Activity != w.act || !h.WaitingFor.Equal(w.wait) || h.UpstreamID == "" || h.Cwd != "/tmp/cc/home/proj" {
			t.Errorf("%s: %q %+v (%+v), want %q %+v", h.Event, h.Activity, h.WaitingFor, h, w.act, w.wait)
		}
		if h.Event == "PreSkillShellCommand" {
			forged := strings.Replace(sc.Text(), `"tool_name":"Bash","tool_input":{`, `"tool_name":"AskUserQuestion","tool_input":{"question":"Go?",`, 1)
			if h, err := a.ReadHook([]byte(forged)); err != nil || h.Activity != session.ActivityBusy || h.WaitingFor != nil {
				t.Errorf("PreSkillShellCommand naming a question tool: %+v %v, want busy", h, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != len(want) {
		t.Errorf("events seen %v, want all of %v", seen, want)
	}
}
