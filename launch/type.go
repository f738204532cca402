package launch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/lib/printable"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// TypeError is a prompt that was not typed in whole. Typed says whether
// any of it reached the pane: when not, the pane is as it was and the
// prompt can be given again later; when so, some of it may sit in the
// agent's input.
type TypeError struct {
	Typed bool
	Err   error
}

func (e *TypeError) Error() string { return e.Err.Error() }
func (e *TypeError) Unwrap() error { return e.Err }

// NotHeldError is a check at the last moment that failed: the pane no
// longer holds the session's agent in its foreground.
type NotHeldError struct{ Reason string }

func (e *NotHeldError) Error() string { return e.Reason }

// Type types text into a tmux pane for its session's agent, owner, and
// presses Enter, as a person at the pane would: the text first (a
// bracketed paste when it has several lines, so its newlines do not
// submit it early), then Enter once the pane shows it changed. A TUI takes
// keys that arrive with the text as one paste, and an Enter inside a paste
// as a newline: sent together, the prompt would sit unsent.
//
// Right before the text goes in, and again right before Enter, Type
// checks that the pane still holds the agent (paneHeld): once the agent
// has exited or been suspended, the shell under it takes the keys, and
// Enter runs them. When a check fails, nothing more is sent and the
// error is a *TypeError wrapping a *NotHeldError.
//
// The text loses its control characters first (printable.Text): an ESC
// would end the bracketed paste early, a carriage return submit it.
// Multi-line text goes through a tmux buffer named for this delivery
// alone, deleted after, so two deliveries can never paste each other's.
func (l *Launcher) Type(ctx context.Context, p session.Pane, owner proc.Identity, text string) error {
	tmux, err := exec.LookPath(l.cfg.Tmux)
	if err != nil {
		return &TypeError{Err: &UsageError{fmt.Errorf("typing into a tmux pane needs tmux: %w", err)}}
	}
	ctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
	defer cancel()
	run := l.tmuxRunner(ctx, tmux, p.Socket)
	text = printable.Text(text)
	if strings.TrimSpace(text) == "" {
		return &TypeError{Err: errors.New("the prompt holds nothing printable")}
	}
	before, err := run("", "capture-pane", "-p", "-t", p.ID)
	if err != nil {
		return &TypeError{Err: fmt.Errorf("pane %s is gone: %w", p.ID, err)}
	}
	if err := l.checkPane(run, p, owner); err != nil {
		return &TypeError{Err: err}
	}
	if strings.Contains(text, "\n") {
		buf, err := deliveryBuffer(p)
		if err != nil {
			return &TypeError{Err: err}
		}
		if _, err := run(text, "load-buffer", "-b", buf, "-"); err != nil {
			_, _ = run("", "delete-buffer", "-b", buf)
			return &TypeError{Err: err}
		}
		if _, err := run("", "paste-buffer", "-p", "-d", "-b", buf, "-t", p.ID); err != nil {
			_, _ = run("", "delete-buffer", "-b", buf)
			// A paste that failed may have reached the pane in part.
			return &TypeError{Typed: true, Err: err}
		}
	} else if _, err := run("", "send-keys", "-t", p.ID, "-l", "--", text); err != nil {
		return &TypeError{Typed: true, Err: err}
	}
	for shown := false; !shown; {
		select {
		case <-ctx.Done():
			return &TypeError{Typed: true, Err: fmt.Errorf("pane %s never showed the text typed into it", p.ID)}
		case <-time.After(25 * time.Millisecond):
		}
		now, err := run("", "capture-pane", "-p", "-t", p.ID)
		shown = err == nil && now != before
	}
	// The screen shows the first of the text; let the TUI take the rest.
	time.Sleep(150 * time.Millisecond)
	if err := l.checkPane(run, p, owner); err != nil {
		return &TypeError{Typed: true, Err: fmt.Errorf("the prompt was typed but not submitted: %w", err)}
	}
	if _, err := run("", "send-keys", "-t", p.ID, "Enter"); err != nil {
		return &TypeError{Typed: true, Err: err}
	}
	return nil
}

