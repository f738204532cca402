package pi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

var _ adapters.Launcher = (*Adapter)(nil)

// outputID finds the session id in `pi -p --mode json` output: its first
// line is the session header (0.73.1), printed at the start, before the
// model is asked (the file itself appears only with the first reply).
var outputID = regexp.MustCompile(`"type":"session"[^\n]*?"id":"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"`)

// launchRoot is the agent dir a launched pi writes to: the first
// configured root, given to the child as PI_CODING_AGENT_DIR so its
// session lands where the adapter reads (the dir holds Pi's models.json
// and settings.json too: it is the user's Pi configuration).
func (a *Adapter) launchRoot() string { return filepath.Clean(a.cfg.Roots[0]) }

// command builds, headless, `pi -p --mode json [--session PATH | --fork
// PATH] [args] PROMPT`, or, in tmux mode, the TUI `pi [--session PATH |
// --fork PATH] [args] [PROMPT]`.
func (a *Adapter) command(spec adapters.LaunchSpec, root string, session ...string) (adapters.Command, error) {
	argv := []string{a.cfg.Binary}
	env := map[string]string{"PI_CODING_AGENT_DIR": root}
	if spec.Mode == "tmux" {
		argv = append(append(argv, session...), spec.Args...)
		if spec.Prompt != "" {
			argv = append(argv, spec.Prompt)
		}
		return adapters.Command{Argv: argv, Cwd: spec.Cwd, Root: root, Env: env}, nil
	}
	if spec.Prompt == "" {
		return adapters.Command{}, errors.New("a headless pi session needs a prompt (or use tmux mode)")
	}
	argv = append(append(append(argv, "-p", "--mode", "json"), session...), spec.Args...)
	return adapters.Command{Argv: append(argv, spec.Prompt), Cwd: spec.Cwd, Root: root, Env: env, OutputID: outputID}, nil
}

// NewCommand starts a new session; Pi picks its id (a UUIDv7), which a
// headless launch prints first.
func (a *Adapter) NewCommand(spec adapters.LaunchSpec) (adapters.Command, error) {
	return a.command(spec, a.launchRoot())
}

// ResumeCommand continues cur's session with `--session <its file>`
// (checked on 0.73.1: the turn is appended to the same file, the id
// stays), run from the recorded cwd; a fork (`--fork <file>`) is a new
// session, a new file whose header names the old one, run from the
// requested cwd. The file is named, not the id: Pi resolves an id by
// searching the project's sessions, then every project's.
func (a *Adapter) ResumeCommand(cur session.ResumeCursor, spec adapters.LaunchSpec, fork bool) (adapters.Command, error) {
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	path, err := findSession(context.Background(), root, cur.UpstreamID)
	if path == "" {
		if err == nil {
			err = fmt.Errorf("no session file of %s under %s", cur.UpstreamID, filepath.Join(root, "sessions"))
		}
		return adapters.Command{}, err
	}
	if !fork {
		spec.Cwd = cur.Cwd
		cmd, err := a.command(spec, root, "--session", path)
		cmd.UpstreamID, cmd.OutputID = cur.UpstreamID, nil
		return cmd, err
	}
	if spec.Cwd == "" {
		spec.Cwd = cur.Cwd
	}
	return a.command(spec, root, "--fork", path)
}

// Exists looks for the cursor's session file under sessions/. A root or
// folder that cannot be read is Unknown, never Missing.
func (a *Adapter) Exists(ctx context.Context, cur session.ResumeCursor) (adapters.Existence, error) {
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	if _, err := os.Stat(root); err != nil {
		return adapters.ExistenceUnknown, fmt.Errorf("pi agent dir %s: %w", root, err)
	}
	path, err := findSession(ctx, root, cur.UpstreamID)
	switch {
	case path != "":
		return adapters.Exists, nil
	case err != nil:
		return adapters.ExistenceUnknown, fmt.Errorf("could not check every session folder of %s: %w", root, err)
	}
	return adapters.Missing, fmt.Errorf("no session file of %s under %s (deleted?)", cur.UpstreamID, root)
}

// findSession returns the path of id's session file under
// root/sessions/*/, "" when there is none, with the error of a folder it
// could not read.
func findSession(ctx context.Context, root, id string) (string, error) {
	dir := filepath.Join(root, "sessions")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var unreadable error
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		if !e.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			unreadable = errors.Join(unreadable, err)
			continue
		}
		for _, f := range files {
			if m := sessionName.FindStringSubmatch(f.Name()); m != nil && m[2] == id {
				return filepath.Join(dir, e.Name(), f.Name()), nil
			}
		}
	}
	return "", unreadable
}
