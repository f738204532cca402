package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/proc"
)

// Owner is a real process standing in for a Claude Code process: a sleep
// with a registry entry naming it and a transcript, the way a running
// claude leaves them.
type Owner struct {
	Cmd       *exec.Cmd
	SessionID string
	Cwd       string
	done      chan struct{}
}

// pid is the owner's process id.
func (o *Owner) pid() int { return o.Cmd.Process.Pid }

// kill sends SIGKILL; the process is reaped in the background.
func (o *Owner) kill() error { return o.Cmd.Process.Signal(syscall.SIGKILL) }

// wait waits until the owner was reaped.
func (o *Owner) wait() { <-o.done }

// Owners starts and tracks owner processes for one config root.
type Owners struct {
	Root *claudetest.Root
	host *proc.Host

	mu   sync.Mutex
	list []*Owner
}

// NewOwners makes dir a config root (sessions/ and projects/).
func NewOwners(dir string) (*Owners, error) {
	for _, sub := range []string{"sessions", "projects"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	return &Owners{Root: &claudetest.Root{Dir: dir}, host: proc.NewHost()}, nil
}

// Start starts one owner in cwd with a finished turn in its transcript
// (so its death makes it stopped) and a registry entry with its true
// identity, and returns it.
func (ow *Owners) Start(cwd string) (*Owner, error) {
	cmd := exec.Command("sleep", "3600")
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start owner: %w", err)
	}
	o := &Owner{Cmd: cmd, SessionID: claudetest.NewSessionID(), Cwd: cwd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(o.done) }()
	ow.mu.Lock()
	ow.list = append(ow.list, o)
	ow.mu.Unlock()
	tr := claudetest.NewTranscript(o.SessionID, cwd, time.Now().Add(-time.Minute))
	tr.Turn("run the tests", "go test ./...", "ok", "All tests pass.")
	if _, err := ow.Root.WriteTranscriptFile(tr); err != nil {
		return o, err
	}
	e, err := claudetest.LiveEntryFor(ow.host, cmd.Process.Pid, o.SessionID, cwd, "idle")
	if err != nil {
		return o, err
	}
	_, err = ow.Root.WriteRegistryFile(e)
	return o, err
}

// adopt starts an owner for an existing session (its transcript already
// written), as a resume does: a live process and its true registry entry
// with the given status.
func (ow *Owners) adopt(sessionID, cwd, status string) (*Owner, error) {
	cmd := exec.Command("sleep", "3600")
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start owner: %w", err)
	}
	o := &Owner{Cmd: cmd, SessionID: sessionID, Cwd: cwd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(o.done) }()
	ow.mu.Lock()
	ow.list = append(ow.list, o)
	ow.mu.Unlock()
	e, err := claudetest.LiveEntryFor(ow.host, cmd.Process.Pid, sessionID, cwd, status)
	if err != nil {
		return o, err
	}
	_, err = ow.Root.WriteRegistryFile(e)
	return o, err
}

// KillAll kills every owner still running and waits for them.
func (ow *Owners) KillAll() {
	ow.mu.Lock()
	list := append([]*Owner(nil), ow.list...)
	ow.mu.Unlock()
	for _, o := range list {
		o.kill()
	}
	for _, o := range list {
		o.wait()
	}
}
