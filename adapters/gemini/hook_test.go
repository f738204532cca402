package gemini

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// The payloads the real Gemini CLI 0.61.0 handed its hooks
// (testdata/README.md): busy from the prompt and the tool, waiting for
// the shell command's approval from the ToolPermission notification,
// idle from AfterAgent.
func TestReadHookFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/hooks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Roots: []string{t.TempDir()}})
	want := map[string]session.Activity{
		"SessionStart": "", "BeforeAgent": session.ActivityBusy, "BeforeTool": session.ActivityBusy,
		"Notification": session.ActivityWaiting, "AfterTool": session.ActivityBusy, "AfterAgent": session.ActivityIdle, "SessionEnd": "",
	}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		h, err := a.ReadHook(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if h.UpstreamID != "df8831d9-86f9-4395-93e5-6fcd63fdf29c" || h.Cwd != "/tmp/sde3163807507/home/proj" {
			t.Errorf("%s: %+v", h.Event, h)
		}
		if w, ok := want[h.Event]; !ok || h.Activity != w {
			t.Errorf("%s: %q, want %q", h.Event, h.Activity, w)
		}
		delete(want, h.Event)
		switch h.Event {
		case "Notification":
			w := session.WaitingFor{Kind: session.WaitingPermission, Tool: "run_shell_command", Input: `python3 -c "import time; time.sleep(3)"; echo ok`}
			if h.WaitingFor == nil || *h.WaitingFor != w {
				t.Errorf("Notification waits for %+v, want %+v", h.WaitingFor, w)
			}
		case "AfterAgent":
			if h.WaitingFor == nil || h.WaitingFor.Kind != session.WaitingInput {
				t.Errorf("AfterAgent waits for %+v", h.WaitingFor)
			}
		default:
			if h.WaitingFor != nil {
				t.Errorf("%s waits for %+v", h.Event, h.WaitingFor)
			}
		}
	}
	if len(want) > 0 {
		t.Errorf("events not in the fixture: %v", want)
	}
}

// What each kind of confirmation waits for; notifications of other types,
// and payloads that are not hooks.
func TestReadHookNotifications(t *testing.T) {
	a := New(Config{Roots: []string{t.TempDir()}})
	const head = `{"session_id":"s-1","hook_event_name":"Notification","cwd":"/p",`
	for _, c := range []struct {
		payload string
		act     session.Activity
		wait    *session.WaitingFor
	}{
		{head + `"notification_type":"ToolPermission","message":"Tool Edit requires editing","details":{"type":"edit","title":"Confirm Edit: a.go","fileName":"a.go","filePath":"/p/a.go","newContent":"x"}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Confirm Edit: a.go", Input: "/p/a.go"}},
		{head + `"notification_type":"ToolPermission","details":{"type":"mcp","title":"Confirm MCP Tool","serverName":"gh","toolName":"create_issue"}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Tool: "create_issue", Input: "gh"}},
		{head + `"notification_type":"ToolPermission","details":{"type":"info","title":"Confirm Web Fetch","urls":["https://x.test/"],"prompt":"get it"}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Confirm Web Fetch", Input: "https://x.test/"}},
		{head + `"notification_type":"ToolPermission","message":"Tool requires confirmation"}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Detail: "Tool requires confirmation"}},
		{head + `"notification_type":"ToolPermission","details":{"type":"exec","title":"Confirm Shell Command","command":"` + strings.Repeat("x", 300) + `"}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Tool: "run_shell_command", Input: strings.Repeat("x", 159) + "…"}},
		{head + `"notification_type":"Other","message":"hi"}`, "", nil},
	} {
		h, err := a.ReadHook([]byte(c.payload))
		if err != nil {
			t.Fatal(err)
		}
		if h.Activity != c.act || !h.WaitingFor.Equal(c.wait) {
			t.Errorf("%.90s: %q %+v, want %q %+v", c.payload, h.Activity, h.WaitingFor, c.act, c.wait)
		}
	}
	for _, bad := range []string{`[]`, `{"hook_event_name":"AfterAgent"}`, `{"session_id":"a b","hook_event_name":"AfterAgent"}`, `{"session_id":"s"}`} {
		if h, err := a.ReadHook([]byte(bad)); err == nil {
			t.Errorf("%s: read as %+v, want an error", bad, h)
		}
	}
}

// An event sessiond does not know says nothing of the activity and is
// counted as drift of the hooks, once per session however often it
// comes; the events of the real CLI's fixture are none of it.
func TestDriftOfHooks(t *testing.T) {
	a := New(Config{Roots: []string{t.TempDir()}})
	b, err := os.ReadFile("testdata/hooks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if _, err := a.ReadHook(l); err != nil {
			t.Fatal(err)
		}
	}
	if d := a.driftReport(); len(d) != 0 {
		t.Fatalf("the fixture's events counted as drift: %+v", d)
	}
	for i := 0; i < 2; i++ {
		h, err := a.ReadHook([]byte(`{"session_id":"0c4c8d5e-1c1a-4f7e-9d7e-0d6f5a0e2b11","hook_event_name":"FutureEvent","cwd":"/tmp/proj"}`))
		if err != nil || h.Activity != "" || h.WaitingFor != nil {
			t.Fatalf("%+v %v", h, err)
		}
	}
	want := []adapters.Drift{{Kind: adapters.DriftHookEvent, Input: "hooked session", Inputs: 1, Values: []adapters.DriftValue{{Value: "FutureEvent", Inputs: 1}}}}
	if got := a.driftReport(); !reflect.DeepEqual(got, want) {
		t.Errorf("drift %+v, want %+v", got, want)
	}
}
