package gemini

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// rootState is what the adapter knows of one Gemini CLI data folder.
type rootState struct {
	path  string
	files map[string]*fileState // by path
	dirs  kit.Dirs              // listed folders, by path
	// paths and due are the last pass's chats and those it read, kept
	// for the next pass to fill.
	paths, due []string
	// folders are the project folders projects.json names, by the short
	// name of their tmp/ folder; byHash the same folders by their hash.
	folders map[string]string
	byHash  map[string]string
	// roots are the folders tmp/<project>/.project_root names.
	roots         map[string]string
	projectsMtime time.Time
	projectsSize  int64
	projectsErr   error
}

func newRoot(path string) *rootState {
	return &rootState{path: path, files: map[string]*fileState{}, dirs: kit.Dirs{},
		folders: map[string]string{}, byHash: map[string]string{}, roots: map[string]string{}}
}

// fileState is what the adapter knows of one chat file.
type fileState struct {
	path    string
	project string // the tmp/ folder's name
	// parent is the parent session id of a subagent's chat (the name of
	// the folder under chats/ it is in); whole is a .json chat.
	parent string
	whole  bool

	read     bool
	size     int64
	mtime    time.Time
	readAt   time.Time
	dev, ino uint64
	offset   int64
	c        chat
	// err is why a whole-file chat could not be used (not JSON, too
	// large): a warning; the last good read stands.
	err error
	// gen changes with every read (checkpoint.go saves what changed).
	gen uint64
}

// Chat file names: session-<time>-<id8>.jsonl (and .json, older), and a
// subagent's <session id>.jsonl.
func isSessionFile(name string) bool {
	return strings.HasPrefix(name, "session-") && (strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".json"))
}

// Discover implements adapters.Adapter.
func (a *Adapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	full := a.rescan.Due(now, a.cfg.FullRescan)
	procs := a.findProcs(snap)
	hot := map[string]bool{}
	for _, p := range procs {
		hot[p.hash] = true
	}
	var obs adapters.Observation
	var looked []*rootState
	var rootErrs []error
	for _, r := range a.roots {
		if err := ctx.Err(); err != nil {
			return adapters.Observation{}, fmt.Errorf("gemini discover: %w", err)
		}
		errs, ok := a.scanRoot(r, full, now, hot)
		obs.Errors = append(obs.Errors, errs...)
		if !ok {
			for _, e := range errs {
				rootErrs = append(rootErrs, e)
			}
			continue
		}
		looked = append(looked, r)
	}
	if len(looked) == 0 && len(a.roots) > 0 {
		a.inputs.Report(obs.Errors)
		return adapters.Observation{}, fmt.Errorf("gemini: no Gemini CLI data folder could be read: %w", errors.Join(rootErrs...))
	}
	if full {
		// Every chat was listed: a saved entry not taken by now has no
		// file any more (the next Checkpoint deletes it).
		a.restored.Drop()
	}
	// Every root read, no gemini running and none remembered: nothing
	// can own a session or leave an orphan, and when no chat, listing or
	// project changed either (key), the last pass's sessions, all quiet,
	// are this one's.
	key := kit.Key{a.gen, a.shape}
	idle := len(looked) == len(a.roots) && len(procs) == 0 && a.lineage.Len() == 0 && !a.retryRoots
	if set, ok := a.quiet.Again(key); ok && idle {
		obs.Quiet = set
	} else {
		a.retryRoots = false
		for _, r := range looked {
			obs.Sessions = append(obs.Sessions, a.observe(r)...)
		}
		a.assignOwners(obs.Sessions, procs)
		toolsRunning(obs.Sessions, snap, a.cfg.Host.StartTime)
		a.addOrphans(obs.Sessions, snap, procs)
		adapters.SortByID(obs.Sessions)
		if len(looked) == len(a.roots) {
			obs.Sessions, obs.Quiet = a.quiet.SplitAt(kit.Key{a.gen, a.shape}, obs.Sessions)
		} else {
			obs.Sessions, obs.Quiet = a.quiet.Split(obs.Sessions)
		}
	}
	sort.Slice(obs.Errors, func(i, j int) bool { return obs.Errors[i].Input < obs.Errors[j].Input })
	obs.Warnings = a.warnings()
	obs.Drift = a.driftReport()
	a.inputs.Report(obs.Errors)
	a.updateWatch()
	return obs, nil
}

