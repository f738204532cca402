package daemon

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/actions"
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// quietAdapter observes nothing; the test is about the store, not discovery.
type quietAdapter struct{}

func (quietAdapter) Name() string { return "claude" }
func (quietAdapter) Discover(context.Context, *proc.Snapshot) (adapters.Observation, error) {
	return adapters.Observation{}, nil
}
func (quietAdapter) WatchPaths() []string { return nil }

// An action that was carried out but whose event the store refused must
// not answer 200: the user would believe it recorded. It answers 500 with
// a code saying so, and still lists the steps that were carried out (here
// a real process really got SIGTERM), so nobody repeats it blindly.
func TestActionNotRecordedAnswersErrorWithSteps(t *testing.T) {
	dir := t.TempDir()
	st, err := state.Open(filepath.Join(dir, "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	owner := exec.Command("sleep", "30")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() { owner.Wait(); close(waited) }()
	t.Cleanup(func() { owner.Process.Kill(); <-waited })
	host := proc.NewHost()
	id, err := host.Identify(owner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := &session.Record{ID: "rec000000001", Agent: "claude", UpstreamID: "up-1", Status: session.StatusRunning, Cwd: dir, Owner: &id, CreatedAt: now}
	if err := st.Create(rec, session.Event{Type: session.EventCreated, To: rec.Status, Time: now}); err != nil {
		t.Fatal(err)
	}

	// The store fails between the signal and the record of the action: the
	// terminator closes it just before it sends.
	term := &actions.Terminator{Probe: host, Poll: 20 * time.Millisecond, Signal: func(pid int, sig syscall.Signal) error {
		st.Close()
		return syscall.Kill(pid, sig)
	}}
	s := newServer(serverConfig{
		store: st, log: zap.NewNop(), version: "test", started: now, socket: filepath.Join(dir, "s.sock"), uid: os.Getuid(),
		tracker:    tracker.New(tracker.Config{Store: st, Adapters: []adapters.Adapter{quietAdapter{}}, Host: host, Logger: zap.NewNop()}),
		terminator: term,
	})
	req := httptest.NewRequest("POST", "http://sessiond/v1/sessions/"+rec.ID+"/stop", strings.NewReader(`{"timeout":"2s"}`))
	req.Header.Set("Content-Type", "application/json")
	req = req.WithContext(context.WithValue(req.Context(), peerKey, peer{uid: os.Getuid()}))
	w := httptest.NewRecorder()
	s.handler().ServeHTTP(w, req)

	body := w.Body.Bytes()
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("stop whose event could not be recorded: status %d, want 500: %s", w.Code, body)
	}
	var e api.Error
	if err := json.Unmarshal(body, &e); err != nil || e.Code != api.CodeNotRecorded || !strings.Contains(e.Error, "sessiond.db") {
		t.Fatalf("error body %s (%v): want code %q and a message naming the store", body, err, api.CodeNotRecorded)
	}
	var res api.ActionResult
	if err := json.Unmarshal(body, &res); err != nil {
		t.Fatal(err)
	}
	// The SIGTERM first; then the cancel of the queued prompts, which the
	// closed store refuses too (and says so).
	if res.Action != "stop" || !res.Applied || len(res.Steps) != 2 || res.Steps[0].Outcome != session.OutcomeDone || res.Steps[0].Action != "SIGTERM" ||
		res.Steps[1].Outcome != session.OutcomeFailed {
		t.Fatalf("the answer does not list the SIGTERM that was sent: %s", body)
	}
	select {
	case <-waited:
	case <-time.After(5 * time.Second):
		t.Fatal("the owner was not stopped")
	}
}
