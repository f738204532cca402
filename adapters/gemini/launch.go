package gemini

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

var _ adapters.Launcher = (*Adapter)(nil)

// launchRoot is the data folder a launched gemini writes to: the first
// configured root.
func (a *Adapter) launchRoot() string { return a.roots[0].path }

// env points the child at root: Gemini CLI keeps its data in
// $GEMINI_CLI_HOME/.gemini, so a root named .gemini is reached through its
// parent. Another root cannot be named to Gemini CLI.
func env(root string) (map[string]string, error) {
	if filepath.Base(root) != ".gemini" {
		return nil, fmt.Errorf("gemini data folder %s: Gemini CLI keeps its data in <home>/.gemini, and this folder is not named .gemini", root)
	}
	return map[string]string{"GEMINI_CLI_HOME": filepath.Dir(root)}, nil
}

// command builds `gemini <flags> [args] -p PROMPT` (headless) or, in tmux
// mode, the TUI `gemini <flags> [args] [-i PROMPT]` (the prompt run, then
// interactive).
func (a *Adapter) command(spec adapters.LaunchSpec, root string, flags ...string) (adapters.Command, error) {
	e, err := env(root)
	if err != nil {
		return adapters.Command{}, err
	}
	argv := append(append([]string{a.cfg.Binary}, flags...), spec.Args...)
	if spec.Mode == "tmux" {
		if spec.Prompt != "" {
			argv = append(argv, "-i", spec.Prompt)
		}
		return adapters.Command{Argv: argv, Cwd: spec.Cwd, Root: root, Env: e}, nil
	}
	if spec.Prompt == "" {
		return adapters.Command{}, errors.New("a headless gemini session needs a prompt (or use tmux mode)")
	}
	return adapters.Command{Argv: append(argv, "-p", spec.Prompt), Cwd: spec.Cwd, Root: root, Env: e}, nil
}

// NewCommand starts a new session with an id chosen here (`--session-id`,
// 0.61.0), so the record is linked before Gemini CLI writes anything, and
// its argv names the session exactly.
func (a *Adapter) NewCommand(spec adapters.LaunchSpec) (adapters.Command, error) {
	id := newUUID()
	cmd, err := a.command(spec, a.launchRoot(), "--session-id", id)
	cmd.UpstreamID = id
	return cmd, err
}

// ResumeCommand continues cur's session with `--resume <id>` from its
// folder (Gemini CLI finds sessions by the folder's project): 0.61.0
// appends the turn to the session's chat. Gemini CLI has no fork.
func (a *Adapter) ResumeCommand(cur session.ResumeCursor, spec adapters.LaunchSpec, fork bool) (adapters.Command, error) {
	if fork {
		return adapters.Command{}, errors.New("Gemini CLI cannot fork a session: resume it instead")
	}
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	spec.Cwd = cur.Cwd
	cmd, err := a.command(spec, root, "--resume", cur.UpstreamID)
	cmd.UpstreamID = cur.UpstreamID
	return cmd, err
}

// Exists looks for a chat of the cursor's session under every project of
// its root: a session-*-<first 8 of the id>.jsonl (or .json) whose header
// names the id. A folder or chat that cannot be read is Unknown, never
// Missing.
func (a *Adapter) Exists(ctx context.Context, cur session.ResumeCursor) (adapters.Existence, error) {
	root := cur.Root
	if root == "" {
		root = a.launchRoot()
	}
	if len(cur.UpstreamID) < 8 {
		return adapters.ExistenceUnknown, fmt.Errorf("gemini session id %q is too short", cur.UpstreamID)
	}
	tmp := filepath.Join(root, "tmp")
	projects, err := os.ReadDir(tmp)
	if errors.Is(err, fs.ErrNotExist) {
		if _, rerr := os.Stat(root); rerr != nil {
			return adapters.ExistenceUnknown, fmt.Errorf("gemini data folder %s: %w", root, rerr)
		}
		return adapters.Missing, fmt.Errorf("no chat of %s under %s", cur.UpstreamID, root)
	}
	if err != nil {
		return adapters.ExistenceUnknown, err
	}
	var unreadable error
	suffix := "-" + cur.UpstreamID[:8]
	for _, p := range projects {
		if err := ctx.Err(); err != nil {
			return adapters.ExistenceUnknown, err
		}
		if !p.IsDir() {
			continue
		}
		dir := filepath.Join(tmp, p.Name(), "chats")
		ents, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			unreadable = err
			continue
		}
		for _, e := range ents {
			n := e.Name()
			if !isSessionFile(n) || !(strings.HasSuffix(n, suffix+".jsonl") || strings.HasSuffix(n, suffix+".json")) {
				continue
			}
			id, err := chatID(filepath.Join(dir, n))
			if err != nil {
				unreadable = err
				continue
			}
			if id == cur.UpstreamID {
				return adapters.Exists, nil
			}
		}
	}
	if unreadable != nil {
		return adapters.ExistenceUnknown, fmt.Errorf("could not read every chat of %s: %w", root, unreadable)
	}
	return adapters.Missing, fmt.Errorf("no chat of %s under %s (deleted?)", cur.UpstreamID, root)
}

// chatID is the session id a chat's first line (or a whole-file chat)
// names.
func chatID(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	var h struct {
		SessionID string `json:"sessionId"`
	}
	if strings.HasSuffix(path, ".json") {
		err = json.NewDecoder(f).Decode(&h)
		return h.SessionID, err
	}
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if err != nil && len(line) == 0 {
		return "", err
	}
	if err := json.Unmarshal(line, &h); err != nil {
		return "", nil // not a header: not this session's
	}
	return h.SessionID, nil
}

// newUUID is a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
