package copilot

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/copilottest"
	"github.com/sessiond/sessiond/proc"
)

// startHolder starts a real process named copilot (argv[0]) that holds
// the session's inuse.<its pid>.hold open, as the CLI does, in cwd.
func startHolder(t *testing.T, s *copilottest.Session, cwd string) *exec.Cmd {
	t.Helper()
	return startNamed(t, s, cwd, "copilot")
}

// startNamed is startHolder with another argv[0].
func startNamed(t *testing.T, s *copilottest.Session, cwd, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("bash", "-c", `exec 3>"$0/inuse.$$.hold"; echo $$ > "$0/inuse.$$.lock"; exec -a "$1" sleep 60`, s.Dir, name)
	cmd.Dir = cwd
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

// passWith runs a pass over a fresh snapshot of the real process table
// once the holder's argv and descriptor show.
func passWith(t *testing.T, a *Adapter, pid int) map[string]adapters.Observed {
	t.Helper()
	host := proc.NewHost()
	deadline := time.Now().Add(5 * time.Second)
	for {
		snap, err := host.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		p := snap.Procs[pid]
		fds, _ := host.OpenFiles(pid)
		if pid == 0 || (p != nil && isNativeArgv(p.Argv) && strings.Contains(strings.Join(fds.Files, " "), ".hold")) || time.Now().After(deadline) {
			obs, err := a.Discover(context.Background(), snap)
			if err != nil {
				t.Fatal(err)
			}
			out := map[string]adapters.Observed{}
			for _, o := range obs.All() {
				out[o.UpstreamID] = o
			}
			return out
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The process holding a session's inuse.<pid>.hold open owns it, named by
// its own descriptor (not inferred), the owners exact; once it is gone
// (its files left as a kill -9 leaves them) nobody owns it, and a process
// in the same cwd that holds another session is no candidate.
func TestOwnerHoldsTheHoldFile(t *testing.T) {
	root := t.TempDir()
	cwd := t.TempDir()
	s := newSession(t, root, 1)
	s.Cwd = cwd
	must(t, s.Headless("Run the long job", "sleep 300", true))
	other := newSession(t, root, 2)
	other.Cwd = cwd
	must(t, other.Headless("Another", "echo", false))

	a := New(Config{Roots: []string{root}})
	h := startHolder(t, s, cwd)
	obs := passWith(t, a, h.Process.Pid)
	o := obs[s.ID]
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != h.Process.Pid || o.Owners[0].Inferred || o.OwnersExact == "" {
		t.Fatalf("owners %+v exact %q: want pid %d, named by its descriptor", o.Owners, o.OwnersExact, h.Process.Pid)
	}
	if len(obs[other.ID].Owners) != 0 || obs[other.ID].OwnersExact == "" {
		t.Fatalf("the other session of the same cwd: owners %+v", obs[other.ID].Owners)
	}
	h.Process.Signal(syscall.SIGKILL)
	h.Wait()
	o = passWith(t, a, 0)[s.ID]
	if len(o.Owners) != 0 || o.OwnersExact == "" || o.Activity != "busy" || len(o.InFlight) != 1 {
		t.Fatalf("after the kill: owners %+v, exact %q, %s, in flight %+v", o.Owners, o.OwnersExact, o.Activity, o.InFlight)
	}
}

// unreadableHost is the real host whose OpenFiles fails, as for another
// user's process.
type unreadableHost struct{ *proc.Host }

func (unreadableHost) OpenFiles(int) (proc.Descriptors, error) {
	return proc.Descriptors{}, errors.New("permission denied")
}

// Where a copilot's descriptors cannot be read, the owners are not exact:
// the pid an inuse.<pid>.lock names stands in, else a copilot in the
// session's cwd, inferred.
func TestOwnerWhenDescriptorsUnreadable(t *testing.T) {
	root := t.TempDir()
	cwd := t.TempDir()
	s := newSession(t, root, 1)
	s.Cwd = cwd
	must(t, s.Headless("Run the long job", "sleep 300", true))
	other := newSession(t, root, 2)
	other.Cwd = cwd
	must(t, other.Headless("Another", "sleep 300", true))
	old := time.Now().Add(-time.Minute)
	must(t, os.Chtimes(other.EventsPath(), old, old))
	must(t, os.Chtimes(other.Dir, old, old))
	a := New(Config{Roots: []string{root}, Host: unreadableHost{proc.NewHost()}})
	h := startHolder(t, s, cwd)
	obs := passWith(t, a, h.Process.Pid)
	o := obs[s.ID]
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != h.Process.Pid || o.Owners[0].Inferred || o.OwnersExact != "" ||
		!strings.Contains(o.Owners[0].Evidence, "inuse.") {
		t.Fatalf("named by its lock file: %+v exact %q", o.Owners, o.OwnersExact)
	}
	// The other session was last written before the holder started: it
	// did not write it, and is no candidate.
	if got := obs[other.ID].Owners; len(got) != 0 {
		t.Fatalf("a session written before the process started: owners %+v", got)
	}
	// A session written since, in its cwd, that no lock file names: the
	// holder is inferred.
	third := newSession(t, root, 3)
	third.Cwd = cwd
	third.At = time.Now()
	must(t, third.Headless("Third", "sleep 300", true))
	o = passWith(t, a, h.Process.Pid)[third.ID]
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != h.Process.Pid || !o.Owners[0].Inferred {
		t.Fatalf("inferred by cwd: %+v", o.Owners)
	}
}

// A live process that is not known as copilot (an SDK host, a renamed
// binary) but that the session's inuse.<pid>.lock names, started before
// the folder last changed, owns the session: named by the data, not
// exact. A process at a named pid that started after the folder last
// changed is not the one it names.
func TestOwnerNamedByTheLockFile(t *testing.T) {
	root := t.TempDir()
	cwd := t.TempDir()
	s := newSession(t, root, 1)
	s.Cwd = cwd
	must(t, s.Headless("Run the long job", "sleep 300", true))
	a := New(Config{Roots: []string{root}})
	h := startNamed(t, s, cwd, "my-copilot-host")
	var o adapters.Observed
	deadline := time.Now().Add(5 * time.Second)
	for {
		o = passWith(t, a, 0)[s.ID]
		if len(o.Owners) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != h.Process.Pid || o.Owners[0].Inferred || o.OwnersExact != "" ||
		!strings.Contains(o.Owners[0].Evidence, "not a process known as copilot") {
		t.Fatalf("owners %+v exact %q: want pid %d named by its lock file", o.Owners, o.OwnersExact, h.Process.Pid)
	}
	// The folder's last change before the process started: a pid of now
	// is not the one the file named.
	old := time.Now().Add(-time.Hour)
	must(t, os.Chtimes(s.Dir, old, old))
	b := New(Config{Roots: []string{root}})
	if o := passWith(t, b, 0)[s.ID]; len(o.Owners) != 0 {
		t.Fatalf("a process started after the lock file was written: owners %+v", o.Owners)
	}
	h.Process.Signal(syscall.SIGKILL)
	h.Wait()
	if o := passWith(t, a, 0)[s.ID]; len(o.Owners) != 0 || o.OwnersExact == "" {
		t.Fatalf("after the kill: owners %+v exact %q", o.Owners, o.OwnersExact)
	}
}
