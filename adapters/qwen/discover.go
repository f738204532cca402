package qwen

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// rootState is what the adapter knows of one Qwen home.
type rootState struct {
	path  string
	files map[string]*fileState // by path
	dirs  kit.Dirs              // listed folders, by path
	// paths and due are the last pass's chats and those it read, kept
	// for the next pass to fill.
	paths, due []string
	reg        registry
	// regErr is why sessions/ could not be read this pass (its last
	// reading stands).
	regErr error
}

func newRoot(path string) *rootState {
	return &rootState{path: path, files: map[string]*fileState{}, dirs: kit.Dirs{}}
}

// fileState is what the adapter knows of one chat.
type fileState struct {
	path string
	id   string

	read     bool
	size     int64
	mtime    time.Time
	dev, ino uint64
	// offset is where the next read starts: the end of the last whole
	// line.
	offset int64
	st     state
	// gen changes with every read (checkpoint.go saves what changed).
	gen uint64
}

// isChat: <id>.jsonl (not the .runtime.json beside it).
func isChat(name string, e fs.DirEntry) bool {
	id, ok := strings.CutSuffix(name, ".jsonl")
	return ok && e.Type().IsRegular() && validID(id)
}

func isDir(name string, e fs.DirEntry) bool { return e.IsDir() && !strings.HasPrefix(name, ".") }

// Discover implements adapters.Adapter.
func (a *Adapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	full := a.rescan.Due(now, a.cfg.FullRescan)
	v := newOwnerView(snap, a.cfg.StartTimer, a.pidNS)
	hot := hotSet(v)
	var obs adapters.Observation
	looked := 0
	var rootErrs []error
	for _, path := range a.order {
		if err := ctx.Err(); err != nil {
			return adapters.Observation{}, fmt.Errorf("qwen discover: %w", err)
		}
		r := a.roots[path]
		errs, ok := a.scanRoot(r, full, now, hot)
		obs.Errors = append(obs.Errors, errs...)
		if ok {
			looked++
		} else {
			for _, e := range errs {
				rootErrs = append(rootErrs, e)
			}
		}
	}
	if looked == 0 && len(a.order) > 0 {
		a.inputs.Report(obs.Errors)
		return adapters.Observation{}, fmt.Errorf("qwen: no Qwen home could be read: %w", errors.Join(rootErrs...))
	}
	if full {
		a.restored.Drop()
	}
	for _, path := range a.order {
		v.nameEntries(a.roots[path].reg.entries)
	}
	// Every home read, no qwen running, no registry entry, no tool of a
	// session alive and none remembered: nothing can own a session or
	// be its orphan, and when no chat or listing changed either (key),
	// the last pass's sessions, all quiet, are this one's.
	key := kit.Key{a.gen, a.shape}
	idle := looked == len(a.order) && len(v.procs) == 0 && a.lineage.Len() == 0 && !lineage.AnyMarked(snap, sessionVar)
	for _, path := range a.order {
		idle = idle && len(a.roots[path].reg.entries) == 0
	}
	if set, ok := a.quiet.Again(key); ok && idle {
		obs.Quiet = set
	} else {
		var ps []promptSession
		for _, path := range a.order {
			for _, f := range a.roots[path].files {
				if f.read && f.st.meta.Title != "" {
					ps = append(ps, promptSession{id: f.id, prompt: f.st.meta.Title, created: f.st.meta.Started, last: f.st.turn.Last})
				}
			}
		}
		v.namePrompts(ps)
		for _, path := range a.order {
			obs.Sessions = append(obs.Sessions, a.observeRoot(a.roots[path], v)...)
		}
		a.addToolProcs(obs.Sessions, snap)
		adapters.SortByID(obs.Sessions)
		if looked == len(a.order) {
			obs.Sessions, obs.Quiet = a.quiet.SplitAt(key, obs.Sessions)
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

// hot is what makes a cold chat worth a stat: a live qwen works in its
// cwd, or names it.
type hot struct {
	cwds map[string]bool
	ids  map[string]bool
}

func hotSet(v *ownerView) hot {
	h := hot{cwds: map[string]bool{}, ids: map[string]bool{}}
	for _, q := range v.procs {
		if q.p.Cwd != "" {
			h.cwds[filepath.Clean(q.p.Cwd)] = true
		}
		if q.args.Session != "" {
			h.ids[q.args.Session] = true
		}
	}
	for _, ids := range v.toolOf {
		for id := range ids {
			h.ids[id] = true
		}
	}
	return h
}

// scanRoot lists and reads the chats of one Qwen home, and its registry.
// ok is false when the home itself could not be looked at.
func (a *Adapter) scanRoot(r *rootState, full bool, now time.Time, h hot) ([]adapters.InputError, bool) {
	fi, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(r.files) > 0 {
			a.shape++
		}
		clear(r.files)
		clear(r.dirs)
		r.reg = registry{}
		return nil, true // Qwen never ran with this home
	case err != nil:
		return []adapters.InputError{{Input: r.path, Err: err}}, false
	case !fi.IsDir():
		return []adapters.InputError{{Input: r.path, Err: errors.New("not a directory")}}, false
	}
	var errs []adapters.InputError
	r.regErr = readRegistry(r.path, &r.reg, full, now)
	if r.regErr != nil {
		errs = append(errs, adapters.InputError{Input: filepath.Join(r.path, "sessions"), Err: r.regErr})
	}
	for _, e := range r.reg.entries {
		h.ids[e.SessionID] = true
	}
	paths, lerrs := a.listChats(r, full, now)
	errs = append(errs, lerrs...)
	due := r.due[:0]
	for _, path := range paths {
		f := r.files[path]
		if f.read && !full && now.Sub(f.mtime) >= a.cfg.ColdAfter && !h.ids[f.id] && !h.cwds[filepath.Clean(f.st.meta.Cwd)] {
			continue
		}
		due = append(due, path)
	}
	r.due = due
	// Many chats (a first start, a restart) are read on every core, then
	// counted in order (kit.Each).
	tried := make([]int64, len(due))
	failed := make([]error, len(due))
	kit.Each(len(due), func(i int) { tried[i], failed[i] = a.read(r.files[due[i]]) })
	for i, path := range due {
		f := r.files[path]
		a.noteRead(f, tried[i], failed[i])
		if err := failed[i]; err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				delete(r.files, path)
				a.shape++
				continue
			}
			errs = append(errs, adapters.InputError{Input: path, Err: err})
		}
	}
	return errs, true
}

