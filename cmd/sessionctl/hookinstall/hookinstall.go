// Package hookinstall puts `sessionctl hook <agent>` into an agent's hook
// configuration, and takes it out again leaving the file as it was.
//
// Claude Code reads command hooks from "hooks" in <config root>/settings.json
// and Codex from "hooks" in $CODEX_HOME/hooks.json, in the same shape:
//
//	{"hooks": {"<Event>": [{"matcher": "*", "hooks": [{"type": "command", "command": "…", "timeout": 5}]}]}}
//
// So do Qwen Code, GitHub Copilot CLI and Gemini CLI from their
// settings.json (Gemini CLI's timeout in milliseconds: 5000).
//
// An install first keeps the file's exact bytes (or its absence) in
// <file>.sessiond-backup; an uninstall that finds the file as the install
// left it (the same document but for sessiond's entries) writes those
// bytes back, so the file is byte-identical to before. A file edited
// since loses only sessiond's entries, and the backup is kept.
//
// The file is a user's, so it is acted on safely: it is written through its
// symlinks (a settings.json kept in a dotfiles repository stays a link,
// the file it names gets the change); only the entries sessiond adds or
// takes out change, and every other byte, numbers beyond float64
// included, stays as it was (jsonedit.go); an event that is not an
// array is refused, not replaced; and right before the rename the file
// is checked to be as it was read, else nothing is written and Apply
// says so (ErrChanged).
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
	"slices"
	"strings"

	"github.com/sessiond/sessiond/agents"
	"github.com/sessiond/sessiond/lib/shell"
)

// Agent is where and how one agent reads command hooks: its name and
// its hooks' facts (package agents).
type Agent struct {
	Name string
	agents.Hooks
}

// All are the agents that run command hooks.
func All() []Agent {
	var out []Agent
	for _, ag := range agents.WithHooks() {
		out = append(out, Agent{ag.Name, *ag.Hooks})
	}
	return out
}

// For returns the agent of that name.
func For(name string) (Agent, error) {
	var names []string
	for _, a := range All() {
		if a.Name == name {
			return a, nil
		}
		names = append(names, a.Name)
	}
	list := strings.Join(names, ", ")
	if i := strings.LastIndex(list, ", "); i >= 0 {
		list = list[:i] + " and " + list[i+2:]
	}
	return Agent{}, fmt.Errorf("no hooks for agent %q: %s run command hooks", name, list)
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

	// target is the file written: Path, or the one its symlinks lead to;
	// info is what it was when read (nil: absent).
	target string
	info   fs.FileInfo
	// backup is what Apply writes to BackupPath (install), or removes
	// from there (removeBackup: an uninstall that restored it).
	backup       []byte
	removeBackup bool
}

// Changed reports whether Apply writes anything.
func (p *Plan) Changed() bool {
	return p.Existed != p.Exists || !bytes.Equal(p.Before, p.After) || p.backup != nil || p.removeBackup
}

// backupPath is where an install keeps the file as it was.
func backupPath(path string) string { return path + ".sessiond-backup" }

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
	after, found, err := a.edit(p.Path, doc, command)
	if err != nil {
		return nil, err
	}
	if p.Existed && sameJSON(after, p.Before) {
		p.Note = "already installed"
		return p, nil
	}
	p.After, p.Exists = after, true
	switch {
	case found == 0:
		// The file holds none of sessiond's hooks: it is the one to keep.
		b, err := json.Marshal(backupFile{Format: backupFormat, Existed: p.Existed, Content: p.Before})
		if err != nil {
			return nil, err
		}
		p.backup = b
		p.Note = fmt.Sprintf("add sessiond's hook to %d events; the file as it was is kept in %s", len(a.Events), backupPath(p.Path))
	default:
		p.Note = fmt.Sprintf("replace sessiond's hook (%d entries) with this command", found)
	}
	p.Note += p.through()
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
	after, found, err := a.edit(p.Path, doc, "")
	if err != nil {
		return nil, err
	}
	if found == 0 {
		p.Note = "no sessiond hook in it: nothing to remove"
		return p, nil
	}
	bk, err := readBackup(p.Path)
	if err != nil {
		return nil, err
	}
	if bk != nil && sameDocument(after, bk) {
		p.After, p.Exists, p.removeBackup = bk.Content, bk.Existed, true
		p.Note = "restore the file exactly as it was before the install (from " + backupPath(p.Path) + ")"
		if !bk.Existed {
			p.After = nil
			p.Note = "remove the file: it did not exist before the install"
		}
		p.Note += p.through()
		return p, nil
	}
	p.After = after
	p.Note = fmt.Sprintf("remove sessiond's hook from %d entries", found)
	if bk != nil {
		p.Note += "; the file changed since the install, so it is not restored from " + backupPath(p.Path) + " (kept)"
	}
	p.Note += p.through()
	return p, nil
}

