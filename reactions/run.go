package reactions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/lib/tailbuf"
)

// killAfter is how long a hook past its limit has, after SIGTERM to its
// process group, before SIGKILL.
const killAfter = 2 * time.Second

// outputKept is how much of a hook's output is kept for the log.
const outputKept = 2048

// runHook returns the run of the executable at path: the change as JSON
// on stdin, the SESSIOND_* variables in its environment, the hooks
// directory as its working directory, in a process group of its own so
// that the limit reaches what it started too.
func (r *Reactor) runHook(path string) func(context.Context, *Change) (string, error) {
	return func(parent context.Context, c *Change) (string, error) {
		// Checked again now: the hook may have changed since it was
		// queued.
		if why := notRunnable(path); why != "" {
			return "", errors.New("not run: " + why)
		}
		payload, err := json.Marshal(c)
		if err != nil {
			return "", fmt.Errorf("encode the change: %w", err)
		}
		ctx, cancel := context.WithTimeout(parent, r.cfg.Timeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, path)
		cmd.Dir = r.cfg.HooksDir
		cmd.Stdin = bytes.NewReader(payload)
		out := &tailbuf.Buffer{Max: outputKept}
		cmd.Stdout, cmd.Stderr = out, out
		cmd.Env = hookEnv(os.Environ(), c, r.cfg.Socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		var kill *time.Timer
		cmd.Cancel = func() error {
			pgid := cmd.Process.Pid
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			kill = time.AfterFunc(killAfter, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
			return nil
		}
		// Output pipes a leftover child holds open do not hold the run
		// past the kill either.
		cmd.WaitDelay = killAfter
		err = cmd.Run()
		if kill != nil {
			kill.Stop()
			// The leader is reaped; what it started may linger in its
			// group, whose id cannot be reused while any member lives.
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		switch {
		case err == nil:
			return strings.TrimSpace(out.String()), nil
		case kill != nil && parent.Err() != nil:
			err = errors.New("stopped with sessiond")
		case kill != nil:
			err = fmt.Errorf("killed at its limit of %s", r.cfg.Timeout)
		case errors.Is(err, exec.ErrWaitDelay):
			err = fmt.Errorf("it exited, but a process it started kept its output open %s later (send a background job's output elsewhere)", killAfter)
		}
		output := strings.TrimSpace(out.String())
		if last := lastLine(output); last != "" {
			err = fmt.Errorf("%w: %s", err, last)
		}
		return output, err
	}
}

// lastLine is the last non-empty line of s, cut to 200 bytes.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// fileOwner is the uid owning the file fi describes.
func fileOwner(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
