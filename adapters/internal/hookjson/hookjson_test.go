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
		if got := ShortInput(json.RawMessage(in)); got != want {
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
