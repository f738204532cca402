package launch

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/sessiond/sessiond/session"
)

// Type types text into a tmux pane and presses Enter, as a person at the
// pane would: the text first (a bracketed paste when it has several lines,
// so its newlines do not submit it early), then Enter once the pane shows
// it changed. A TUI takes keys that arrive with the text as one paste, and
// an Enter inside a paste as a newline: sent together, the prompt would
// sit unsent.
func (l *Launcher) Type(ctx context.Context, p session.Pane, text string) error {
	tmux, err := exec.LookPath(l.cfg.Tmux)
	if err != nil {
		return &UsageError{fmt.Errorf("typing into a tmux pane needs tmux: %w", err)}
	}
	ctx, cancel := context.WithTimeout(ctx, tmuxTimeout)
	defer cancel()
	run := func(stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, tmux, append([]string{"-S", p.Socket}, args...)...)
		if stdin != "" {
			cmd.Stdin = strings.NewReader(stdin)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("tmux %s on %s: %v: %s", args[0], p.Socket, err, bytes.TrimSpace(out))
		}
		return string(out), nil
	}
	before, err := run("", "capture-pane", "-p", "-t", p.ID)
	if err != nil {
		return fmt.Errorf("pane %s is gone: %w", p.ID, err)
	}
	if strings.Contains(text, "\n") {
		buf := "sessiond-" + p.ID[1:]
		if _, err := run(text, "load-buffer", "-b", buf, "-"); err != nil {
			return err
		}
		if _, err := run("", "paste-buffer", "-p", "-d", "-b", buf, "-t", p.ID); err != nil {
			return err
		}
	} else if _, err := run("", "send-keys", "-t", p.ID, "-l", "--", text); err != nil {
		return err
	}
	for shown := false; !shown; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("pane %s never showed the text typed into it", p.ID)
		case <-time.After(25 * time.Millisecond):
		}
		now, err := run("", "capture-pane", "-p", "-t", p.ID)
		shown = err == nil && now != before
	}
	// The screen shows the first of the text; let the TUI take the rest.
	time.Sleep(150 * time.Millisecond)
	_, err = run("", "send-keys", "-t", p.ID, "Enter")
	return err
}