// listChats lists projects/*/chats/ where they changed and returns every
// chat path known.
func (a *Adapter) listChats(r *rootState, full bool, now time.Time) ([]string, []adapters.InputError) {
	var errs []adapters.InputError
	// The paths are joined once per listing (kit.Dirs.ListPaths) and put
	// in the last pass's slice: an idle pass over 2,000 chats allocates
	// nothing per chat.
	paths := r.paths[:0]
	projects := filepath.Join(r.path, "projects")
	for _, p := range r.dirs.List(projects, full, now, &errs, isDir) {
		names, chats := r.dirs.ListPaths(filepath.Join(projects, p, "chats"), full, now, &errs, isChat)
		for i, n := range names {
			path := chats[i]
			if r.files[path] == nil {
				id := strings.TrimSuffix(n, ".jsonl")
				f, _ := a.restored.Take(path)
				if f == nil || f.id != id {
					f = &fileState{}
				} else {
					a.drift.Set(path, "chat", f.st.meta.Version, f.st.drift)
				}
				f.path, f.id = path, id
				r.files[path] = f
				a.shape++
			}
			paths = append(paths, path)
		}
	}
	a.shape += uint64(kit.Prune(r.files, paths))
	r.paths = paths
	return paths, errs
}

// read stats f and reads what changed: a new or replaced file (another
// inode, or shorter than what was read) from its start, a grown one from
// where the last read ended. It touches f alone (chats are read on
// several cores); tried is the bytes it set out to read, -1 when it read
// nothing, for noteRead to count.
func (a *Adapter) read(f *fileState) (tried int64, err error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return -1, err
	}
	dev, ino, _ := kit.FileID(fi)
	size, mtime := fi.Size(), fi.ModTime()
	replaced := f.read && (dev != f.dev || ino != f.ino || size < f.offset)
	if f.read && !replaced && size == f.size && mtime.Equal(f.mtime) {
		return -1, nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return -1, err
	}
	defer file.Close()
	st, from := f.st.clone(), f.offset
	if !f.read || replaced {
		st, from = state{}, 0
	}
	end, err := readFrom(file, from, size, a.cfg.MaxLine, &st)
	if err != nil {
		return size - from, fmt.Errorf("read chat: %w", err)
	}
	f.st, f.offset = st, end
	f.read, f.size, f.mtime, f.dev, f.ino = true, size, mtime, dev, ino
	return size - from, nil
}

// noteRead counts what read did to f: the reads and bytes, and for a
// read that changed f, its gen and its drift in the tally.
func (a *Adapter) noteRead(f *fileState, tried int64, err error) {
	if tried < 0 {
		return
	}
	a.reads++
	a.bytesRead += tried
	if err == nil {
		a.gen++
		f.gen = a.gen
		a.drift.Set(f.path, "chat", f.st.meta.Version, f.st.drift)
	}
}

