package e2e

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// send's rules on the fake claude: a busy session refuses a prompt; one
// queued with --when-idle waits, and when the session dies instead of
// going idle it is resumed with the prompt; a prompt a previous sessiond
// was delivering when it stopped is failed, never sent twice.
func TestSendRules(t *testing.T) {
	e, proj := launchEnv(t)
	// A send the last sessiond was delivering when it died.
	e.Seed(&session.Record{ID: "old000000001", Agent: "claude", UpstreamID: "u-old", Status: session.StatusStopped, CreatedAt: time.Now()})
	st, err := state.Open(filepath.Join(e.StateDir, "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutSend(session.Send{ID: "midway000001", SessionID: "old000000001", Prompt: "half sent", State: session.SendDelivering, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	e.StartDaemon("--claude-bin", fakeClaude(t))
	var all []session.Send
	e.CtlJSON(&all, "sends", "--all")
	if len(all) != 1 || all[0].State != session.SendFailed || !strings.Contains(all[0].Error, "not sent again") {
		t.Fatalf("a send left delivering by a previous sessiond: %+v", all)
	}

	r, errs, code := e.launchJSON("launch", "--agent", "claude", "--cwd", proj, "--prompt", "run the tests", "--env", "FAKE_CLAUDE_TOOL_SLEEP=300")
	if code != 0 {
		t.Fatalf("launch: %d %s", code, errs)
	}
	id := r.Session.ID
	t.Cleanup(func() { syscall.Kill(-r.Session.PID, syscall.SIGKILL) })
	e.waitCursor(id)
	testenv.EventuallyOK(t, 5*time.Second, "busy", func() (bool, string) {
		s := e.Show(id)
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy, string(s.Status) + "/" + string(s.Activity)
	})
	if _, errs, code := e.Ctl("send", id, "next"); code != 1 || !strings.Contains(errs, "is busy") {
		t.Errorf("send to a busy session: exit %d %q", code, errs)
	}
	if _, errs, code := e.Ctl("send", id, "  "); code != 1 || !strings.Contains(errs, "empty prompt") {
		t.Errorf("send of an empty prompt: exit %d %q", code, errs)
	}
	if _, errs, code := e.Ctl("send", "nosuch", "x"); code != 4 {
		t.Errorf("send to no session: exit %d %q, want 4", code, errs)
	}
	var q api.SendResponse
	e.CtlJSON(&q, "send", id, "--when-idle", "then commit")
	if q.Queued == nil || q.Delivered {
		t.Fatalf("--when-idle: %+v", q)
	}
	if out, _, _ := e.Ctl("sends"); !strings.Contains(out, q.Queued.ID) || !strings.Contains(out, "then commit") {
		t.Errorf("sends:\n%s", out)
	}
	if _, errs, code := e.Ctl("send", "--cancel", "nosuch"); code != 4 {
		t.Errorf("cancel of no send: exit %d %q", code, errs)
	}

	// The owner dies mid-turn: the queued prompt resumes the session.
	syscall.Kill(-r.Session.PID, syscall.SIGKILL)
	testenv.EventuallyOK(t, 10*time.Second, "the queued prompt delivered by a resume", func() (bool, string) {
		e.CtlJSON(&all, "sends", id, "--all")
		return len(all) == 1 && all[0].State == session.SendDelivered, strings.TrimSpace(func() string { o, _, _ := e.Ctl("sends", "--all"); return o }())
	})
	if !strings.HasPrefix(all[0].Via, "resumed as pid ") {
		t.Errorf("delivered via %q, want a resume", all[0].Via)
	}
	if _, errs, code := e.Ctl("send", "--cancel", q.Queued.ID); code != 1 || !strings.Contains(errs, "too late") {
		t.Errorf("cancel of a delivered send: exit %d %q", code, errs)
	}
}
