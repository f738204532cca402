package qwen

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

var _ adapters.Launcher = (*Adapter)(nil)

// launchRoot is the Qwen home a launched qwen writes to: the first
// configured root, handed to it as QWEN_HOME.
func (a *Adapter) launchRoot() string { return filepath.Clean(a.cfg.Roots[0]) }

// newID is a random UUID (version 4), as Qwen's --session-id wants.
func newID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// command builds `qwen <session> [args] -p PROMPT` (headless) or, in tmux
// mode, the TUI `qwen <session> [args] [-i PROMPT]`; session is
// `--session-id ID` for a new session, `--resume ID` for a resumed one.
func (a *Adapter) command(spec adapters.LaunchSpec, root string, session ...string) (adapters.Command, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return adapters.Command{}, fmt.Errorf("qwen home %s: %w", root, err)
	}
	argv := append(append([]string{a.cfg.Binary}, session...), spec.Args...)
	cmd := adapters.Command{Cwd: spec.Cwd, Root: root, Env: map[string]string{"QWEN_HOME": root}, UpstreamID: session[1]}
	if spec.Mode == "tmux" {
		if spec.Prompt != "" {
			argv = append(argv, "-i", spec.Prompt)
		}
		cmd.Argv = argv
		return cmd, nil
	}
	if spec.Prompt == "" {
		return adapters.Command{}, errors.New("a headless qwen session needs a prompt (or use tmux mode)")
	}
	cmd.Argv = append(argv, "-p", spec.Prompt)
	return cmd, nil
}

// NewCommand starts a new session with an id chosen here
// (--session-id), so the record is linked before Qwen writes a line.
func (a *Adapter) NewCommand(spec adapters.LaunchSpec) (adapters.Command, error) {
	return a.command(spec, a.launchRoot(), "--session-id", newID())
}

// ResumeCommand continues cur's session with `--resume ID`, from the
// recorded cwd: Qwen looks for the chat under that cwd's project folder,
// appends to it, and keeps the id (checked on 0.24.4). A fork
// (--fork-session) gets an id Qwen picks and says nowhere sessiond reads
// at the start, so it is refused rather than left unlinked.
func (a *Adapter) ResumeCommand(cur session.ResumeCursor, spec adapters.LaunchSpec, fork bool) (adapters.Command, error) {
	if fork {
		return adapters.Command{}, errors.New("forking a Qwen Code session is not supported: its new id could not be linked (resume it instead)")
	}
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	spec.Cwd = cur.Cwd
	return a.command(spec, root, "--resume", cur.UpstreamID)
}

// Exists looks for the cursor's chat under every project of its home. A
// home or folder that cannot be read is Unknown, never Missing.
func (a *Adapter) Exists(ctx context.Context, cur session.ResumeCursor) (adapters.Existence, error) {
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	if !validID(cur.UpstreamID) {
		return adapters.ExistenceUnknown, fmt.Errorf("not a Qwen session id: %q", cur.UpstreamID)
	}
	if _, err := os.Stat(root); err != nil {
		return adapters.ExistenceUnknown, fmt.Errorf("qwen home %s: %w", root, err)
	}
	projects := filepath.Join(root, "projects")
	ents, err := os.ReadDir(projects)
	if errors.Is(err, fs.ErrNotExist) {
		return adapters.Missing, fmt.Errorf("no chat of %s under %s (deleted?)", cur.UpstreamID, root)
	}
	if err != nil {
		return adapters.ExistenceUnknown, err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return adapters.ExistenceUnknown, err
		}
		if !e.IsDir() {
			continue
		}
		_, err := os.Stat(filepath.Join(projects, e.Name(), "chats", cur.UpstreamID+".jsonl"))
		switch {
		case err == nil:
			return adapters.Exists, nil
		case !errors.Is(err, fs.ErrNotExist):
			return adapters.ExistenceUnknown, err
		}
	}
	return adapters.Missing, fmt.Errorf("no chat of %s under %s (deleted?)", cur.UpstreamID, root)
}
