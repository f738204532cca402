package e2e

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// Single writer under contention: twenty resumes of one stopped session,
// sent at once over the socket, start exactly one agent; the other nineteen
// are refused with 409 already_running. Two processes writing one
// conversation corrupt it, so the check and the launch must be one step.
func TestConcurrentResumesStartOne(t *testing.T) {
	e, proj := launchEnv(t)
	argvPath := filepath.Join(e.Dir, "argv.log")
	mark := "RESUME_RACE_MARK=" + e.Dir
	// Every agent the daemon starts sleeps in a tool for 300 s (so a
	// resumed one is still alive when the others are checked), unless its
	// request says otherwise; all carry the mark so cleanup finds them.
	e.Extra = append(e.Extra, "FAKE_CLAUDE_TOOL_SLEEP=300", "FAKE_AGENT_ARGV_LOG="+argvPath, mark)
	t.Cleanup(func() { daemontest.KillByEnv("RESUME_RACE_MARK", e.Dir) })
	e.StartDaemon("--claude-bin", fakeClaude(t))
	c := api.NewClient(e.Socket)
	ctx := context.Background()

	first, err := c.Launch(ctx, api.LaunchRequest{Agent: "claude", Cwd: proj, Prompt: "first turn",
		Env: map[string]string{"FAKE_CLAUDE_TOOL_SLEEP": ""}})
	if err != nil {
		t.Fatalf("launch: %v", err)
	}
	id := first.Session.ID
	e.waitStatus(id, session.StatusStopped, 5*time.Second)
	e.waitCursor(id)

	const n = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started []int
		refused int
		other   []error
	)
	gate := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			r, err := c.Resume(ctx, id, api.ResumeRequest{Prompt: "next turn"})
			mu.Lock()
			defer mu.Unlock()
			var se *api.StatusError
			switch {
			case err == nil:
				started = append(started, r.Session.PID)
			case errors.As(err, &se) && se.StatusCode == http.StatusConflict && se.Body.Code == api.CodeAlreadyRunning:
				refused++
			default:
				other = append(other, err)
			}
		}()
	}
	close(gate)
	wg.Wait()
	// The answer comes once the agent is started, not once it has run:
	// give the one resumed (and any wrongly started) time to log its argv
	// before it is killed, or a loaded machine sees only the launch.
	if len(started) > 0 {
		testenv.Eventually(t, 10*time.Second, "the resumed agent logs its argv", func() bool { return len(argvLog(t, argvPath)) >= 2 })
	}
	for _, pid := range started {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	if len(other) > 0 {
		t.Errorf("unexpected answers: %v", other)
	}
	if len(started) != 1 || refused != n-1 {
		t.Fatalf("%d resumes started (pids %v) and %d were refused with 409; want 1 and %d", len(started), started, refused, n-1)
	}
	// The agent itself ran once for the launch and once for the resume.
	if argvs := argvLog(t, argvPath); len(argvs) != 2 {
		t.Fatalf("the agent ran %d times, want 2 (the launch and one resume): %v", len(argvs), argvs)
	}
}
