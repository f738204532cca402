package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/lib/shell"
	"github.com/sessiond/sessiond/session"
)

// The pane of a session comes from its owner's TMUX and TMUX_PANE, and
// `sessionctl attach` takes a terminal there: from outside tmux by
// attaching, from another session of the same server by switching the
// client. Both are checked on a real tmux server, with a real client: an
// outer tmux server's pane plays the user's terminal.
func TestAttachPane(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (.ci/run installs it): attach not tested")
	}
	e, proj := launchEnv(t)
	os.Setenv("TMUX_TMPDIR", e.Dir) // the launch's tmux server is the test's own
	defer os.Unsetenv("TMUX_TMPDIR")
	e.StartDaemon("--claude-bin", fakeClaude(t))
	r, errs, code := e.launchJSON("launch", "--agent", "claude", "--cwd", proj, "--tmux", "--prompt", "hello")
	if code != 0 {
		t.Fatalf("launch --tmux: %d %s", code, errs)
	}
	id, name := r.Session.ID, "sessiond-"+r.Session.ID
	inner := filepath.Join(e.Dir, fmt.Sprintf("tmux-%d", os.Getuid()), "default")
	tmuxIn := func(args ...string) string {
		t.Helper()
		out, err := exec.Command("tmux", append([]string{"-S", inner}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", inner, "kill-server").Run() })
	paneID := tmuxIn("display-message", "-p", "-t", "="+name+":", "#{pane_id}")

	s := e.waitStatus(id, session.StatusRunning, 5*time.Second)
	testenv.EventuallyOK(t, 5*time.Second, "the session's pane is known", func() (bool, string) {
		s = e.Show(id)
		return s.Pane != nil, fmt.Sprintf("pane %+v", s.Pane)
	})
	if s.Pane.Socket != inner || s.Pane.ID != paneID {
		t.Fatalf("pane %+v, want %s of %s", *s.Pane, paneID, inner)
	}
	if human, _, _ := e.Ctl("show", id); !strings.Contains(human, "Pane:") || !strings.Contains(human, paneID) {
		t.Errorf("show lacks the pane:\n%s", human)
	}
	printed, errs, code := e.Ctl("attach", id, "--print")
	want := "tmux -S " + shell.Quote(inner) + ` select-window -t ` + shell.Quote(paneID) + ` \; select-pane -t ` + shell.Quote(paneID) + ` \; attach-session -t ` + shell.Quote(paneID)
	if code != 0 || strings.TrimSpace(printed) != want {
		t.Errorf("attach --print: exit %d %q %s\nwant %q", code, printed, errs, want)
	}
	if _, errs, code := e.Ctl("attach", id); code != 1 || !strings.Contains(errs, "needs a terminal") {
		t.Errorf("attach without a terminal: exit %d %q, want 1 and a clear error", code, errs)
	}

	// The user's terminal: a pane of another tmux server, outside tmux
	// as far as the command in it knows.
	outer := filepath.Join(e.Dir, "outer.sock")
	t.Cleanup(func() { exec.Command("tmux", "-S", outer, "kill-server").Run() })
	ctl := "env -u TMUX -u TMUX_PANE " + shell.Quote(e.Sessionctl) + " --socket " + shell.Quote(e.Socket)
	if out, err := exec.Command("tmux", "-S", outer, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40",
		ctl+" attach "+id+"; sleep 60").CombinedOutput(); err != nil {
		t.Fatalf("outer tmux: %v: %s", err, out)
	}
	client := func() (string, bool) {
		out, err := exec.Command("tmux", "-S", inner, "list-clients", "-F", "#{client_name} #{session_name} #{pane_id}").Output()
		f := strings.Fields(string(out))
		if err != nil || len(f) != 3 {
			return string(out), false
		}
		return strings.Join(f, " "), true
	}
	var c string
	testenv.EventuallyOK(t, 10*time.Second, "attach from outside tmux attached a client to the pane", func() (bool, string) {
		var ok bool
		c, ok = client()
		return ok && strings.HasSuffix(c, " "+name+" "+paneID), c
	})
	clientName := strings.Fields(c)[0]

	// From inside: the client goes to another session; attach there,
	// typed in that session's shell, switches it back.
	tmuxIn("new-session", "-d", "-s", "other", "-x", "120", "-y", "40", "bash --norc --noprofile -i")
	tmuxIn("switch-client", "-c", clientName, "-t", "=other")
	testenv.EventuallyOK(t, 5*time.Second, "the client is in the other session", func() (bool, string) {
		c, _ := client()
		return strings.Contains(c, " other "), c
	})
	tmuxIn("send-keys", "-t", "=other:", "-l", ctl[len("env -u TMUX -u TMUX_PANE "):]+" attach "+id)
	tmuxIn("send-keys", "-t", "=other:", "Enter")
	testenv.EventuallyOK(t, 10*time.Second, "attach inside tmux switched the client to the pane", func() (bool, string) {
		c, _ := client()
		return strings.HasSuffix(c, " "+name+" "+paneID), c + "\n" + tmuxIn("capture-pane", "-p", "-t", "=other:")
	})

	// Gone: the pane is forgotten with the session, and attach says so.
	tmuxIn("kill-session", "-t", "="+name)
	s = e.waitStatus(id, session.StatusStopped, 5*time.Second)
	if s.Pane != nil {
		t.Errorf("stopped with pane %+v", *s.Pane)
	}
	if _, errs, code := e.Ctl("attach", id); code != 1 || !strings.Contains(errs, "no pane to attach to") {
		t.Errorf("attach to a stopped session: exit %d %q", code, errs)
	}
}
