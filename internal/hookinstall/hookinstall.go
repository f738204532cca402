// Package hookinstall puts `sessionctl hook <agent>` into an agent's hook
// configuration, and takes it out again leaving the file as it was.
//
// Claude Code reads command hooks from "hooks" in <config root>/settings.json
// and Codex from "hooks" in $CODEX_HOME/hooks.json, in the same shape:
//
//	{"hooks": {"<Event>": [{"matcher": "*", "hooks": [{"type": "command", "command": "…", "timeout": 5}]}]}}
//
// An install first keeps the file's exact bytes (or its absence) in
// <file>.sessiond-backup; an uninstall that finds the file as the install
// left it (the same document but for sessiond's entries) writes those
// bytes back, so the file is byte-identical to before. A file edited
// since loses only sessiond's entries, and the backup is kept.
package hookinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/sessiond/sessiond/internal/shell"
)

// Agent is where and how one agent reads command hooks.
type Agent struct {
	Name string
	// File is the hook file's name in the agent's root.
	File string
	// Events are the hook events sessiond takes: those that say busy,
	// waiting (a permission request, a question), the turn's end, the
	// session's end.
	Events []string
	// Matched are the events whose groups take a tool matcher; sessiond
	// matches every tool ("*").
	Matched map[string]bool
	// Timeout is written with each hook, in seconds: the agent's bound on
	// the hook (which answers within 100 ms anyway), at most what the
	// agent accepts without a warning.
	Timeout int
}

// Claude is Claude Code (2.1.328): settings.json of each config root.
var Claude = Agent{
	Name: "claude", File: "settings.json",
	Events: []string{"UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure",
		"Notification", "Stop", "SessionEnd"},
	Matched: map[string]bool{"PreToolUse": true, "PermissionRequest": true, "PostToolUse": true, "PostToolUseFailure": true},
	Timeout: 5,
}

// Codex is Codex (0.169.0): hooks.json of $CODEX_HOME. Codex runs a hook
// only once the user trusted it (it asks at the TUI's start).
var Codex = Agent{
	Name: "codex", File: "hooks.json",
	Events: []string{"UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop", "Interrupt", "SessionEnd"},
	// Codex clamps SessionEnd's and Interrupt's hook timeouts to 3 s,
	// with a warning in the TUI.
	Timeout: 3,
}

// For returns the agent of that name.
func For(name string) (Agent, error) {
	switch name {
	case "claude":
		return Claude, nil
	case "codex":
		return Codex, nil
	}
	return Agent{}, fmt.Errorf("no hooks for agent %q: claude and codex run command hooks", name)
}

// Command is the hook command for the agent: sessionctl at exe, talking
// to the daemon at socket.
func (a Agent) Command(exe, socket string) string {
	return shell.Quote(exe) + " --socket " + shell.Quote(socket) + " hook " + a.Name
}

// ours reports whether a hook command is sessiond's for this agent.
func (a Agent) ours(command string) bool {
	return strings.Contains(command, "sessionctl") && strings.HasSuffix(command, " hook "+a.Name)
}

// Plan is the change to one root's hook file.
type Plan struct {
	Path string
	// Before and After are the file's bytes; Existed and Exists say
	// whether it is there before and after.
	Before, After   []byte
	Existed, Exists bool
	// Note says what the change is, in words.
	Note string

	// backup is what Apply writes to BackupPath (install), or removes
	// from there (removeBackup: an uninstall that restored it).
	backup       []byte
	removeBackup bool
}

// Changed reports whether Apply writes anything.
func (p *Plan) Changed() bool {
	return p.Existed != p.Exists || !bytes.Equal(p.Before, p.After) || p.backup != nil || p.removeBackup
}

// BackupPath is where an install keeps the file as it was.
func BackupPath(path string) string { return path + ".sessiond-backup" }

// backupFile is the backup's format: the file's exact bytes, or that it
// did not exist.
type backupFile struct {
	Format  string `json:"sessiond_hooks_backup"`
	Existed bool   `json:"existed"`
	Content []byte `json:"content"`
}

const backupFormat = "1"

// Install plans putting command into every event of the root's file.
func (a Agent) Install(root, command string) (*Plan, error) {
	p, doc, err := a.read(root)
	if err != nil {
		return nil, err
	}
	orig := canon(doc)
	hooks, err := hooksOf(p.Path, doc)
	if err != nil {
		return nil, err
	}
	found := a.strip(hooks)
	for _, ev := range a.Events {
		list, _ := hooks[ev].([]any)
		group := map[string]any{"hooks": []any{map[string]any{"type": "command", "command": command, "timeout": a.Timeout}}}
		if a.Matched[ev] {
			group["matcher"] = "*"
		}
		hooks[ev] = append(list, group)
	}
	doc["hooks"] = hooks
	if p.Existed && reflect.DeepEqual(canon(doc), orig) {
		p.Note = "already installed"
		return p, nil
	}
	if err := p.encode(doc); err != nil {
		return nil, err
	}
	switch {
	case found == 0:
		// The file holds none of sessiond's hooks: it is the one to keep.
		b, err := json.Marshal(backupFile{Format: backupFormat, Existed: p.Existed, Content: p.Before})
		if err != nil {
			return nil, err
		}
		p.backup = b
		p.Note = fmt.Sprintf("add sessiond's hook to %d events; the file as it was is kept in %s", len(a.Events), BackupPath(p.Path))
	default:
		p.Note = fmt.Sprintf("replace sessiond's hook (%d entries) with this command", found)
	}
	return p, nil
}

