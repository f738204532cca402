package realagents

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// pendingRequest is an entry of OpenCode's GET /permission or /question.
type pendingRequest struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
}

// waitPending waits until the server lists a pending request (path
// /permission or /question) for session up, and returns it.
func (w *world) waitPending(sv ocServer, path, up string) pendingRequest {
	w.t.Helper()
	var got pendingRequest
	w.waitFor(60*time.Second, "a pending "+path+" for "+up, func() (bool, string) {
		var list []pendingRequest
		if err := getJSON(sv.URL+path+"?directory="+w.proj(), &list); err != nil {
			return false, err.Error()
		}
		for _, p := range list {
			if p.SessionID == up {
				got = p
				return true, ""
			}
		}
		b, _ := json.Marshal(list)
		return false, string(b)
	})
	return got
}

// An OpenCode server's permission and question requests, on the real
// `opencode serve` with bash set to ask (the project's opencode.json, as a
// user writes it). The first prompt is sent with `sessionctl send`, which
// goes through the server's prompt_async; the model's bash call then waits
// for a permission: sessiond says waiting for permission to run bash with
// the command, within a second of the server listing it. Approved through
// the server, the command runs and the session is idle. The model's
// question tool then makes it waiting for that question, with its words;
// answered, idle.
func TestOpenCodePermissionAndQuestion(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	if err := os.WriteFile(filepath.Join(w.proj(), "opencode.json"), []byte(`{"$schema": "https://opencode.ai/config.json", "permission": {"bash": "ask"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"PERM-4b1": fakemodel.RunCommand("touch approved-4b1.txt", "Touch the approval marker", 0),
		"ASK-9c0": {ToolCalls: []fakemodel.ToolCall{{Name: "question", Input: map[string]any{"questions": []any{map[string]any{
			"question": "Deploy to staging or production?", "header": "Target",
			"options": []any{
				map[string]any{"label": "Staging", "description": "The test cluster"},
				map[string]any{"label": "Production", "description": "The real one"},
			},
		}}}}}},
	}))
	d := w.startDaemon("--opencode-bin", bin, "--grace", "5s")
	w.watchLiveNeverDead()
	sv := w.startOpenCodeServer(bin)
	var created struct {
		ID string `json:"id"`
	}
	if err := postJSON(sv.URL+"/session", map[string]any{}, &created); err != nil || !strings.HasPrefix(created.ID, "ses_") {
		t.Fatalf("POST /session: %v %+v", err, created)
	}
	up := created.ID
	s := w.waitUpstream(up, 30*time.Second, "running and idle before any prompt", runningWith(session.ActivityIdle))
	w.checkOwner(s, sv.PID, "opencode serve")
	w.step("opencode serve: session idle")

	out, errs, code := w.Ctl("send", s.ID, "Touch the approval marker, marker PERM-4b1")
	if code != 0 || !strings.Contains(out, "delivered") || !strings.Contains(out, "server") {
		t.Fatalf("send through the server: exit %d: %s %s", code, out, errs)
	}
	t.Logf("send: %s", strings.TrimSpace(out))
	per := w.waitPending(sv, "/permission", up)
	listed := time.Now()
	s = w.waitUpstream(up, time.Second, "waiting for permission to run bash: touch", func(s api.Session) bool {
		wf := s.WaitingFor
		return s.Activity == session.ActivityWaiting && wf != nil && wf.Kind == session.WaitingPermission &&
			wf.Tool == "bash" && strings.Contains(wf.Input, "touch approved-4b1.txt")
	})
	t.Logf("waiting_for %+v from the %s, %s after the server listed it", *s.WaitingFor, s.ActivitySource, time.Since(listed).Round(time.Millisecond))
	if s.ActivitySource != session.SourceServer {
		t.Errorf("activity_source %q, want the server", s.ActivitySource)
	}
	if turns := w.model.Turns(); len(turns) == 0 || !strings.Contains(turns[0].LastUserText(), "PERM-4b1") {
		t.Errorf("the model did not get the sent prompt as its first turn")
	}
	w.step("sent through the server; waiting for permission, with the command")

	if err := postJSON(sv.URL+"/permission/"+per.ID+"/reply?directory="+w.proj(), map[string]any{"reply": "once"}, nil); err != nil {
		t.Fatalf("approve %s: %v", per.ID, err)
	}
	w.waitOpenCodeTurnDone(up, func() string { return "" })
	if _, err := os.Stat(filepath.Join(w.proj(), "approved-4b1.txt")); err != nil {
		t.Errorf("the approved command did not run: %v", err)
	}
	// Answered, the wait is gone within a second of the turn's end in
	// the database.
	w.waitUpstream(up, time.Second, "idle after the approved turn", func(s api.Session) bool {
		return runningWith(session.ActivityIdle)(s) && (s.WaitingFor == nil || s.WaitingFor.Kind == session.WaitingInput)
	})
	w.step("approved: idle")

	body := map[string]any{"parts": []map[string]any{{"type": "text", "text": "Ask me where to deploy, marker ASK-9c0"}}}
	if err := postJSON(sv.URL+"/session/"+up+"/prompt_async", body, nil); err != nil {
		t.Fatal(err)
	}
	q := w.waitPending(sv, "/question", up)
	listed = time.Now()
	s = w.waitUpstream(up, time.Second, "waiting for the question, with its words", func(s api.Session) bool {
		wf := s.WaitingFor
		return s.Activity == session.ActivityWaiting && wf != nil && wf.Kind == session.WaitingQuestion &&
			wf.Question == "Deploy to staging or production?"
	})
	t.Logf("waiting_for %+v from the %s, %s after the server listed it", *s.WaitingFor, s.ActivitySource, time.Since(listed).Round(time.Millisecond))
	if s.ActivitySource != session.SourceServer {
		t.Errorf("activity_source %q, want the server", s.ActivitySource)
	}
	w.step("waiting for a question, with its words")
	if err := postJSON(sv.URL+"/question/"+q.ID+"/reply?directory="+w.proj(), map[string]any{"answers": [][]string{{"Staging"}}}, nil); err != nil {
		t.Fatalf("answer %s: %v", q.ID, err)
	}
	w.waitOpenCodeTurnDone(up, func() string { return "" })
	w.waitUpstream(up, time.Second, "idle after the answer, the question gone", func(s api.Session) bool {
		return runningWith(session.ActivityIdle)(s) && (s.WaitingFor == nil || s.WaitingFor.Kind == session.WaitingInput)
	})
	turns := w.model.Turns()
	if last := turns[len(turns)-1]; !strings.Contains(last.Text(), "Staging") {
		t.Errorf("the model's last turn does not carry the answer:\n%s", last.Text())
	}
	w.step("answered: idle")
	// sessiond followed the real server's event stream: each request
	// woke a pass (GET /global/event, 1.18.33's shape).
	logs := d.Stderr.String()
	for _, typ := range []string{"permission.asked", "permission.replied", "question.asked", "question.replied", "session.idle"} {
		if !strings.Contains(logs, `"event": "`+typ+`"`) {
			t.Errorf("no %s event from the server's stream in sessiond's log", typ)
		}
	}
}