// scanRoot lists and reads the chats of one data folder. ok is false when
// the folder itself could not be looked at.
func (a *Adapter) scanRoot(r *rootState, full bool, now time.Time, hot map[string]bool) ([]adapters.InputError, bool) {
	fi, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(r.files) > 0 {
			a.shape++
		}
		clear(r.files)
		clear(r.dirs)
		return nil, true // Gemini CLI never ran with this folder
	case err != nil:
		return []adapters.InputError{{Input: r.path, Err: err}}, false
	case !fi.IsDir():
		return []adapters.InputError{{Input: r.path, Err: errors.New("not a directory")}}, false
	}
	var errs []adapters.InputError
	a.readProjects(r, &errs)
	paths := a.listChats(r, full, now, &errs)
	due := r.due[:0]
	for _, path := range paths {
		f := r.files[path]
		warm := !f.read || now.Sub(f.mtime) < a.cfg.ColdAfter || (len(hot) > 0 && (hot[f.c.ProjectHash] || hot[hashOf(r.folders[f.project])]))
		if full || warm {
			due = append(due, path)
		}
	}
	r.due = due
	// Many chats (a first start, a restart) are read on every core, then
	// counted in order.
	kit.ReadEach(due, func(path string) (bool, error) { return a.read(r.files[path], now) }, func(path string, read bool, err error) {
		if read {
			a.noteRead(r.files[path])
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				delete(r.files, path)
				a.shape++
				return
			}
			errs = append(errs, adapters.InputError{Input: path, Err: err})
		}
	})
	return errs, true
}

// hashOf is Gemini CLI's project hash of a folder: the SHA-256 of its
// path, in hex ("" for no folder).
func hashOf(folder string) string {
	if folder == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(folder))
	return hex.EncodeToString(sum[:])
}

// readProjects reads projects.json ({"projects": {folder: name}}) when it
// changed. One that cannot be read keeps the last names, with a warning.
func (a *Adapter) readProjects(r *rootState, errs *[]adapters.InputError) {
	path := filepath.Join(r.path, "projects.json")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		if len(r.folders) > 0 || len(r.byHash) > 0 {
			a.shape++
		}
		clear(r.folders)
		clear(r.byHash)
		r.projectsErr = nil
		return
	}
	if err != nil {
		*errs = append(*errs, adapters.InputError{Input: path, Err: err})
		return
	}
	if fi.ModTime().Equal(r.projectsMtime) && fi.Size() == r.projectsSize && r.projectsErr == nil {
		return
	}
	if fi.Size() > 16<<20 {
		r.projectsErr = fmt.Errorf("%d bytes: larger than read", fi.Size())
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		*errs = append(*errs, adapters.InputError{Input: path, Err: err})
		return
	}
	var doc struct {
		Projects map[string]string `json:"projects"`
	}
	r.projectsMtime, r.projectsSize = fi.ModTime(), fi.Size()
	if err := json.Unmarshal(b, &doc); err != nil {
		r.projectsErr = fmt.Errorf("not JSON: %w", err)
		return
	}
	r.projectsErr = nil
	a.shape++
	clear(r.folders)
	clear(r.byHash)
	for folder, name := range doc.Projects {
		if filepath.IsAbs(folder) && name != "" {
			r.folders[name] = folder
			r.byHash[hashOf(folder)] = folder
		}
	}
}

// listChats lists tmp/<project>/chats/ (and the subagent folders in it)
// where they changed and returns every chat path known.
func (a *Adapter) listChats(r *rootState, full bool, now time.Time, errs *[]adapters.InputError) []string {
	// The paths are joined once per listing (kit.Dirs.ListPaths) and put
	// in the last pass's slice: an idle pass over 2,000 chats allocates
	// nothing per chat.
	paths := r.paths[:0]
	add := func(path, project, parent string) {
		if r.files[path] == nil {
			f, _ := a.restored.Take(path)
			if f == nil {
				f = &fileState{}
			} else {
				a.drift.Set(path, "chat", "", f.c.Drift)
			}
			f.path, f.project, f.parent, f.whole = path, project, parent, strings.HasSuffix(path, ".json")
			r.files[path] = f
			a.shape++
		}
		paths = append(paths, path)
	}
	tmp := filepath.Join(r.path, "tmp")
	for _, project := range r.dirs.List(tmp, full, now, errs, isDir) {
		names, chats := r.dirs.ListPaths(filepath.Join(tmp, project, "chats"), full, now, errs, isChatEntry)
		for i, name := range names {
			if isSessionFile(name) {
				add(chats[i], project, "")
				continue
			}
			_, subs := r.dirs.ListPaths(chats[i], full, now, errs, isSubagentChat)
			for _, sub := range subs {
				add(sub, project, name)
			}
		}
	}
	a.shape += uint64(kit.Prune(r.files, paths))
	sort.Strings(paths)
	r.paths = paths
	return paths
}

