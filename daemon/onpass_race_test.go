package daemon

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// The first request a client sends once the daemon is ready may run a
// pass itself (an applied action reconciles at once), and a pass calls
// the tracker's OnPass hook. The hook must be in place before the API
// serves: set afterwards, it races with that pass. Run under -race (as
// CI does) this test fails if the hook is ever set after Serve again:
// nothing orders the two accesses but the socket, which the race detector
// does not count.
func TestOnPassSetBeforeServing(t *testing.T) {
	dir := shortDir(t)
	owner := exec.Command("sleep", "300")
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Process.Kill(); owner.Wait() })
	id, err := proc.NewHost().Identify(owner.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(dir, "state")
	seed(t, stateDir, &session.Record{ID: "0a5500000001", Agent: "claude", UpstreamID: "u-onpass", Status: session.StatusRunning,
		Activity: session.ActivityIdle, Owner: &id, CreatedAt: time.Now()})

	// No periodic pass and no exit events: the action's own pass is the
	// first one after startup, so no other goroutine's lock orders it
	// after the hook's assignment.
	r := startConfig(t, Config{StateDir: stateDir, Socket: filepath.Join(dir, "run", "s.sock"), Interval: time.Hour, NoExitEvents: true,
		Version: "test", Logger: zaptest.NewLogger(t)})
	res, err := r.client.Action(context.Background(), "0a55", "stop", api.ActionRequest{Timeout: "5s"})
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !res.Applied {
		t.Fatalf("stop not applied: %+v", res)
	}
}