// through says, when Path is a symlink, which file is written.
func (p *Plan) through() string {
	if p.target == p.Path {
		return ""
	}
	return "; " + p.Path + " is a symlink: the file written is " + p.target + ", the link stays"
}

// read loads the root's hook file, through its symlinks, as a document
// ({} when absent).
func (a Agent) read(root string) (*Plan, *document, error) {
	if fi, err := os.Stat(root); err != nil {
		return nil, nil, fmt.Errorf("%s root %s: %w", a.Name, root, err)
	} else if !fi.IsDir() {
		return nil, nil, fmt.Errorf("%s root %s is not a directory", a.Name, root)
	}
	p := &Plan{Path: filepath.Join(root, a.File)}
	target, err := resolve(p.Path)
	if err != nil {
		return nil, nil, err
	}
	p.target = target
	b, fi, err := readTarget(target)
	if err != nil {
		return nil, nil, err
	}
	if fi != nil {
		p.Before, p.After, p.Existed, p.Exists, p.info = b, b, true, true, fi
	}
	doc, err := parseDocument(b)
	if err != nil {
		return nil, nil, fmt.Errorf("%s is not a JSON object (%v): fix or move it first; sessiond does not overwrite it", p.Path, err)
	}
	return p, doc, nil
}

// edit is the document's bytes with sessiond's hooks taken out of every
// event and, when command is not "", a group of it added at the end of
// each of the agent's events; found is how many it took out. Only the
// containers it changes are rebuilt, so everything else keeps its bytes.
func (a Agent) edit(path string, d *document, command string) (after []byte, found int, err error) {
	root := d.root
	hi, count := root.member("hooks")
	if count > 1 {
		return nil, 0, fmt.Errorf("%s: \"hooks\" appears %d times: sessiond does not guess which the agent reads; merge them first", path, count)
	}
	var hooks *node
	if hi >= 0 {
		if hooks = root.kids[hi]; hooks.kind != '{' {
			return nil, 0, fmt.Errorf("%s: \"hooks\" is not an object; sessiond does not touch it", path)
		}
	}
	var events []item
	present := map[string]bool{}
	if hooks != nil {
		for i, ev := range hooks.keys {
			v := hooks.kids[i]
			// Any event twice, sessiond's or not: its entries may be
			// taken out of either, and which one the agent reads is not
			// sessiond's to guess.
			if _, n := hooks.member(ev); n > 1 {
				return nil, 0, fmt.Errorf("%s: the event %q appears %d times in \"hooks\": sessiond does not guess which the agent reads; merge them first", path, ev, n)
			}
			ours := command != "" && slices.Contains(a.Events, ev)
			if ours {
				present[ev] = true
			}
			if v.kind != '[' {
				if ours {
					return nil, 0, fmt.Errorf("%s: the event %q in \"hooks\" is not an array (it is %s): sessiond does not replace it; make it a list of hook groups first", path, ev, kindName(v))
				}
				events = append(events, d.keep(hooks, i))
				continue
			}
			groups, n := a.strip(d, v)
			found += n
			if ours {
				groups = append(groups, item{orig: -1, val: a.group(command, ev)})
			}
			switch {
			case n == 0 && !ours:
				events = append(events, d.keep(hooks, i))
			case len(groups) == 0:
				// Every group of it was sessiond's: the event goes.
			default:
				events = append(events, item{orig: i, text: string(d.src[hooks.kstart[i]:v.start]) + d.rebuild(v, groups)})
			}
		}
	}
	if command != "" {
		for _, ev := range a.Events {
			if !present[ev] {
				events = append(events, item{orig: -1, key: ev, val: []any{a.group(command, ev)}})
			}
		}
	}
	var top []item
	for i := range root.kids {
		switch {
		case i != hi:
			top = append(top, d.keep(root, i))
		case len(events) > 0 || found == 0:
			top = append(top, item{orig: i, text: string(d.src[root.kstart[i]:hooks.start]) + d.rebuild(hooks, events)})
		}
		// else: sessiond's hooks were all "hooks" held; it goes.
	}
	if hooks == nil && len(events) > 0 {
		obj := object{}
		for _, e := range events {
			obj = append(obj, member{e.key, e.val})
		}
		top = append(top, item{orig: -1, key: "hooks", val: obj})
	}
	out := string(d.src[:root.start]) + d.rebuild(root, top) + string(d.src[root.end:])
	return []byte(out), found, nil
}

// group is the hook group sessiond adds to an event.
func (a Agent) group(command, ev string) object {
	var g object
	if a.Matched[ev] {
		g = append(g, member{"matcher", "*"})
	}
	timeout := a.Timeout
	if a.TimeoutMillis {
		timeout *= 1000
	}
	hook := object{{"type", "command"}, {"command", command}, {"timeout", timeout}}
	return append(g, member{"hooks", []any{hook}})
}