func isDir(name string, e fs.DirEntry) bool { return e.IsDir() && !strings.HasPrefix(name, ".") }

func isChatEntry(name string, e fs.DirEntry) bool {
	if e.IsDir() {
		return !strings.HasPrefix(name, ".")
	}
	return e.Type().IsRegular() && isSessionFile(name)
}

func isSubagentChat(name string, e fs.DirEntry) bool {
	return e.Type().IsRegular() && strings.HasSuffix(name, ".jsonl") && !strings.HasPrefix(name, ".")
}

// read stats f and reads what changed: a new or replaced chat from its
// start, a grown one from where the last read ended. A whole-file chat is
// read whole when it changed. It touches f alone (chats are read on
// several cores); read says it changed f, which noteRead then counts.
func (a *Adapter) read(f *fileState, now time.Time) (read bool, err error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return false, err
	}
	dev, ino, _ := kit.FileID(fi)
	size, mtime := fi.Size(), fi.ModTime()
	replaced := f.read && (dev != f.dev || ino != f.ino || size < f.size)
	if f.read && !replaced && size == f.size && mtime.Equal(f.mtime) && (!f.whole || kit.Settled(f.mtime, f.readAt)) {
		return false, nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return false, err
	}
	defer file.Close()
	if f.whole {
		if err := a.readWholeFile(f, file, size); err != nil {
			return false, err
		}
	} else {
		c, off := f.c.clone(), f.offset
		if !f.read || replaced {
			c, off = chat{}, 0
		}
		if _, err := file.Seek(off, io.SeekStart); err != nil {
			return false, err
		}
		n, err := readLines(file, off, &c)
		if err != nil {
			return false, fmt.Errorf("read chat: %w", err)
		}
		f.c, f.offset = c, n
	}
	f.read, f.size, f.mtime, f.dev, f.ino, f.readAt = true, size, mtime, dev, ino, now
	return true, nil
}

// noteRead counts a read of f: its gen, and its drift in the tally.
func (a *Adapter) noteRead(f *fileState) {
	a.gen++
	f.gen = a.gen
	a.drift.Set(f.path, "chat", "", f.c.Drift)
}

// readWholeFile reads a .json chat. One too large or not a chat keeps the
// last good read, with f.err set (a warning).
func (a *Adapter) readWholeFile(f *fileState, file *os.File, size int64) error {
	if size > a.cfg.MaxWhole {
		f.err = fmt.Errorf("%d bytes: larger than the %d read whole", size, a.cfg.MaxWhole)
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(file, a.cfg.MaxWhole+1))
	if err != nil {
		return fmt.Errorf("read chat: %w", err)
	}
	c, err := readWhole(b)
	if err != nil {
		f.err = err
		return nil
	}
	f.c, f.err, f.offset = c, nil, int64(len(b))
	return nil
}

// observe turns the chats of r into observations, one per session id: a
// .jsonl over the .json it was migrated from; else the chat the session
// started in (the earlier startTime), since a `gemini --resume <id>`
// 0.61.0 appends to the session's chat and also writes a new chat of that
// id holding only the session context; else the newer file.
func (a *Adapter) observe(r *rootState) []adapters.Observed {
	byID := map[string]*fileState{}
	better := func(f, o *fileState) bool {
		switch {
		case o.whole != f.whole:
			return !f.whole
		case !f.c.Started.Equal(o.c.Started) && !f.c.Started.IsZero() && !o.c.Started.IsZero():
			return f.c.Started.Before(o.c.Started)
		case !f.mtime.Equal(o.mtime):
			return f.mtime.After(o.mtime)
		}
		return f.path < o.path
	}
	for _, f := range r.files {
		if !f.read || f.c.ID == "" || (f.parent != "" && f.c.Kind == "main") {
			continue
		}
		if o := byID[f.c.ID]; o == nil || better(f, o) {
			byID[f.c.ID] = f
		}
	}
	out := make([]adapters.Observed, 0, len(byID))
	for _, f := range byID {
		out = append(out, a.observed(r, f))
	}
	return out
}

