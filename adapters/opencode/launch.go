package opencode

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"

	"github.com/sessiond/sessiond/adapters/internal/paths"
)

var _ adapters.Launcher = (*Adapter)(nil)

// outputID finds the session id in `opencode run --format json` output.
var outputID = regexp.MustCompile(`"sessionI[Dd]"\s*:\s*"(ses_[A-Za-z0-9]+)"`)

func (a *Adapter) binary() string {
	if a.cfg.Binary != "" {
		return a.cfg.Binary
	}
	return "opencode"
}

// env points a launched opencode at the data dir the adapter reads: the
// data dir is $XDG_DATA_HOME/opencode.
func (a *Adapter) env() map[string]string {
	if filepath.Base(a.cfg.DataDir) == "opencode" {
		return map[string]string{"XDG_DATA_HOME": filepath.Dir(a.cfg.DataDir)}
	}
	return nil
}

// command builds a headless `opencode run --format json` or, in tmux
// mode, the interactive TUI.
func (a *Adapter) command(spec adapters.LaunchSpec, extra ...string) (adapters.Command, error) {
	var argv []string
	if spec.Mode == "tmux" {
		argv = append([]string{a.binary()}, extra...)
		if spec.Prompt != "" {
			argv = append(argv, "--prompt", spec.Prompt)
		}
	} else {
		if spec.Prompt == "" {
			return adapters.Command{}, errors.New("a headless opencode session needs a prompt (or use tmux mode)")
		}
		argv = append([]string{a.binary(), "run", "--format", "json"}, extra...)
		argv = append(argv, spec.Args...)
		// The message goes last, as `opencode run [message..]` takes it.
		return adapters.Command{Argv: append(argv, spec.Prompt), Cwd: spec.Cwd, Root: a.cfg.DataDir, Env: a.env(), OutputID: outputID}, nil
	}
	argv = append(argv, spec.Args...)
	return adapters.Command{Argv: argv, Cwd: spec.Cwd, Root: a.cfg.DataDir, Env: a.env(), OutputID: outputID}, nil
}

// NewCommand starts a new session. OpenCode picks the ses_ id itself, so
// the record is linked when its output or its database shows it.
func (a *Adapter) NewCommand(spec adapters.LaunchSpec) (adapters.Command, error) {
	return a.command(spec)
}

// ResumeCommand continues cur's session with -s (opencode validates the
// id and exits 1 on an unknown one); --fork copies its history into a new
// session. Both run from the recorded directory. Checked on OpenCode
// 1.18.33: a session, and a fork of it, always runs in the session's own
// directory (the fork's row gets the parent's directory, its tools run
// there), and `opencode run -s` started from any other directory does the
// turn there but prints nothing and never exits, as it waits on its own
// directory's instance. A fork into another directory is therefore
// refused with the reason rather than started in the wrong place.
func (a *Adapter) ResumeCommand(cur session.ResumeCursor, spec adapters.LaunchSpec, fork bool) (adapters.Command, error) {
	if spec.Cwd != "" && !paths.SameDir(spec.Cwd, cur.Cwd) {
		return adapters.Command{}, fmt.Errorf("opencode cannot move session %s to %s: a resume or fork of it always runs in its own directory %s; "+
			"resume it there (with --fork for a copy), or launch a new session in %s", cur.UpstreamID, spec.Cwd, cur.Cwd, spec.Cwd)
	}
	spec.Cwd = cur.Cwd
	extra := []string{"-s", cur.UpstreamID}
	if fork {
		extra = append(extra, "--fork")
	}
	cmd, err := a.command(spec, extra...)
	if err != nil {
		return cmd, err
	}
	if !fork {
		cmd.UpstreamID, cmd.OutputID = cur.UpstreamID, nil
	}
	return cmd, nil
}

// Exists answers from the databases, the legacy files, or a server.
func (a *Adapter) Exists(ctx context.Context, cur session.ResumeCursor) (adapters.Existence, error) {
	ex, err := a.exists(ctx, cur.UpstreamID)
	if ex == adapters.Missing && err == nil {
		err = errors.New("no such session in the database (OpenCode deleted it)")
	}
	return ex, err
}
