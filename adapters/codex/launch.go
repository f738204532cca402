package codex

import (
	"cmp"
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

// outputID finds the session id in `codex exec --json` output: its first
// event is {"type":"thread.started","thread_id":"<uuid>"} (0.169.0), so
// a headless launch is linked within a second, before the first turn.
var outputID = regexp.MustCompile(`"thread_id"\s*:\s*"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"`)

// launchRoot is the Codex home a launched codex writes to: the first
// configured root. The child gets it as CODEX_HOME so its rollout lands
// where the adapter reads.
func (a *Adapter) launchRoot() string { return filepath.Clean(a.cfg.Roots[0]) }

// env makes sure the home exists (Codex refuses a CODEX_HOME that does not,
// while without one it creates ~/.codex itself) and points the child at it.
func (a *Adapter) env(root string) (map[string]string, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("codex home %s: %w", root, err)
	}
	return map[string]string{"CODEX_HOME": root}, nil
}

// command builds, headless, `codex exec --json [args] PROMPT` (sub names a
// `codex exec` subcommand and its session: "resume ID", "fork ID") or, in
// tmux mode, the interactive TUI `codex [sub ID] [args] [PROMPT]`. Codex
// 0.169.0 takes its options before the positional id and prompt.
func (a *Adapter) command(spec adapters.LaunchSpec, root string, sub ...string) (adapters.Command, error) {
	env, err := a.env(root)
	if err != nil {
		return adapters.Command{}, err
	}
	argv := []string{a.cfg.Binary}
	var id []string
	if len(sub) == 2 {
		id = sub[1:]
	}
	if spec.Mode == "tmux" {
		if len(sub) > 0 {
			argv = append(argv, sub[0])
		}
		argv = append(append(argv, spec.Args...), id...)
		if spec.Prompt != "" {
			argv = append(argv, spec.Prompt)
		}
		return adapters.Command{Argv: argv, Cwd: spec.Cwd, Root: root, Env: env}, nil
	}
	if spec.Prompt == "" {
		return adapters.Command{}, errors.New("a headless codex session needs a prompt (or use tmux mode)")
	}
	argv = append(argv, "exec")
	if len(sub) > 0 {
		argv = append(argv, sub[0])
	}
	argv = append(append(append(argv, "--json"), spec.Args...), id...)
	return adapters.Command{Argv: append(argv, spec.Prompt), Cwd: spec.Cwd, Root: root, Env: env, OutputID: outputID}, nil
}

// NewCommand starts a new session. Codex picks the id (a UUIDv7) itself;
// a headless launch is linked from its output, a TUI by its rollout (its
// cwd and time: the TUI's own pid never holds the writer lock, Codex's
// app-server daemon does).
func (a *Adapter) NewCommand(spec adapters.LaunchSpec) (adapters.Command, error) {
	return a.command(spec, a.launchRoot())
}

// ResumeCommand continues cur's session with `resume ID`: checked on
// 0.169.0, the turn is appended to the same rollout, with the whole
// earlier history sent to the model, and the id stays. It runs from the
// recorded cwd (Codex runs a resumed turn in its own cwd, not the
// session's first one). An archived session Codex refuses to resume or
// fork ("run `codex unarchive`"): that is said before anything starts. A fork (`fork ID`) gets a new id and a new rollout that
// names the old one (forked_from_id), and runs from the requested cwd.
func (a *Adapter) ResumeCommand(cur session.ResumeCursor, spec adapters.LaunchSpec, fork bool) (adapters.Command, error) {
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	// One folder to read: Exists has just looked for the rollout everywhere.
	if path, _ := findIn(context.Background(), filepath.Join(root, "archived_sessions"), 0, cur.UpstreamID); path != "" {
		return adapters.Command{}, fmt.Errorf("codex session %s is archived: Codex refuses to resume or fork it until `codex unarchive %s`", cur.UpstreamID, cur.UpstreamID)
	}
	if !fork {
		spec.Cwd = cur.Cwd
		cmd, err := a.command(spec, root, "resume", cur.UpstreamID)
		cmd.UpstreamID, cmd.OutputID = cur.UpstreamID, nil
		return cmd, err
	}
	if spec.Cwd == "" {
		spec.Cwd = cur.Cwd
	}
	return a.command(spec, root, "fork", cur.UpstreamID)
}

// Exists looks for the cursor's rollout under sessions/YYYY/MM/DD/ and in
// archived_sessions/. A home or folder that cannot be read is Unknown,
// never Missing.
func (a *Adapter) Exists(ctx context.Context, cur session.ResumeCursor) (adapters.Existence, error) {
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	if _, err := os.Stat(root); err != nil {
		return adapters.ExistenceUnknown, fmt.Errorf("codex home %s: %w", root, err)
	}
	path, err := findRollout(ctx, root, cur.UpstreamID)
	switch {
	case path != "":
		return adapters.Exists, nil
	case err != nil:
		return adapters.ExistenceUnknown, fmt.Errorf("could not check every rollout folder of %s: %w", root, err)
	}
	return adapters.Missing, fmt.Errorf("no rollout of %s under %s (deleted?)", cur.UpstreamID, root)
}

// findRollout returns the path of id's rollout, under sessions/ or in
// archived_sessions/; "" when it is in neither, with the error of a folder
// it could not read.
func findRollout(ctx context.Context, root, id string) (string, error) {
	p, err := findIn(ctx, filepath.Join(root, "sessions"), 3, id)
	if p != "" {
		return p, nil
	}
	p, aerr := findIn(ctx, filepath.Join(root, "archived_sessions"), 0, id)
	if p != "" {
		return p, nil
	}
	return "", errors.Join(err, aerr)
}

// findIn looks for id's rollout in dir, depth folders down.
func findIn(ctx context.Context, dir string, depth int, id string) (string, error) {
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
		p := filepath.Join(dir, e.Name())
		if depth == 0 {
			if m := rolloutName.FindStringSubmatch(e.Name()); m != nil && m[2] == id {
				return p, nil
			}
			continue
		}
		if e.IsDir() {
			found, err := findIn(ctx, p, depth-1, id)
			if found != "" {
				return found, nil
			}
			unreadable = cmp.Or(unreadable, err)
		}
	}
	return "", unreadable
}
