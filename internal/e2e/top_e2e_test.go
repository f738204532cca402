package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

// topWorld is five Claude sessions, one of each kind top orders: waiting
// for a permission, interrupted, busy, idle and stopped. Owners are real
// processes; the interrupted one's owner was killed.
type topWorld struct {
	root                              *claudetest.Root
	waiting, interr, busy, idle, done string
	idleEntry                         claudetest.Entry
	busyOwner                         *exec.Cmd
}

func newTopWorld(t *testing.T, e *env) *topWorld {
	w := &topWorld{root: claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))}
	at := time.Now().Add(-10 * time.Minute)
	session := func(folder, status string, midTool bool) (string, *exec.Cmd, claudetest.Entry) {
		cwd := filepath.Join(e.Home, folder)
		os.MkdirAll(cwd, 0o755)
		id := claudetest.NewSessionID()
		tr := claudetest.NewTranscript(id, cwd, at)
		if midTool {
			tr.CrashMidTool("run the tests in "+folder, "make test")
		} else {
			tr.Turn("look at "+folder, "ls", "README", "done")
		}
		w.root.WriteTranscript(t, tr)
		if status == "" {
			return id, nil, claudetest.Entry{}
		}
		owner, _ := daemontest.StartOwner(t)
		entry := claudetest.LiveEntry(t, owner.Process.Pid, id, cwd, status)
		if status == "waiting" {
			entry.WaitingFor = "permission prompt"
		}
		w.root.WriteRegistry(t, entry)
		return id, owner, entry
	}
	w.waiting, _, _ = session("api", "waiting", true)
	var dead *exec.Cmd
	w.interr, dead, _ = session("web", "busy", true)
	dead.Process.Kill()
	dead.Wait()
	w.busy, w.busyOwner, _ = session("infra", "busy", true)
	w.idle, _, w.idleEntry = session("docs", "idle", false)
	w.done, _, _ = session("old", "", false)
	return w
}

// startTop runs command (a sessionctl top) in a new tmux server of its
// own, in a window of width × height with e's environment, and returns a
// runner of tmux commands on that server; the server ends with the test.
func startTop(t *testing.T, e *env, width, height int, command string) func(args ...string) (string, error) {
	t.Helper()
	sock := filepath.Join(e.Dir, "tt.sock")
	tmux := func(args ...string) (string, error) {
		cmd := exec.Command("tmux", append([]string{"-S", sock}, args...)...)
		cmd.Env = append(e.Environ(), "TERM=xterm-256color")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := tmux("new-session", "-d", "-s", "top", "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), command); err != nil {
		t.Fatalf("tmux new-session: %v: %s", err, out)
	}
	t.Cleanup(func() { tmux("kill-server") })
	return tmux
}

// rowOrder is the line of each id on screen, -1 if absent.
func rowOrder(screen string, ids ...string) []int {
	lines := strings.Split(screen, "\n")
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = -1
		for n, l := range lines {
			if strings.Contains(l, id) {
				out[i] = n
				break
			}
		}
	}
	return out
}

func increasing(xs []int) bool {
	for i := range xs {
		if xs[i] < 0 || i > 0 && xs[i] <= xs[i-1] {
			return false
		}
	}
	return true
}

