package claude

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

// launchRoot is the config root a launched claude writes to: the first
// configured root, else the default one. The child gets it as
// CLAUDE_CONFIG_DIR so its data lands where the adapter reads.
func (a *Adapter) launchRoot() string {
	if len(a.cfg.Roots) > 0 && a.cfg.Roots[0] != "" {
		return cleanPath(a.cfg.Roots[0])
	}
	return a.cfg.DefaultRoot
}

// newUUID returns a random (version 4) UUID: Claude takes the session id
// up front with --session-id, so sessiond records it before launch.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// interactive adds what a mode needs: headless runs one prompt with
// stream-json output; tmux starts the interactive CLI, with the prompt as
// its first message when given.
func interactive(argv []string, spec adapters.LaunchSpec) ([]string, error) {
	if spec.Mode == "tmux" {
		if spec.Prompt != "" {
			argv = append(argv, spec.Prompt)
		}
		return append(argv, spec.Args...), nil
	}
	if spec.Prompt == "" {
		return nil, errors.New("a headless claude session needs a prompt (or use tmux mode)")
	}
	argv = append(argv, "-p", spec.Prompt, "--output-format", "stream-json", "--verbose")
	return append(argv, spec.Args...), nil
}

// NewCommand starts a new session with an id chosen here.
func (a *Adapter) NewCommand(spec adapters.LaunchSpec) (adapters.Command, error) {
	id := newUUID()
	argv, err := interactive([]string{a.cfg.Binary, "--session-id", id}, spec)
	if err != nil {
		return adapters.Command{}, err
	}
	root := a.launchRoot()
	return adapters.Command{Argv: argv, Cwd: spec.Cwd, UpstreamID: id, Root: root,
		Env: map[string]string{"CLAUDE_CONFIG_DIR": root}}, nil
}

// ResumeCommand continues cur's session. It runs from the recorded cwd, so
// tools keep running where the conversation left them. A fork
// (--fork-session, with an id chosen here) runs from the requested cwd:
// Claude Code 2.1.328 finds the session to resume under any project folder
// of the root, writes the fork into the project folder of its own cwd and
// runs its tools there (checked against the real CLI; see
// docs/agents/claude.md).
func (a *Adapter) ResumeCommand(cur session.ResumeCursor, spec adapters.LaunchSpec, fork bool) (adapters.Command, error) {
	argv := []string{a.cfg.Binary, "--resume", cur.UpstreamID}
	up, cwd := cur.UpstreamID, cur.Cwd
	if fork {
		up = newUUID()
		argv = append(argv, "--fork-session", "--session-id", up)
		if spec.Cwd != "" {
			cwd = spec.Cwd
		}
	}
	argv, err := interactive(argv, spec)
	if err != nil {
		return adapters.Command{}, err
	}
	return adapters.Command{Argv: argv, Cwd: cwd, UpstreamID: up, Root: cur.Root,
		Env: map[string]string{"CLAUDE_CONFIG_DIR": cur.Root}}, nil
}

// Exists looks for the cursor's transcript. Claude deletes transcripts
// older than cleanupPeriodDays at its start, so a cursor can outlive its
// session: that is Missing. A root or project folder that cannot be read
// is Unknown, never Missing.
func (a *Adapter) Exists(ctx context.Context, cur session.ResumeCursor) (adapters.Existence, error) {
	projects := filepath.Join(cur.Root, "projects")
	dirs, err := os.ReadDir(projects)
	if errors.Is(err, fs.ErrNotExist) {
		if _, rerr := os.Stat(cur.Root); rerr == nil {
			return adapters.Missing, fmt.Errorf("no transcript of %s: %s does not exist", cur.UpstreamID, projects)
		}
		return adapters.ExistenceUnknown, fmt.Errorf("config root %s: %w", cur.Root, err)
	}
	if err != nil {
		return adapters.ExistenceUnknown, fmt.Errorf("read %s: %w", projects, err)
	}
	name := cur.UpstreamID + ".jsonl"
	var unreadable error
	for _, d := range dirs {
		if ctx.Err() != nil {
			return adapters.ExistenceUnknown, ctx.Err()
		}
		if !d.IsDir() {
			continue
		}
		_, err := os.Stat(filepath.Join(projects, d.Name(), name))
		switch {
		case err == nil:
			return adapters.Exists, nil
		case !errors.Is(err, fs.ErrNotExist):
			unreadable = err
		}
	}
	if unreadable != nil {
		return adapters.ExistenceUnknown, fmt.Errorf("could not check every project folder: %w", unreadable)
	}
	return adapters.Missing, fmt.Errorf("no transcript %s under %s (Claude deletes old transcripts)", name, projects)
}
