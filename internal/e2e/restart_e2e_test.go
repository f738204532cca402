package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// A restart trusts what the daemon saved of each transcript, and still
// tells the truth about everything that happened while it was down: an
// owner that died after its turn finished (stopped, not interrupted), a
// finished session that resumed and crashed mid tool call (interrupted), a
// transcript that appeared, one that vanished; after a clean stop and
// after a kill -9 alike.
func TestRestartTrustsSavedStateAndSeesWhatChanged(t *testing.T) {
	for _, stop := range []string{"sigterm", "sigkill"} {
		t.Run(stop, func(t *testing.T) {
			e := newEnv(t)
			root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
			cwd := filepath.Join(e.Home, "proj")
			if err := os.MkdirAll(cwd, 0o755); err != nil {
				t.Fatal(err)
			}
			// busy: mid tool call, its owner alive. done: finished long ago.
			// gone: finished, deleted while sessiond is down.
			busyID, doneID, goneID := claudetest.NewSessionID(), claudetest.NewSessionID(), claudetest.NewSessionID()
			owner, _ := daemontest.StartOwner(t)
			busy := claudetest.NewTranscript(busyID, cwd, time.Now().Add(-time.Minute))
			toolID := busy.CrashMidTool("run the tests", "go test ./...")
			busyPath := root.WriteTranscript(t, busy)
			regPath := root.WriteRegistry(t, claudetest.LiveEntry(t, owner.Process.Pid, busyID, cwd, "busy"))
			done := claudetest.NewTranscript(doneID, cwd, time.Now().Add(-2*time.Hour))
			done.Turn("old work", "make", "ok", "Done.")
			donePath := root.WriteTranscript(t, done)
			gone := claudetest.NewTranscript(goneID, cwd, time.Now().Add(-3*time.Hour))
			gone.Turn("older work", "ls", "", "ok")
			gonePath := root.WriteTranscript(t, gone)

			d := e.StartDaemon("--grace", "1s")
			if s := e.Show(busyID); s.Status != session.StatusRunning || s.Activity != session.ActivityBusy {
				t.Fatalf("busy before the restart: %s/%s (%s)", s.Status, s.Activity, s.StatusReason)
			}
			if s := e.Show(doneID); s.Status != session.StatusStopped {
				t.Fatalf("done before the restart: %s (%s)", s.Status, s.StatusReason)
			}
			if stop == "sigterm" {
				d.Cmd.Process.Signal(syscall.SIGTERM)
				<-d.Done
			} else {
				// The saves of the startup pass are done once the first
				// tick after ready has run; then kill it.
				time.Sleep(500 * time.Millisecond)
				d.Kill()
			}
			// What it saved is in the store: the restart will use it.
			st, err := state.Open(filepath.Join(e.StateDir, "sessiond.db"), state.Options{Timeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			saved, err := st.AdapterState("claude")
			st.Close()
			if err != nil || len(saved) != 3 || saved[busyPath] == nil || saved[donePath] == nil {
				t.Fatalf("saved transcript state: %d entries (%v)", len(saved), err)
			}

			// While it is down: the owner finishes its tool call and its
			// turn, then exits as claude does (its registry entry removed);
			// the finished session resumes and crashes mid tool call; one
			// transcript is deleted, one appears.
			n := len(busy.Bytes())
			busy.ToolResult(toolID, "ok").AssistantText("All tests pass.")
			appendBytes(t, busyPath, busy.Bytes()[n:])
			if err := os.Remove(regPath); err != nil {
				t.Fatal(err)
			}
			owner.Process.Kill()
			owner.Wait()
			n = len(done.Bytes())
			crashID := done.CrashMidTool("one more thing", "sleep 600")
			appendBytes(t, donePath, done.Bytes()[n:])
			if err := os.Remove(gonePath); err != nil {
				t.Fatal(err)
			}
			newID := claudetest.NewSessionID()
			fresh := claudetest.NewTranscript(newID, cwd, time.Now().Add(-time.Hour))
			fresh.Turn("new work", "ls", "", "ok")
			root.WriteTranscript(t, fresh)

			d = e.StartDaemon("--grace", "1s")
			// Right at ready (invariant 6): the dead owner is not running.
			if s := e.Show(busyID); s.Status == session.StatusRunning {
				t.Fatalf("a dead owner's session is running after the restart: %s", s.StatusReason)
			}
			var b, dn api.Session
			testenv.EventuallyOK(t, 5*time.Second, "after the restart, busy stopped and done interrupted", func() (bool, string) {
				b, dn = e.Show(busyID), e.Show(doneID)
				return b.Status == session.StatusStopped && dn.Status == session.StatusInterrupted,
					fmt.Sprintf("busy %s (%s), done %s (%s)", b.Status, b.StatusReason, dn.Status, dn.StatusReason)
			})
			if !hasProblem(dn, session.ProblemOrphanedToolCall, crashID) {
				t.Fatalf("the crash while down is not named: %+v", dn.Problems)
			}
			if hasProblem(b, session.ProblemOrphanedToolCall, toolID) {
				t.Fatalf("the answered tool call is still in flight: %+v", b.Problems)
			}
			if s := e.Show(newID); s.UpstreamID != newID {
				t.Fatalf("the transcript written while down is not listed: %+v", s)
			}
			// Only what changed was read again: the log says what was
			// restored, and the unusable count is zero.
			if !strings.Contains(d.Stderr.String(), `"transcripts": 3, "unusable": 0`) && !strings.Contains(d.Stderr.String(), `transcripts":3,"unusable":0`) {
				t.Fatalf("the restart did not restore the saved state:\n%s", d.Stderr.String())
			}
		})
	}
}

func appendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func hasProblem(s api.Session, kind session.ProblemKind, key string) bool {
	for _, p := range s.Problems {
		if p.Kind == kind && p.Key == key {
			return true
		}
	}
	return false
}
