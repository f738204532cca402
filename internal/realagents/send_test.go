package realagents

import (
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// sessionctl send against an interactive claude in a tmux pane, typed in
// as people run it: an idle session takes the prompt at once (the fake
// model receives it); a busy one refuses it, and --when-idle queues it in
// the store, where it survives a restart of sessiond (SIGKILL) and is
// delivered exactly once when the turn ends.
func TestClaudeSendIdleAndQueued(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.seedClaudeHome(w.proj())
	var mu sync.Mutex
	prompts := map[string]int{} // marker -> turns the model was asked to start with it
	script := markerScript(map[string]fakemodel.Reply{
		"SEND-1a5":   fakemodel.Say("Got it, marker SEND-1a5."),
		"SLOW-4c7":   fakemodel.RunCommand(`python3 -c "import time; time.sleep(12)"`, "Run the slow job", time.Minute),
		"QUEUED-9b2": fakemodel.Say("Got the queued one, marker QUEUED-9b2."),
	})
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		if n := len(r.Messages); n > 0 && len(r.Messages[n-1].ToolResults) == 0 {
			last := r.LastUserText()
			mu.Lock()
			for _, m := range []string{"SEND-1a5", "SLOW-4c7", "QUEUED-9b2"} {
				if strings.Contains(last, m) {
					prompts[m]++
				}
			}
			mu.Unlock()
		}
		return script(r)
	})
	asked := func(marker string) int {
		mu.Lock()
		defer mu.Unlock()
		return prompts[marker]
	}
	args := []string{"--claude-bin", bin, "--grace", "5s"}
	d := w.startDaemon(args...)
	w.step("daemon ready")

	p, _, reg := w.startClaudeInPane(bin)
	up := reg.SessionID
	diag := func() string { return compactScreen(p.capture()) }
	w.checkPane(up, p)
	s := w.waitUpstream(up, 15*time.Second, "running and idle before the first prompt", runningWith(session.ActivityIdle))
	id := s.ID
	w.step("claude idle in its pane")

	// Idle: delivered at once, into the pane; the model gets the turn.
	sent := time.Now()
	out, errs, code := w.Ctl("send", id, "Say hello, marker SEND-1a5")
	if code != 0 || !strings.Contains(out, "delivered to "+id+" via tmux pane "+p.ID) {
		t.Fatalf("send to the idle session: exit %d %q %s", code, out, errs)
	}
	w.waitFor(20*time.Second, "the model asked for the sent prompt's turn", func() (bool, string) {
		return asked("SEND-1a5") == 1, diag()
	})
	// Idle again since the send: the idle seen before the turn showed
	// busy does not count.
	w.waitUpstream(up, 20*time.Second, "idle after the sent turn", func(s api.Session) bool {
		return runningWith(session.ActivityIdle)(s) && s.ActivitySince != nil && s.ActivitySince.After(sent)
	})
	w.step("sent prompt delivered: the model got its turn")

	// Busy: refused; queued with --when-idle.
	if _, errs, code := w.Ctl("send", id, "Run the slow job, marker SLOW-4c7"); code != 0 {
		t.Fatalf("send the slow job: exit %d %s", code, errs)
	}
	w.waitUpstream(up, 30*time.Second, "busy with the slow job", runningWith(session.ActivityBusy))
	if _, errs, code := w.Ctl("send", id, "Too early"); code != 1 || !strings.Contains(errs, "is busy") || !strings.Contains(errs, "--when-idle") {
		t.Errorf("send to the busy session: exit %d %q, want 1 and why", code, errs)
	}
	var queued api.SendResponse
	w.CtlJSON(&queued, "send", id, "--when-idle", "Now the queued one, marker QUEUED-9b2")
	if queued.Delivered || queued.Queued == nil || queued.Queued.State != session.SendQueued {
		t.Fatalf("send --when-idle to the busy session: %+v", queued)
	}
	// A second one, cancelled: never delivered.
	var dropped api.SendResponse
	w.CtlJSON(&dropped, "send", id, "--when-idle", "Never this, marker DROPPED-0d1")
	if _, errs, code := w.Ctl("send", "--cancel", dropped.Queued.ID); code != 0 {
		t.Errorf("send --cancel: exit %d %s", code, errs)
	}
	var listed []session.Send
	w.CtlJSON(&listed, "sends", id)
	if len(listed) != 1 || listed[0].ID != queued.Queued.ID {
		t.Errorf("sends lists %+v, want only %s", listed, queued.Queued.ID)
	}
	w.step("busy: refused, then queued (and one cancelled)")

	// sessiond killed and started again while the turn runs: the queue
	// is in the store.
	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.Done
	w.startDaemon(args...)
	w.step("sessiond killed and restarted during the turn")
	if asked("QUEUED-9b2") != 0 {
		t.Fatalf("the queued prompt was delivered while the session was busy")
	}
	w.waitFor(60*time.Second, "the queued prompt delivered when the turn ended", func() (bool, string) {
		return asked("QUEUED-9b2") > 0, diag()
	})
	w.waitUpstream(up, 20*time.Second, "idle after the queued turn", runningWith(session.ActivityIdle))
	var all []session.Send
	w.CtlJSON(&all, "sends", id, "--all")
	states := map[string]session.SendState{}
	for _, x := range all {
		states[x.ID] = x.State
	}
	if states[queued.Queued.ID] != session.SendDelivered || states[dropped.Queued.ID] != session.SendCancelled {
		t.Errorf("after delivery: %+v", all)
	}
	time.Sleep(3 * time.Second) // passes enough to deliver again, if it would
	if n := asked("QUEUED-9b2"); n != 1 || asked("SLOW-4c7") != 1 || asked("SEND-1a5") != 1 {
		mu.Lock()
		t.Errorf("turns asked: %v; want each prompt once", prompts)
		mu.Unlock()
	}
	if strings.Contains(p.capture(), "DROPPED-0d1") {
		t.Errorf("the cancelled prompt reached the pane:\n%s", diag())
	}
	w.step("the queued prompt delivered once")
}
