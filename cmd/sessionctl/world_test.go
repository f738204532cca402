package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.Cleanup()
	os.Exit(code)
}

// The sessions a world's store starts with. runningID and stoppedID share
// the prefix 5e55, so "5e55" is ambiguous.
const (
	runningID = "5e55000000aa" // claude, running: its owner is a live sleep
	stoppedID = "5e55000000bb" // claude, stopped
	victimID  = "70b0000000cc" // claude, running: the one the tests stop
)

// world is a real sessiond (the built binary, daemontest) on a short
// socket, with its own HOME and state dir, that launches the fake claude;
// sessionctl's run talks to it in-process, as the command would.
type world struct {
	*daemontest.Env
	proj   string // a project directory under HOME
	owner  proc.Identity
	victim proc.Identity
}

func newWorld(t *testing.T) *world {
	t.Helper()
	e := daemontest.NewEnv(t)
	w := &world{Env: e, proj: filepath.Join(e.Home, "proj")}
	if err := os.MkdirAll(w.proj, 0o755); err != nil {
		t.Fatal(err)
	}
	// sessionctl reads its default socket from the environment, and shows
	// paths under HOME as ~.
	t.Setenv("HOME", e.Home)
	t.Setenv("SESSIOND_SOCKET", e.Socket)
	// What the daemon launches carries the mark, so it is killed at the
	// end however the test ends.
	e.Extra = append(e.Extra, "SESSIONCTL_TEST_MARK="+e.Dir)
	t.Cleanup(func() { daemontest.KillByEnv("SESSIONCTL_TEST_MARK", e.Dir) })
	_, w.owner = daemontest.StartOwner(t)
	_, w.victim = daemontest.StartOwner(t)
	now := time.Now()
	e.Seed(
		&session.Record{ID: runningID, Agent: "claude", UpstreamID: "11111111-2222-4333-8444-555555555555",
			Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &w.owner, Cwd: w.proj, CreatedAt: now},
		&session.Record{ID: stoppedID, Agent: "claude", UpstreamID: "22222222-3333-4444-8555-666666666666",
			Status: session.StatusStopped, Cwd: w.proj, CreatedAt: now},
		&session.Record{ID: victimID, Agent: "claude", UpstreamID: "33333333-4444-4555-8666-777777777777",
			Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &w.victim, Cwd: w.proj, CreatedAt: now},
	)
	e.StartDaemon("--claude-bin", e.FakeClaude)
	return w
}

// ctl runs sessionctl in-process with args, as typed after "sessionctl",
// and returns what it printed and its exit code.
func ctl(args ...string) (stdout, stderr string, code int) {
	var out, errs bytes.Buffer
	code = run(context.Background(), args, &out, &errs)
	return out.String(), errs.String(), code
}

// ctlJSON runs `sessionctl --json args...`, fails the test unless it exits
// 0, and decodes what it printed into v.
func ctlJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out, errs, code := ctl(append([]string{"--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("sessionctl --json %v: exit %d: %s", args, code, errs)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("sessionctl --json %v: %v\n%s", args, err, out)
	}
}
