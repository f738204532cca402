package launch

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// tmuxPane is a pane of a tmux server of the test's own.
type tmuxPane struct {
	t      *testing.T
	socket string
	id     string
	pid    int
}

// newPane starts a tmux server with one pane running argv; the server is
// killed when the test ends. The socket path stays short (macOS caps
// socket paths at 104 bytes).
func newPane(t *testing.T, env []string, argv ...string) *tmuxPane {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed")
	}
	dir, err := os.MkdirTemp("", "tm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	p := &tmuxPane{t: t, socket: filepath.Join(dir, "s")}
	cmd := exec.Command("tmux", append([]string{"-S", p.socket, "-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "30", "-P", "-F", "#{pane_id} #{pane_pid}"}, argv...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tmux new-session: %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	f := strings.Fields(string(out))
	p.id = f[0]
	if p.pid, err = strconv.Atoi(f[1]); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *tmuxPane) capture() string {
	out, _ := exec.Command("tmux", "-S", p.socket, "capture-pane", "-p", "-t", p.id).Output()
	return string(out)
}

func (p *tmuxPane) keys(keys ...string) {
	p.t.Helper()
	if out, err := exec.Command("tmux", append([]string{"-S", p.socket, "send-keys", "-t", p.id}, keys...)...).CombinedOutput(); err != nil {
		p.t.Fatalf("send-keys: %v: %s", err, out)
	}
}

func (p *tmuxPane) pane() session.Pane { return session.Pane{Socket: p.socket, ID: p.id} }

func identify(t *testing.T, pid int) proc.Identity {
	t.Helper()
	id, err := proc.NewHost().Identify(pid)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func notHeld(err error) bool {
	var te *TypeError
	var nh *NotHeldError
	return errors.As(err, &te) && !te.Typed && errors.As(err, &nh)
}

// An agent in the foreground of its pane gets the text whole, multi-line
// through a bracketed paste, and Enter; the delivery's tmux buffer is
// gone after, and control characters never reach the pane.
func TestTypeIntoTheAgentsPane(t *testing.T) {
	out := filepath.Join(t.TempDir(), "got")
	p := newPane(t, nil, "sh", "-c", "exec cat > "+out)
	l := New(Config{Host: proc.NewHost()})
	owner := identify(t, p.pid)
	if err := l.Type(context.Background(), p.pane(), owner, "first line\nsecond\x1b[201~ line\r\nthird"); err != nil {
		t.Fatalf("Type: %v", err)
	}
	testenv.Eventually(t, 5*time.Second, "cat wrote the text", func() bool {
		b, _ := os.ReadFile(out)
		return strings.Count(string(b), "\n") >= 3
	})
	b, _ := os.ReadFile(out)
	if got := strings.ReplaceAll(string(b), "\r", "\n"); !strings.Contains(got, "first line\nsecond[201~ line\nthird") {
		t.Errorf("the pane got %q", b)
	}
	if bufs, _ := exec.Command("tmux", "-S", p.socket, "list-buffers").Output(); len(strings.TrimSpace(string(bufs))) != 0 {
		t.Errorf("buffers left behind: %s", bufs)
	}
}

// The agent in a shell's pane exited a moment before: the shell has the
// terminal back, and nothing is typed (a command typed there would run).
// The same when it is suspended, when it was never in this pane, and when
// its pid is another process now.
func TestTypeRefusesAPaneThatNoLongerHoldsTheAgent(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	marker := filepath.Join(t.TempDir(), "ran")
	p := newPane(t, []string{"PS1=$ ", "HISTFILE=/dev/null"}, "bash", "--norc", "--noprofile", "-i")
	testenv.Eventually(t, 5*time.Second, "the shell's prompt", func() bool { return strings.Contains(p.capture(), "$") })
	l := New(Config{Host: proc.NewHost()})
	typed := "touch " + marker
	host := proc.NewHost()

	agent := func() proc.Identity {
		p.keys("-l", "sleep 300")
		p.keys("Enter")
		var id proc.Identity
		testenv.Eventually(t, 5*time.Second, "the agent in the shell's foreground", func() bool {
			snap, err := host.Snapshot()
			if err != nil {
				return false
			}
			for _, c := range snap.Children(p.pid) {
				if len(c.Argv) > 0 && c.Argv[0] == "sleep" && c.State != 'Z' {
					id = c.Identity
					return true
				}
			}
			return false
		})
		return id
	}
	refused := func(what string, owner proc.Identity, want string) {
		t.Helper()
		err := l.Type(context.Background(), p.pane(), owner, typed)
		if !notHeld(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: Type = %v, want a refusal saying %q with nothing typed", what, err, want)
		}
		time.Sleep(300 * time.Millisecond)
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s: the shell ran the text typed into it", what)
		}
		if strings.Contains(p.capture(), "touch") {
			t.Fatalf("%s: the text reached the pane:\n%s", what, p.capture())
		}
	}

	// Exited a moment before.
	a := agent()
	if err := l.paneHeld(context.Background(), p.pane(), a); err != nil {
		t.Fatalf("the live agent in its pane: %v", err)
	}
	syscall.Kill(a.PID, syscall.SIGKILL)
	testenv.Eventually(t, 5*time.Second, "the agent gone", func() bool { return host.Probe(a).Liveness == proc.Dead })
	refused("the agent exited", a, "is gone")

	// Suspended (^Z): the shell has the terminal.
	a = agent()
	p.keys("C-z")
	testenv.Eventually(t, 5*time.Second, "the agent stopped", func() bool {
		st, err := host.Stat(a.PID)
		return err == nil && st.State == 'T'
	})
	refused("the agent suspended", a, "stopped")
	syscall.Kill(a.PID, syscall.SIGKILL)
	syscall.Kill(a.PID, syscall.SIGCONT)

	// A live process of no pane, and the shell itself (in the pane, but
	// not its terminal's foreground while a job runs).
	other := exec.Command("sleep", "300")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	refused("a process of no pane", identify(t, other.Process.Pid), "does not")
	a = agent()
	refused("the shell under a running job", identify(t, p.pid), "not in the foreground")
	syscall.Kill(a.PID, syscall.SIGKILL)

	// The owner's pid is another process now (same pid, other start).
	reused := identify(t, p.pid)
	reused.StartTicks++
	refused("a reused pid", reused, "is gone")
}
