package copilot

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// The payloads the real Copilot CLI 1.0.102 handed its hooks
// (testdata/README.md): busy from the prompt, the tool and the
// permission request (which Copilot runs for calls it runs unasked too),
// idle from Stop.
func TestReadHookFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/hooks.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	a := New(Config{Roots: []string{t.TempDir()}})
	want := map[string]session.Activity{"UserPromptSubmit": session.ActivityBusy, "PreToolUse": session.ActivityBusy,
		"PermissionRequest": session.ActivityBusy, "PostToolUse": session.ActivityBusy, "Stop": session.ActivityIdle}
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		h, err := a.ReadHook(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if h.UpstreamID != "5522e3e2-58eb-4f98-88a3-8a8b4a7bbc25" || h.Cwd != "/tmp/sde1499476443/home/proj" {
			t.Errorf("%s: %+v", h.Event, h)
		}
		if w, ok := want[h.Event]; !ok || h.Activity != w {
			t.Errorf("%s: %q, want %q", h.Event, h.Activity, w)
		}
		delete(want, h.Event)
		if (h.WaitingFor != nil) != (h.Event == "Stop") || h.WaitingFor != nil && h.WaitingFor.Kind != session.WaitingInput {
			t.Errorf("%s waits for %+v", h.Event, h.WaitingFor)
		}
	}
	if len(want) > 0 {
		t.Errorf("events not in the fixture: %v", want)
	}
	if a.ToolSessionVar() != "COPILOT_AGENT_SESSION_ID" {
		t.Error(a.ToolSessionVar())
	}
}

// A question asked (ask_user, or its Claude name) waits for it; a
// notification says nothing (the events say what a permission is for);
// payloads that are no hooks are refused.
func TestReadHookQuestionAndNotification(t *testing.T) {
	a := New(Config{Roots: []string{t.TempDir()}})
	for _, c := range []struct {
		payload string
		act     session.Activity
		wait    *session.WaitingFor
	}{
		{`{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"ask_user","tool_input":{"message":"Which file?","requestedSchema":{}}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingQuestion, Tool: "ask_user", Question: "Which file?"}},
		{`{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"AskUserQuestion","tool_input":{"question":"Go?"}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingQuestion, Tool: "AskUserQuestion", Question: "Go?"}},
		{`{"hook_event_name":"Notification","session_id":"s","notification_type":"permission_prompt","message":"Permission needed"}`, "", nil},
	} {
		h, err := a.ReadHook([]byte(c.payload))
		if err != nil {
			t.Fatal(err)
		}
		if h.Activity != c.act || !h.WaitingFor.Equal(c.wait) {
			t.Errorf("%.90s: %q %+v, want %q %+v", c.payload, h.Activity, h.WaitingFor, c.act, c.wait)
		}
	}
	for _, bad := range []string{`[]`, `{"hook_event_name":"Stop"}`, `{"sessionId":"s"}`, `{"hookName":"permissionRequest","sessionId":"a b"}`, `{"sessionId":"s","prompt":"hi"}`} {
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