// strip is an event's groups without sessiond's commands: a group left
// with none goes, one left with others is rebuilt without them. It
// returns how many it took out.
func (a Agent) strip(d *document, event *node) ([]item, int) {
	var keep []item
	n := 0
	for gi, g := range event.kids {
		hi := -1
		if g.kind == '{' {
			hi, _ = g.member("hooks")
		}
		if hi < 0 || g.kids[hi].kind != '[' {
			keep = append(keep, d.keep(event, gi))
			continue
		}
		inner := g.kids[hi]
		var rest []item
		for hk, h := range inner.kids {
			if h.kind == '{' {
				if ci, _ := h.member("command"); ci >= 0 && a.ours(d.str(h.kids[ci])) {
					n++
					continue
				}
			}
			rest = append(rest, d.keep(inner, hk))
		}
		switch {
		case len(rest) == len(inner.kids):
			keep = append(keep, d.keep(event, gi))
		case len(rest) > 0:
			keep = append(keep, item{orig: gi, text: d.splice(g, inner, d.rebuild(inner, rest))})
		}
	}
	return keep, n
}

func kindName(n *node) string {
	switch n.kind {
	case '{':
		return "an object"
	case '"':
		return "a string"
	}
	return "a number, true, false or null"
}

// decodeExact is a document's value with its numbers as written: two
// documents are the same when these are deeply equal. Blank is {}.
func decodeExact(b []byte) (any, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return map[string]any{}, nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// sameJSON: a and b hold the same document (the same numbers written the
// same way; blanks, key order and escapes aside).
func sameJSON(a, b []byte) bool {
	va, err1 := decodeExact(a)
	vb, err2 := decodeExact(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(va, vb)
}

func readBackup(path string) (*backupFile, error) {
	b, err := os.ReadFile(backupPath(path))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var bk backupFile
	if err := json.Unmarshal(b, &bk); err != nil || bk.Format != backupFormat {
		return nil, fmt.Errorf("%s is not a sessiond backup: move it away first", backupPath(path))
	}
	return &bk, nil
}

// sameDocument: after is the backup's document (an absent or blank file
// is the empty one). A file an earlier sessionctl installed into was
// re-encoded, its numbers through float64 (12345678901234567890 written
// back as 12345678901234567000, 1.0 as 1): read that way too, it is
// still the backup's, and restoring the backup gives the numbers back.
func sameDocument(after []byte, bk *backupFile) bool {
	if sameJSON(after, bk.Content) {
		return true
	}
	var a, b any = map[string]any{}, map[string]any{}
	if len(bytes.TrimSpace(after)) > 0 && json.Unmarshal(after, &a) != nil {
		return false
	}
	if len(bytes.TrimSpace(bk.Content)) > 0 && json.Unmarshal(bk.Content, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// Apply writes the plan: the backup first (install), then the file
// through its symlinks, each through a temporary file renamed over it.
// Right before the file is replaced (or removed) it is checked to be as
// it was read; if it is not, or the write fails, the backup is put back
// as it was and nothing else was written.
func (p *Plan) Apply() (err error) {
	if !p.Changed() {
		return nil
	}
	unlock, err := lockRoot(filepath.Dir(p.Path))
	if err != nil {
		return err
	}
	defer unlock()
	if err := p.unchanged(); err != nil {
		return err
	}
	if p.backup != nil {
		undo, kerr := keepBackup(backupPath(p.Path), p.backup)
		if kerr != nil {
			return fmt.Errorf("keep %s in %s: %w", p.Path, backupPath(p.Path), kerr)
		}
		defer func() {
			if err != nil {
				if uerr := undo(); uerr != nil {
					err = fmt.Errorf("%w; and putting %s back as it was failed: %v", err, backupPath(p.Path), uerr)
				}
			}
		}()
	}
	switch {
	case !p.Exists && p.Existed:
		if beforeReplace != nil {
			beforeReplace(p.target)
		}
		if err := p.unchanged(); err != nil {
			return err
		}
		if err := os.Remove(p.target); err != nil {
			return fmt.Errorf("remove %s: %w", p.target, err)
		}
	case p.Exists && (!p.Existed || !bytes.Equal(p.Before, p.After)):
		mode := fs.FileMode(0o644)
		if p.info != nil {
			mode = p.info.Mode().Perm()
		}
		if err := writeAtomic(p.target, p.After, mode, p.unchanged); err != nil {
			if errors.Is(err, errChanged) {
				return err
			}
			return fmt.Errorf("write %s: %w", p.target, err)
		}
	}
	if p.removeBackup {
		if err := os.Remove(backupPath(p.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the file is restored; removing its backup failed: %w", err)
		}
	}
	return nil
}

// keepBackup writes the backup, and returns how to put back what was
// there before (nothing, or an older backup).
func keepBackup(path string, b []byte) (undo func() error, err error) {
	old, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		undo = func() error { return os.Remove(path) }
	case err != nil:
		return nil, err
	default:
		undo = func() error { return writeAtomic(path, old, 0o600, nil) }
	}
	if err := writeAtomic(path, b, 0o600, nil); err != nil {
		return nil, err
	}
	return undo, nil
}