// paneHeld says whether pane p holds owner now, as Type checks it before
// each key it sends: nil, or a *NotHeldError that says why not.
func (l *Launcher) paneHeld(ctx context.Context, p session.Pane, owner proc.Identity) error {
	tmux, err := exec.LookPath(l.cfg.Tmux)
	if err != nil {
		return &UsageError{fmt.Errorf("checking a tmux pane needs tmux: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
	defer cancel()
	return l.checkPane(l.tmuxRunner(ctx, tmux, p.Socket), p, owner)
}

type tmuxRun func(stdin string, args ...string) (string, error)

func (l *Launcher) tmuxRunner(ctx context.Context, tmux, socket string) tmuxRun {
	return func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, tmux, append([]string{"-S", socket}, args...)...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("tmux %s on %s: %v: %s", args[0], socket, err, bytes.TrimSpace(out))
		}
		return string(out), nil
	}
}

// maxPaneDepth bounds the walk from the agent up to its pane's process: a
// shell, a wrapper or two (npx, env) lie between, with room.
const maxPaneDepth = 32

// checkPane: the agent owner still lives with the same identity, is in
// the process tree of pane p (the pane's process or below it), has the
// pane's terminal as its own, and is that terminal's foreground process
// group: what a key typed into the pane reaches.
func (l *Launcher) checkPane(run tmuxRun, p session.Pane, owner proc.Identity) error {
	host := l.cfg.Host
	if host == nil || owner.IsZero() {
		return &NotHeldError{"the session has no owner process to check the pane against"}
	}
	out, err := run("", "display-message", "-p", "-t", p.ID, "#{pane_pid} #{pane_dead} #{pane_tty}")
	if err != nil {
		return &NotHeldError{fmt.Sprintf("pane %s is gone: %v", p.ID, err)}
	}
	f := strings.Fields(out)
	if len(f) != 3 {
		return &NotHeldError{fmt.Sprintf("pane %s: tmux said %q for its pid, state and terminal", p.ID, strings.TrimSpace(out))}
	}
	panePID, err := strconv.Atoi(f[0])
	if err != nil || panePID <= 0 {
		return &NotHeldError{fmt.Sprintf("pane %s: tmux gave pane_pid %q", p.ID, f[0])}
	}
	if f[1] == "1" {
		return &NotHeldError{fmt.Sprintf("pane %s's process has exited", p.ID)}
	}
	live, err := host.Identify(owner.PID)
	if err != nil || live != owner {
		return &NotHeldError{fmt.Sprintf("the session's agent (pid %d) is gone", owner.PID)}
	}
	st, err := host.Stat(owner.PID)
	if err != nil {
		return &NotHeldError{fmt.Sprintf("the session's agent (pid %d) is gone: %v", owner.PID, err)}
	}
	switch {
	case st.Exited(), st.State == 'x': // x: dead, as Linux 2.6.33 to 3.13 wrote it
		return &NotHeldError{fmt.Sprintf("the session's agent (pid %d) has exited", owner.PID)}
	case st.State == 'T', st.State == 't':
		return &NotHeldError{fmt.Sprintf("the session's agent (pid %d) is stopped (suspended): the shell has its terminal", owner.PID)}
	}
	if err := inTree(host, owner.PID, st.PPID, panePID); err != nil {
		return &NotHeldError{fmt.Sprintf("pane %s does not hold the session's agent: %v", p.ID, err)}
	}
	var tty unix.Stat_t
	if err := unix.Stat(f[2], &tty); err != nil {
		return &NotHeldError{fmt.Sprintf("pane %s's terminal %s: %v", p.ID, f[2], err)}
	}
	rdev := uint64(tty.Rdev)
	if unix.Major(rdev) != unix.Major(st.TTY) || unix.Minor(rdev) != unix.Minor(st.TTY) {
		return &NotHeldError{fmt.Sprintf("the session's agent (pid %d) does not run on pane %s's terminal %s", owner.PID, p.ID, f[2])}
	}
	if st.PGID <= 0 || st.TPGID != st.PGID {
		return &NotHeldError{fmt.Sprintf("the session's agent (pid %d) is not in the foreground of pane %s: process group %d has the terminal", owner.PID, p.ID, st.TPGID)}
	}
	return nil
}

// inTree walks from pid (whose parent is ppid) up to top.
func inTree(host ProcReader, pid, ppid, top int) error {
	for hops := 0; pid != top; hops++ {
		if ppid <= 1 || hops >= maxPaneDepth {
			return fmt.Errorf("pid %d is not below the pane's process %d", pid, top)
		}
		pid = ppid
		if pid == top {
			return nil
		}
		st, err := host.Stat(pid)
		if err != nil {
			return fmt.Errorf("pid %d, between the agent and the pane: %v", pid, err)
		}
		ppid = st.PPID
	}
	return nil
}

// deliveryBuffer names a tmux buffer for one delivery into pane p: tmux
// buffers are shared by every client of the server, so a name made of
// the pane alone let two deliveries overwrite each other's text.
func deliveryBuffer(p session.Pane) (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("name a tmux buffer: %w", err)
	}
	return "sessiond-" + strings.TrimPrefix(p.ID, "%") + "-" + hex.EncodeToString(b[:]), nil
}