// observed is one chat's observation, without owners (owners.go).
func (a *Adapter) observed(r *rootState, f *fileState) adapters.Observed {
	c := &f.c
	ts := c.turn()
	o := adapters.Observed{
		UpstreamID:       c.ID,
		Source:           f.path,
		Root:             r.path,
		Cwd:              r.byHash[c.ProjectHash],
		Title:            c.Summary,
		Activity:         ts.Activity,
		ActivityEvidence: ts.Evidence,
		ActivitySource:   session.SourceTranscript,
		WaitingFor:       ts.WaitingFor,
		InFlight:         ts.InFlight,
		LastActivity:     c.Last,
	}
	if o.Cwd == "" {
		if folder := r.folders[f.project]; folder != "" && (c.ProjectHash == "" || hashOf(folder) == c.ProjectHash) {
			o.Cwd = folder
		} else if folder := a.projectRoot(r, f.project); folder != "" && (c.ProjectHash == "" || hashOf(folder) == c.ProjectHash) {
			o.Cwd = folder
		}
	}
	if o.Title == "" {
		o.Title = c.Title
	}
	if is, ok := c.Drift.Problem("gemini", ""); ok {
		o.Problems = append(o.Problems, is)
	}
	if o.LastActivity.IsZero() || f.mtime.After(o.LastActivity) {
		o.LastActivity = f.mtime
	}
	return o
}

// projectRoot is the folder tmp/<project>/.project_root names (Gemini
// CLI 0.61.0 writes it beside chats/), read once per project.
func (a *Adapter) projectRoot(r *rootState, project string) string {
	if folder, ok := r.roots[project]; ok {
		return folder
	}
	folder := ""
	b, err := os.ReadFile(filepath.Join(r.path, "tmp", project, ".project_root"))
	if err == nil && len(b) < 4096 {
		if s := strings.TrimSpace(string(b)); filepath.IsAbs(s) {
			folder = s
		}
	}
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		r.roots[project] = folder
	} else {
		a.retryRoots = true // not cached: the next pass builds, and reads it again
	}
	a.shape++ // the observations built with it are new
	return folder
}

// warnings names chats read only in part: lines skipped, no header, a
// whole-file chat not usable; and a projects.json that is not.
func (a *Adapter) warnings() []adapters.InputError {
	var out []adapters.InputError
	for _, r := range a.roots {
		if r.projectsErr != nil {
			out = append(out, adapters.InputError{Input: filepath.Join(r.path, "projects.json"), Err: r.projectsErr})
		}
		for _, f := range r.files {
			switch {
			case f.err != nil:
				out = append(out, adapters.InputError{Input: f.path, Err: f.err})
			case f.read && f.c.ID == "" && f.offset > 0:
				out = append(out, adapters.InputError{Input: f.path, Err: errors.New("no session header: not read as a session")})
			case f.c.Bad > 0:
				out = append(out, adapters.InputError{Input: f.path, Err: fmt.Errorf("%d lines skipped: not JSON, not a chat record, or longer than %d bytes", f.c.Bad, maxLine)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Input < out[j].Input })
	return out
}

// updateWatch keeps the watch list: each root, its tmp/, and the chats/
// folders listed.
func (a *Adapter) updateWatch() {
	var out []string
	for _, r := range a.roots {
		for _, p := range []string{r.path, filepath.Join(r.path, "tmp")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
		var chats []string
		for dir := range r.dirs {
			if filepath.Base(dir) == "chats" {
				chats = append(chats, dir)
			}
		}
		sort.Strings(chats)
		out = append(out, chats[:min(len(chats), maxChatWatches)]...)
	}
	a.watchMu.Lock()
	a.watch = out
	a.watchMu.Unlock()
}

const maxChatWatches = 64

// driftReport takes the drift of chats no longer listed out of the tally
// (walking only those that showed drift) and reports it. Gemini CLI
// writes no version in its chats: the drift is counted under none.
func (a *Adapter) driftReport() []adapters.Drift {
	if a.drift.Len() > 0 {
		a.drift.Keep(func(path string) bool {
			for _, r := range a.roots {
				if r.files[path] != nil {
					return true
				}
			}
			return false
		})
	}
	return a.drift.Report(&a.hookDrift)
}
