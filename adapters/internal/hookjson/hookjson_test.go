package hookjson

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/session"
)

func TestShortInput(t *testing.T) {
	long := strings.Repeat("x", 500)
	for in, want := range map[string]string{
		`{"command":"ls -la\n  /tmp","description":"list"}`: "ls -la /tmp",
		`{"file_path":"/a/b.go","content":"…"}`:             "/a/b.go",
		`{"cmd":"sleep 1"}`:                                 "sleep 1",
		`{"a":1,  "b":[2, 3]}`:                              `{"a":1,"b":[2,3]}`,
		`"just a string"`:                                   `"just a string"`,
		`null`:                                              "",
		``:                                                  "",
		`{"command":"` + long + `"}`:                        strings.Repeat("x", maxShort-1) + "…",
	} {
		if got := shortInput(json.RawMessage(in)); got != want {
			t.Errorf("ShortInput(%.40q) = %q, want %q", in, got, want)
		}
	}
}

func TestQuestionsAndNotifications(t *testing.T) {
	a := Agent{QuestionTools: []string{"AskUserQuestion"}}
	for _, c := range []struct {
		payload string
		act     session.Activity
		wait    *session.WaitingFor
	}{
		{`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"AskUserQuestion","tool_input":{"questions":[{"question":"Which one?","options":[]},{"question":"And?"}]}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingQuestion, Tool: "AskUserQuestion", Question: "Which one? (and 1 more)"}},
		{`{"session_id":"s","hook_event_name":"PermissionRequest","tool_name":"AskUserQuestion","tool_input":{"question":"Go?"}}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingQuestion, Tool: "AskUserQuestion", Question: "Go?"}},
		{`{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make"}}`, session.ActivityBusy, nil},
		{`{"session_id":"s","hook_event_name":"Notification","notification_type":"permission_prompt","message":"Claude needs your permission to use Bash"}`,
			session.ActivityWaiting, &session.WaitingFor{Kind: session.WaitingPermission, Detail: "Claude needs your permission to use Bash"}},
		{`{"session_id":"s","hook_event_name":"Notification","notification_type":"idle_prompt"}`, session.ActivityIdle, &session.WaitingFor{Kind: session.WaitingInput}},
		{`{"session_id":"s","hook_event_name":"Notification","notification_type":"auth_success"}`, "", nil},
		{`{"session_id":"s","hook_event_name":"Interrupt"}`, session.ActivityIdle, &session.WaitingFor{Kind: session.WaitingInput}},
		{`{"session_id":"s","hook_event_name":"CwdChanged"}`, "", nil},
	} {
		h, err := a.Read([]byte(c.payload))
		if err != nil {
			t.Fatal(err)
		}
		if h.Activity != c.act || !h.WaitingFor.Equal(c.wait) {
			t.Errorf("%s: %q %+v, want %q %+v", c.payload, h.Activity, h.WaitingFor, c.act, c.wait)
		}
	}
}

// Any process can post a hook: ids and event names that are not names are
// refused, a tool's name and a folder are bounded.
func TestReadBounds(t *testing.T) {
	a := Agent{}
	long := strings.Repeat("a", 129)
	for _, payload := range []string{
		`{"session_id":"` + long + `","hook_event_name":"Stop"}`,
		`{"session_id":"a b","hook_event_name":"Stop"}`,
		`{"session_id":"a\u0000b","hook_event_name":"Stop"}`,
		`{"session_id":"../../x","hook_event_name":"Stop"}`,
		`{"session_id":"0199a1b2-c3d4","hook_event_name":"` + long + `"}`,
		`{"session_id":"0199a1b2-c3d4","hook_event_name":"Stop\n"}`,
	} {
		if h, err := a.Read([]byte(payload)); err == nil {
			t.Errorf("%.60s: read as %+v, want an error", payload, h)
		}
	}
	h, err := a.Read([]byte(`{"session_id":"0199a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b","hook_event_name":"PermissionRequest","tool_name":"` +
		strings.Repeat("x", 5000) + `","cwd":"/` + strings.Repeat("d", 5000) + `","tool_input":{"command":"ls"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := len([]rune(h.WaitingFor.Tool)); n > maxToolName+1 || h.Cwd != "" {
		t.Errorf("tool name of %d runes, cwd %d bytes kept", n, len(h.Cwd))
	}
}