// TestTopInTmux drives a real `sessionctl top` in a real tmux pane and
// reads the screen with capture-pane: the order by attention, a change
// arriving by the event stream, the filter, the details, a stop with its
// plan and confirmation, and quitting. Not on a terminal, top prints
// the same order once.
func TestTopInTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (.ci/run installs it): top not tested")
	}
	e := newEnv(t)
	w := newTopWorld(t, e)
	e.StartDaemon()
	// From here on, sessiond's ids.
	for _, id := range []*string{&w.waiting, &w.interr, &w.busy, &w.idle, &w.done} {
		s := e.Show(*id)
		*id = s.ID
	}
	ids := func() []string { return []string{w.waiting, w.interr, w.busy, w.idle, w.done} }

	// Not a terminal: the table, once, in the same order.
	plain, errs, code := e.Ctl("top")
	if code != 0 || !strings.HasPrefix(plain, "ID ") || !increasing(rowOrder(plain, ids()...)) {
		t.Fatalf("top on a pipe (exit %d, %s): order %v\n%s", code, errs, rowOrder(plain, ids()...), plain)
	}
	var asJSON []api.Session
	e.CtlJSON(&asJSON, "top")
	if len(asJSON) != 5 || asJSON[0].ID != w.waiting || asJSON[4].ID != w.done {
		t.Errorf("top --json: %d sessions, first %v", len(asJSON), asJSON)
	}

	tmux := startTop(t, e, 180, 24, e.Sessionctl+" top")
	screen := func() string {
		out, err := tmux("capture-pane", "-p", "-t", "top")
		if err != nil {
			return "capture-pane: " + err.Error() + ": " + out
		}
		return out
	}
	keys := func(k ...string) {
		t.Helper()
		if out, err := tmux(append([]string{"send-keys", "-t", "top"}, k...)...); err != nil {
			t.Fatalf("send-keys %v: %v: %s", k, err, out)
		}
	}
	await := func(what string, ok func(string) bool) string {
		t.Helper()
		var s string
		testenv.EventuallyOK(t, 5*time.Second, what, func() (bool, string) {
			s = screen()
			return ok(s), s
		})
		return s
	}

	// filter types a filter as a person does: each key once the screen
	// shows the last one taken (keys sent before the view reads the one
	// before may arrive in one read, and an escape with them).
	filter := func(text string) {
		t.Helper()
		keys("/")
		await("the filter prompt", func(s string) bool { return strings.Contains(s, "filter: ▏") })
		keys("-l", text)
		await("the filter typed", func(s string) bool { return strings.Contains(s, "filter: "+text+"▏") })
		keys("Enter")
		await("the filter kept", func(s string) bool { return strings.Contains(s, `filter "`+text+`"`) })
	}

	first := await("all five sessions, by attention", func(s string) bool { return increasing(rowOrder(s, ids()...)) })
	if !strings.Contains(first, "waiting: permission") || !strings.Contains(first, "interrupted") ||
		!strings.Contains(first, "1 waiting, 1 interrupted, 1 busy, 1 idle, 1 stopped") {
		t.Errorf("first screen:\n%s", first)
	}
	t.Logf("top:\n%s", first)

	// The idle session starts waiting: the event stream moves it up,
	// behind the one that has waited longer.
	w.idleEntry.Status, w.idleEntry.WaitingFor = "waiting", "input needed"
	w.idleEntry.StatusUpdatedAt = time.Now().UnixMilli()
	w.root.WriteRegistry(t, w.idleEntry)
	await("the idle session moved among the waiting", func(s string) bool {
		return increasing(rowOrder(s, w.waiting, w.idle, w.interr, w.busy, w.done))
	})

	// Filter down to the busy session, show it, stop it.
	filter("infra")
	await("only the busy session", func(s string) bool {
		o := rowOrder(s, ids()...)
		return o[2] >= 0 && o[0] < 0 && o[1] < 0 && o[3] < 0 && o[4] < 0
	})
	keys("Enter")
	await("its details", func(s string) bool { return strings.Contains(s, "Problems:") && strings.Contains(s, w.busy) })
	keys("Escape")
	await("the list again", func(s string) bool { return strings.Contains(s, "STATE") })
	keys("S")
	await("the stop plan", func(s string) bool {
		return strings.Contains(s, fmt.Sprintf("SIGTERM to owner pid %d", w.busyOwner.Process.Pid)) && strings.Contains(s, "y carry it out")
	})
	exited := make(chan error, 1)
	go func() { exited <- w.busyOwner.Wait() }()
	keys("y")
	select {
	case err := <-exited:
		ws, _ := w.busyOwner.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
			t.Errorf("the owner ended with %v, want SIGTERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the owner still runs after y:\n%s", screen())
	}
	stopped := await("the stop's result and the row interrupted", func(s string) bool {
		return strings.Contains(s, "stop "+w.busy+": ") && strings.Contains(s, "interrupted  ")
	})
	t.Logf("after stop:\n%s", stopped)

	// Esc clears the filter. A repair of the interrupted session shows
	// sessiond's plan (a dry run), and any key but y cancels it.
	keys("Escape")
	await("all five again", func(s string) bool { return rowOrder(s, w.done)[0] >= 0 })
	filter("web")
	keys("r")
	await("the repair plan", func(s string) bool {
		return strings.Contains(s, "repair "+w.interr+": [ ]") && strings.Contains(s, "y carry it out")
	})
	keys("n")
	await("the repair cancelled", func(s string) bool { return strings.Contains(s, "repair cancelled") })
	// Reap asks sessiond for its plan too: with no orphan processes it
	// says there is nothing to reap.
	keys("R")
	await("the reap plan", func(s string) bool {
		return strings.Contains(s, "reap "+w.interr+": [-] nothing to reap") && strings.Contains(s, "y carry it out")
	})
	keys("n")
	await("the reap cancelled", func(s string) bool { return strings.Contains(s, "reap cancelled") })

	// Abort of the waiting session: its plan, then cancelled.
	keys("Escape")
	await("the filter cleared", func(s string) bool { return rowOrder(s, w.done)[0] >= 0 })
	filter("api")
	keys("A")
	await("the abort plan", func(s string) bool {
		return strings.Contains(s, "abort the turn in progress of claude pid") && strings.Contains(s, "y carry it out")
	})
	keys("n")
	await("the abort cancelled", func(s string) bool { return strings.Contains(s, "abort cancelled") })

	// A prompt to the waiting session is queued until it is idle.
	keys("Escape") // alone: ESC and a key at once read as alt+key
	await("the filter cleared", func(s string) bool { return rowOrder(s, w.done)[0] >= 0 })
	filter("docs")
	keys("s")
	await("the prompt line", func(s string) bool { return strings.Contains(s, "send to "+w.idle+": ") })
	keys("-l", "go on")
	keys("Enter")
	await("the prompt queued", func(s string) bool { return strings.Contains(s, "until "+w.idle+" is idle") })
	if out, _, _ := e.Ctl("sends", w.idle); !strings.Contains(out, "go on") || !strings.Contains(out, "queued") {
		t.Errorf("sessionctl sends after top's send:\n%s", out)
	}
	keys("Escape")
	keys("q")
	testenv.EventuallyOK(t, 5*time.Second, "top quit", func() (bool, string) {
		out, err := tmux("has-session", "-t", "top")
		return err != nil, out
	})
}