// observeRoot turns the chats and live registry entries of r into
// observations: one per session id (a chat over a registry entry alone).
func (a *Adapter) observeRoot(r *rootState, v *ownerView) []adapters.Observed {
	byID := map[string]*fileState{}
	for _, f := range r.files {
		if o := byID[f.id]; o == nil || f.mtime.After(o.mtime) {
			byID[f.id] = f
		}
	}
	entries := map[string][]*entry{}
	for i := range r.reg.entries {
		e := &r.reg.entries[i]
		entries[e.SessionID] = append(entries[e.SessionID], e)
	}
	var out []adapters.Observed
	for id, f := range byID {
		o := observed(r, f)
		o.Owners = v.ownersOf(id, o.Cwd, f.st.turn.Last, entries[id])
		out = append(out, o)
	}
	// A TUI registers before its chat has a line: its session exists
	// (idle, waiting for the first prompt) while the process lives.
	for id, es := range entries {
		if byID[id] != nil {
			continue
		}
		for _, e := range es {
			if _, ok := v.live(e); !ok {
				continue
			}
			o := adapters.Observed{
				UpstreamID: id, Source: e.path, Root: r.path, Cwd: e.Cwd,
				Activity: session.ActivityIdle, ActivityEvidence: "registry entry, no chat yet", ActivitySource: session.SourceRegistry,
				LastActivity: e.StartedAt,
			}
			o.Owners = v.ownersOf(id, e.Cwd, e.StartedAt, es)
			out = append(out, o)
			break
		}
	}
	return out
}

// observed is one chat's observation, owners aside.
func observed(r *rootState, f *fileState) adapters.Observed {
	st := &f.st
	o := adapters.Observed{
		UpstreamID:       f.id,
		Source:           f.path,
		Root:             r.path,
		Cwd:              st.meta.Cwd,
		Title:            st.meta.Title,
		Activity:         session.ActivityIdle,
		ActivityEvidence: "chat tail",
		ActivitySource:   session.SourceTranscript,
		LastActivity:     st.turn.Last,
	}
	if o.LastActivity.IsZero() {
		o.LastActivity = f.mtime
	}
	if is, ok := st.drift.Problem("qwen", st.meta.Version); ok {
		o.Problems = append(o.Problems, is)
	}
	if !f.read {
		o.Activity = session.ActivityUnknown
		return o
	}
	t := &st.turn
	switch t.Phase {
	case phasePrompt:
		o.Activity, o.ActivityEvidence = session.ActivityBusy, "chat tail: a prompt without a reply yet"
		o.InFlight = append(o.InFlight, adapters.Issue{Kind: session.ProblemIncompleteMessage, Key: "prompt", Since: t.Since,
			Detail: fmt.Sprintf("the prompt of %s got no reply", t.Since.Format(time.RFC3339))})
	case phaseCalls:
		o.Activity, o.ActivityEvidence = session.ActivityBusy, "chat tail: a tool call without its result"
		for _, c := range t.Pending {
			o.InFlight = append(o.InFlight, adapters.Issue{Kind: session.ProblemOrphanedToolCall, Key: c.ID, Since: c.Since,
				Detail: fmt.Sprintf("%s call %s without its result: %s", c.Name, c.ID, c.Args)})
		}
	case phaseResults:
		o.Activity, o.ActivityEvidence = session.ActivityBusy, "chat tail: tool results not answered yet"
		o.InFlight = append(o.InFlight, adapters.Issue{Kind: session.ProblemIncompleteMessage, Key: "results", Since: t.Last,
			Detail: "the tool results went back to the model, which never answered"})
	}
	return o
}

// warnings names the inputs read only in part.
func (a *Adapter) warnings() []adapters.InputError {
	var out []adapters.InputError
	for _, path := range a.order {
		r := a.roots[path]
		out = append(out, r.reg.bad...)
		for _, f := range r.files {
			if !f.read {
				continue
			}
			var why []string
			if err := f.st.sessionErr(f.id); err != nil {
				why = append(why, err.Error())
			}
			if f.st.bad > 0 {
				w := fmt.Sprintf("%d lines skipped: not a JSON record", f.st.bad)
				if f.st.recovered > 0 {
					w += fmt.Sprintf(" (%d records found glued after them, read)", f.st.recovered)
				}
				why = append(why, w)
			}
			if f.st.long > 0 {
				why = append(why, fmt.Sprintf("%d lines skipped: longer than %d bytes", f.st.long, a.cfg.MaxLine))
			}
			if len(why) > 0 {
				out = append(out, adapters.InputError{Input: f.path, Err: errors.New(strings.Join(why, "; "))})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Input < out[j].Input })
	return out
}

// maxChatWatches bounds the chats/ folders watched per home.
const maxChatWatches = 16

// updateWatch keeps the watch list: each home, its projects/ and
// sessions/, and the chats/ folders written to most recently.
func (a *Adapter) updateWatch() {
	var out []string
	for _, path := range a.order {
		r := a.roots[path]
		for _, p := range []string{r.path, filepath.Join(r.path, "projects"), filepath.Join(r.path, "sessions")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
		type dm struct {
			dir   string
			mtime time.Time
		}
		var chats []dm
		for dir, d := range r.dirs {
			if filepath.Base(dir) == "chats" {
				chats = append(chats, dm{dir, d.Mtime()})
			}
		}
		sort.Slice(chats, func(i, j int) bool { return chats[i].mtime.After(chats[j].mtime) })
		for i := 0; i < len(chats) && i < maxChatWatches; i++ {
			out = append(out, chats[i].dir)
		}
	}
	a.watchMu.Lock()
	a.watch = out
	a.watchMu.Unlock()
}

// driftReport takes the drift of chats no longer listed out of the tally
// (walking only those that showed drift) and reports it, with the hooks'.
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