// Uninstall plans taking sessiond's hooks out of the root's file: the
// backup's bytes when nothing else changed since the install, else the
// file without sessiond's entries.
func (a Agent) Uninstall(root string) (*Plan, error) {
	p, doc, err := a.read(root)
	if err != nil {
		return nil, err
	}
	if !p.Existed {
		p.Note = "no " + a.File + ": nothing to remove"
		return p, nil
	}
	hooks, err := hooksOf(p.Path, doc)
	if err != nil {
		return nil, err
	}
	found := a.strip(hooks)
	if found == 0 {
		p.Note = "no sessiond hook in it: nothing to remove"
		return p, nil
	}
	if len(hooks) == 0 {
		delete(doc, "hooks")
	} else {
		doc["hooks"] = hooks
	}
	bk, err := readBackup(p.Path)
	if err != nil {
		return nil, err
	}
	if bk != nil && sameDocument(doc, bk) {
		p.After, p.Exists, p.removeBackup = bk.Content, bk.Existed, true
		p.Note = "restore the file exactly as it was before the install (from " + BackupPath(p.Path) + ")"
		if !bk.Existed {
			p.After = nil
			p.Note = "remove the file: it did not exist before the install"
		}
		return p, nil
	}
	if err := p.encode(doc); err != nil {
		return nil, err
	}
	p.Note = fmt.Sprintf("remove sessiond's hook from %d entries", found)
	if bk != nil {
		p.Note += "; the file changed since the install, so it is not restored from " + BackupPath(p.Path) + " (kept)"
	}
	return p, nil
}

// read loads the root's hook file as a document ({} when absent).
func (a Agent) read(root string) (*Plan, map[string]any, error) {
	if fi, err := os.Stat(root); err != nil {
		return nil, nil, fmt.Errorf("%s root %s: %w", a.Name, root, err)
	} else if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%s root %s is not a directory", a.Name, root)
	}
	p := &Plan{Path: filepath.Join(root, a.File)}
	b, err := os.ReadFile(p.Path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return p, map[string]any{}, nil
	case err != nil:
		return nil, nil, err
	}
	p.Before, p.After, p.Existed, p.Exists = b, b, true, true
	doc := map[string]any{}
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, nil, fmt.Errorf("%s is not a JSON object (%v): fix or move it first; sessiond does not overwrite it", p.Path, err)
		}
	}
	return p, doc, nil
}

func (p *Plan) encode(doc map[string]any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	p.After, p.Exists = buf.Bytes(), true
	return nil
}

// hooksOf is the document's "hooks" object (a new one when absent).
func hooksOf(path string, doc map[string]any) (map[string]any, error) {
	switch h := doc["hooks"].(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return h, nil
	default:
		return nil, fmt.Errorf("%s: \"hooks\" is not an object; sessiond does not touch it", path)
	}
}

// strip removes sessiond's commands from every event, and the groups and
// events that leave empty; it returns how many it removed.
func (a Agent) strip(hooks map[string]any) int {
	n := 0
	for ev, v := range hooks {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		var keep []any
		for _, g := range list {
			group, ok := g.(map[string]any)
			inner, ok2 := group["hooks"].([]any)
			if !ok || !ok2 {
				keep = append(keep, g)
				continue
			}
			var rest []any
			for _, h := range inner {
				if hm, ok := h.(map[string]any); ok {
					if c, _ := hm["command"].(string); a.ours(c) {
						n++
						continue
					}
				}
				rest = append(rest, h)
			}
			if len(rest) == len(inner) {
				keep = append(keep, g)
			} else if len(rest) > 0 {
				group["hooks"] = rest
				keep = append(keep, group)
			}
		}
		if len(keep) == 0 {
			delete(hooks, ev)
		} else {
			hooks[ev] = keep
		}
	}
	return n
}

func readBackup(path string) (*backupFile, error) {
	b, err := os.ReadFile(BackupPath(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var bk backupFile
	if err := json.Unmarshal(b, &bk); err != nil || bk.Format != backupFormat {
		return nil, fmt.Errorf("%s is not a sessiond backup: move it away first", BackupPath(path))
	}
	return &bk, nil
}

// canon is doc as JSON reads it back (numbers as float64), for
// comparing documents.
func canon(doc map[string]any) map[string]any {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil
	}
	out := map[string]any{}
	_ = json.Unmarshal(b, &out)
	return out
}

// sameDocument: doc is the backup's document (an absent or blank file is
// the empty one).
func sameDocument(doc map[string]any, bk *backupFile) bool {
	old := map[string]any{}
	if bk.Existed && len(bytes.TrimSpace(bk.Content)) > 0 {
		if json.Unmarshal(bk.Content, &old) != nil {
			return false
		}
	}
	return reflect.DeepEqual(canon(doc), old)
}

// Apply writes the plan: the backup first (install), then the file, each
// through a temporary file renamed over it.
func (p *Plan) Apply() error {
	if p.backup != nil {
		if err := writeAtomic(BackupPath(p.Path), p.backup, 0o600); err != nil {
			return fmt.Errorf("keep %s: %w", p.Path, err)
		}
	}
	mode := fs.FileMode(0o644)
	if fi, err := os.Stat(p.Path); err == nil {
		mode = fi.Mode().Perm()
	}
	switch {
	case !p.Exists && p.Existed:
		if err := os.Remove(p.Path); err != nil {
			return err
		}
	case p.Exists && (!p.Existed || !bytes.Equal(p.Before, p.After)):
		if err := writeAtomic(p.Path, p.After, mode); err != nil {
			return err
		}
	}
	if p.removeBackup {
		if err := os.Remove(BackupPath(p.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func writeAtomic(path string, b []byte, mode fs.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
