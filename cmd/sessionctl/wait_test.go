package main

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// wait: a state already reached returns at once; one not reached times
// out with exit 5; a death during the wait ends it from the event
// stream with the session printed; --any returns on the first.
func TestWait(t *testing.T) {
	w := newWorld(t)

	out, errs, code := ctl("wait", stoppedID, "--until", "stopped")
	if code != exitOK || !strings.HasPrefix(out, stoppedID) {
		t.Fatalf("already stopped: exit %d: %q %s", code, out, errs)
	}
	start := time.Now()
	out, errs, code = ctl("wait", runningID, "--until", "stopped", "--timeout", "300ms")
	if code != exitTimeout || out != "" || !strings.Contains(errs, "timed out after 300ms") {
		t.Fatalf("timeout: exit %d: %q %q", code, out, errs)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("timed out after %s, before its 300ms", took)
	}
	if _, errs, code = ctl("wait", runningID, "--until", "soon"); code != exitUsage {
		t.Fatalf("--until soon: exit %d %s", code, errs)
	}
	if _, errs, code = ctl("wait", "ffffffffffff", "--until", "idle"); code != exitNotFound {
		t.Fatalf("unknown session: exit %d %s", code, errs)
	}

	// Both must stop; the victim's owner dies 300 ms in, the other never:
	// --any returns with the victim only.
	type result struct {
		out, errs string
		code      int
	}
	res := make(chan result, 1)
	go func() {
		o, e, c := ctl("--json", "wait", runningID, victimID, "--any", "--until", "stopped", "--timeout", "20s")
		res <- result{o, e, c}
	}()
	time.Sleep(300 * time.Millisecond)
	if err := syscall.Kill(w.victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	r := <-res
	if r.code != exitOK {
		t.Fatalf("--any: exit %d: %s", r.code, r.errs)
	}
	var s api.Session
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.out)), &s); err != nil || s.ID != victimID || !s.Status.Terminal() || strings.Count(r.out, "\n") != 1 {
		t.Fatalf("--any printed %q (%v)", r.out, err)
	}
	t.Logf("wait returned %s after the kill", time.Since(killed).Round(time.Millisecond))

	// change: the running session's activity moves when its owner dies.
	go func() {
		o, e, c := ctl("wait", runningID, "--until", "change", "--timeout", "20s")
		res <- result{o, e, c}
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case r := <-res:
		t.Fatalf("change returned before anything changed: %+v", r)
	default:
	}
	if err := syscall.Kill(w.owner.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if r = <-res; r.code != exitOK || !strings.Contains(r.out, string(session.StatusStopped)) {
		t.Fatalf("change: exit %d: %q %s", r.code, r.out, r.errs)
	}
}
