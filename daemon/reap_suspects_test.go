package daemon

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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

// orphanAdapter names, for one session, the processes it was given: an
// orphan with its Process, a suspect without.
type orphanAdapter struct {
	up      string
	orphans []adapters.Issue
}

func (orphanAdapter) Name() string { return "codex" }
func (a orphanAdapter) Discover(context.Context, *proc.Snapshot) (adapters.Observation, error) {
	return adapters.Observation{Sessions: []adapters.Observed{{UpstreamID: a.up, Problems: a.orphans}}}, nil
}
func (orphanAdapter) WatchPaths() []string { return nil }

// Reap signals the orphans an adapter attributes with their Process and
// never a suspect it names without one, however the suspect's detail
// reads; with only suspects left it says so.
func TestReapSparesSuspects(t *testing.T) {
	dir := t.TempDir()
	st, err := state.Open(filepath.Join(dir, "sessiond.db"), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	host := proc.NewHost()
	sleep := func() (*exec.Cmd, proc.Identity, chan struct{}) {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		id, err := host.Identify(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		return cmd, id, done
	}
	_, orphan, orphanDone := sleep()
	_, suspect, suspectDone := sleep()
	issue := func(id proc.Identity, withProcess bool, detail string) adapters.Issue {
		is := adapters.Issue{Kind: session.ProblemOrphanProcesses, Key: strconv.Itoa(id.PID), Detail: detail}
		if withProcess {
			is.Process = &id
		}
		return is
	}
	ad := &orphanAdapter{up: "up-1", orphans: []adapters.Issue{
		issue(orphan, true, "left behind"),
		issue(suspect, false, "carries the variable only: a suspect, not reaped"),
	}}

	now := time.Now()
	rec := &session.Record{ID: "rec000000002", Agent: "codex", UpstreamID: "up-1", Status: session.StatusInterrupted, Cwd: dir, CreatedAt: now}
	if err := st.Create(rec, session.Event{Type: session.EventCreated, To: rec.Status, Time: now}); err != nil {
		t.Fatal(err)
	}
	s := newServer(serverConfig{
		store: st, log: zap.NewNop(), version: "test", started: now, socket: filepath.Join(dir, "s.sock"), uid: os.Getuid(),
		tracker:    tracker.New(tracker.Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zap.NewNop()}),
		terminator: &actions.Terminator{Probe: host, Poll: 20 * time.Millisecond},
	})
	reap := func(body string) api.ActionResult {
		t.Helper()
		req := httptest.NewRequest("POST", "http://sessiond/v1/sessions/"+rec.ID+"/reap", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req = req.WithContext(context.WithValue(req.Context(), peerKey, peer{uid: os.Getuid()}))
		w := httptest.NewRecorder()
		s.handler().ServeHTTP(w, req)
		var res api.ActionResult
		if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != 200 {
			t.Fatalf("reap %s: %d %s", body, w.Code, w.Body.Bytes())
		}
		return res
	}

	res := reap(`{"apply":true,"timeout":"2s"}`)
	if len(res.Steps) != 1 || res.Steps[0].Outcome != session.OutcomeDone || !strings.Contains(res.Steps[0].Target, strconv.Itoa(orphan.PID)) {
		t.Fatalf("reap --apply steps %+v, want the orphan %d alone", res.Steps, orphan.PID)
	}
	select {
	case <-orphanDone:
	case <-time.After(5 * time.Second):
		t.Fatal("the orphan was not reaped")
	}
	select {
	case <-suspectDone:
		t.Fatal("reap signalled the suspect")
	case <-time.After(100 * time.Millisecond):
	}

	ad.orphans = ad.orphans[1:]
	res = reap(`{"apply":true,"timeout":"2s"}`)
	if len(res.Steps) != 1 || res.Steps[0].Outcome != session.OutcomeSkipped || !strings.Contains(res.Steps[0].Detail, "1 suspect") {
		t.Fatalf("reap with only a suspect: %+v", res.Steps)
	}
	if host.Probe(suspect).Liveness != proc.Alive {
		t.Fatal("reap signalled the suspect")
	}
}
