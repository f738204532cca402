package tracker

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// TestDriftNeverDecidesLiveness: a session whose data a newer Claude Code
// wrote in a form sessiond does not understand at all (every transcript
// line of an unknown type, a registry status unknown) is running while
// its owner lives, with a format_drift problem and an activity it cannot
// tell; once the owner is killed it is found dead. Read by the real
// adapter from real files; the owner a real process.
func TestDriftNeverDecidesLiveness(t *testing.T) {
	host := proc.NewHost()
	dir := t.TempDir()
	root := claudetest.NewRoot(t, filepath.Join(dir, "claude"))
	cwd := filepath.Join(dir, "w")
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
	for i := range 3 {
		tr.Add([]byte(fmt.Sprintf(`{"type":"turn-v2-%d","sessionId":%q,"cwd":%q,"version":"9.0.0","timestamp":%q}`, i, id, cwd, time.Now().UTC().Format(time.RFC3339Nano))))
	}
	root.WriteTranscript(t, tr)
	cmd, _ := startProcess(t, host)
	en := claudetest.LiveEntry(t, cmd.Process.Pid, id, cwd, "deliberating")
	en.Version = "9.0.0"
	root.WriteRegistry(t, en)

	st := openStore(t, filepath.Join(dir, "sessiond.db"))
	ad := claude.New(claude.Config{Roots: []string{root.Dir}, NoLearnedRoots: true})
	tr2 := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: host, Logger: zaptest.NewLogger(t)})
	pass := func() *session.Record {
		t.Helper()
		if _, err := tr2.Reconcile(context.Background(), "test"); err != nil {
			t.Fatal(err)
		}
		return get(t, st, id)
	}
	r := pass()
	if r.Status != session.StatusRunning || r.Owner == nil || r.Owner.PID != cmd.Process.Pid {
		t.Fatalf("live owner, data not understood: %s (%s)", r.Status, r.StatusReason)
	}
	if p := r.Problem(session.ProblemFormatDrift); p == nil || p.Key != "9.0.0" {
		t.Fatalf("no format_drift: %+v", r.Problems)
	}
	var kinds []string
	for _, a := range tr2.Stats().Adapters {
		for _, d := range a.Drift {
			kinds = append(kinds, fmt.Sprintf("%s %s %s %d", d.Version, d.Kind, d.Input, d.Inputs))
		}
	}
	if fmt.Sprint(kinds) != "[9.0.0 line_type transcript 1 9.0.0 status registry entry 1]" {
		t.Errorf("health drift: %v", kinds)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if r = pass(); !r.Status.Terminal() {
		t.Fatalf("owner killed: %s (%s)", r.Status, r.StatusReason)
	}
}
