package pi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// rootState is what the adapter knows of one Pi agent dir.
type rootState struct {
	path  string
	files map[string]*fileState // by path
	dirs  kit.Dirs              // listed folders, by path
	// paths and due are the last pass's session files and those it
	// read, kept for the next pass to fill.
	paths, due []string
}

// fileState is what the adapter knows of one session file.
type fileState struct {
	path string
	id   string // the uuid of its name

	read     bool
	size     int64
	mtime    time.Time
	readAt   time.Time
	dev, ino uint64
	head     header
	headErr  error
	turn     turn
	offset   int64
	// edge are the bytes that end at offset: a file rewritten in place
	// (Pi rewrites a session it migrates, same inode, maybe longer) no
	// longer has them there, and is read from its start.
	edge []byte
	bad  int // lines skipped as not JSON
	long int // lines skipped as too long
	// gen changes with every read (checkpoint.go saves what changed).
	gen uint64
}

// sessionName matches <time>_<uuid>.jsonl, the time as Pi writes it
// (2026-11-28T01-02-03-456Z).
var sessionName = regexp.MustCompile(`^([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9A-Za-z-]+)_([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$`)

// Discover implements adapters.Adapter.
func (a *Adapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	full := a.rescan.Due(now, a.cfg.FullRescan)
	procs := a.findPi(snap)
	hot := hotDirs(procs)
	var obs adapters.Observation
	looked := 0
	var rootErrs []error
	readable := map[string]bool{}
	for _, path := range a.order {
		if err := ctx.Err(); err != nil {
			return adapters.Observation{}, fmt.Errorf("pi discover: %w", err)
		}
		errs, ok := a.scanRoot(a.roots[path], full, now, hot)
		obs.Errors = append(obs.Errors, errs...)
		if ok {
			looked++
			readable[path] = true
		} else {
			for _, e := range errs {
				rootErrs = append(rootErrs, e)
			}
		}
	}
	// Every root read, no pi running and none remembered: nothing can
	// own a session or leave an orphan, and when no session file or
	// listing changed either (key), the last pass's sessions, all quiet,
	// are this one's.
	key := kit.Key{a.gen, a.shape}
	set, again := a.quiet.Again(key)
	again = again && looked == len(a.order) && len(procs) == 0 && a.lineage.Len() == 0
	if !again {
		a.countMatches(procs)
		for _, path := range a.order {
			if readable[path] {
				obs.Sessions = append(obs.Sessions, a.observe(a.roots[path], procs)...)
			}
		}
	}
	if looked == 0 && len(a.order) > 0 {
		a.inputs.Report(obs.Errors)
		return adapters.Observation{}, fmt.Errorf("pi: no Pi agent dir could be read: %w", errors.Join(rootErrs...))
	}
	if full {
		// Every file was listed: a saved entry not taken by now has no
		// file any more (the next Checkpoint deletes it).
		a.restored.Drop()
	}
	switch {
	case again:
		obs.Quiet = set
		clear(a.owned) // as addOrphans does with no pi and nothing remembered
	case looked == len(a.order):
		adapters.SortByID(obs.Sessions)
		a.addOrphans(obs.Sessions, snap, procs)
		obs.Sessions, obs.Quiet = a.quiet.SplitAt(key, obs.Sessions)
	default:
		adapters.SortByID(obs.Sessions)
		a.addOrphans(obs.Sessions, snap, procs)
		obs.Sessions, obs.Quiet = a.quiet.Split(obs.Sessions)
	}
	sort.Slice(obs.Errors, func(i, j int) bool { return obs.Errors[i].Input < obs.Errors[j].Input })
	obs.Warnings = a.warnings()
	obs.Drift = a.driftReport()
	a.inputs.Report(obs.Errors)
	a.updateWatch()
	return obs, nil
}

// scanRoot finds and reads the session files of one root. ok is false
// when the root itself could not be looked at.
func (a *Adapter) scanRoot(r *rootState, full bool, now time.Time, hot map[string]bool) ([]adapters.InputError, bool) {
	fi, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(r.files) > 0 {
			a.shape++
		}
		clear(r.files)
		clear(r.dirs)
		return nil, true // Pi never ran with this dir
	case err != nil:
		return []adapters.InputError{{Input: r.path, Err: err}}, false
	case !fi.IsDir():
		return []adapters.InputError{{Input: r.path, Err: errors.New("not a directory")}}, false
	}
	paths, errs := a.listSessions(r, full, now)
	due := r.due[:0]
	for _, path := range paths {
		f := r.files[path]
		if full || !f.read || now.Sub(f.mtime) < a.cfg.ColdAfter || hot[filepath.Base(filepath.Dir(path))] || !kit.Settled(f.mtime, f.readAt) {
			due = append(due, path)
		}
	}
	r.due = due
	// Many files (a first start, a restart) are read on every core, then
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

// listSessions lists sessions/ and its project folders where they changed
// and returns every session file known.
func (a *Adapter) listSessions(r *rootState, full bool, now time.Time) ([]string, []adapters.InputError) {
	var errs []adapters.InputError
	// The paths are joined once per listing (kit.Dirs.ListPaths) and put
	// in the last pass's slice: an idle pass over 2,000 sessions
	// allocates nothing per session.
	paths := r.paths[:0]
	sessions := filepath.Join(r.path, "sessions")
	for _, d := range r.dirs.List(sessions, full, now, &errs, isProjectDir) {
		names, files := r.dirs.ListPaths(filepath.Join(sessions, d), full, now, &errs, isSessionFile)
		for i, n := range names {
			p := files[i]
			if r.files[p] == nil {
				m := sessionName.FindStringSubmatch(n)
				f, _ := a.restored.Take(p)
				if f == nil || f.id != m[2] {
					f = &fileState{}
				} else {
					a.drift.Set(p, "session file", f.head.driftVersion(), f.turn.Drift)
				}
				f.path, f.id = p, m[2]
				r.files[p] = f
				a.shape++
			}
			paths = append(paths, p)
		}
	}
	a.shape += uint64(kit.Prune(r.files, paths))
	sort.Strings(paths)
	r.paths = paths
	return paths, errs
}

func isProjectDir(name string, e fs.DirEntry) bool {
	return e.IsDir() && !strings.HasPrefix(name, ".")
}

func isSessionFile(name string, e fs.DirEntry) bool {
	return e.Type().IsRegular() && sessionName.MatchString(name)
}

// read stats f and reads what changed: a new or replaced file from its
// head and tail, a grown one from where the last read ended (a growth
// past MaxTail as a new tail). A file whose stat is unchanged but was
// read within the racy window of its mtime is read again from its start:
// a rewrite in the same tick leaves size and mtime as they were. It
// touches f alone (files are read on several cores); read says it
// changed f, which noteRead then counts.
func (a *Adapter) read(f *fileState, now time.Time) (read bool, err error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return false, err
	}
	dev, ino, _ := kit.FileID(fi)
	size, mtime := fi.Size(), fi.ModTime()
	same := size == f.size && mtime.Equal(f.mtime)
	replaced := f.read && (dev != f.dev || ino != f.ino || size < f.size || (same && !kit.Settled(f.mtime, f.readAt)))
	if f.read && !replaced && same {
		return false, nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return false, err
	}
	defer file.Close()
	fresh := !f.read || replaced || !sameEdge(file, f)
	res := readResult{head: f.head, hasHead: f.headErr == nil && f.read, turn: f.turn, offset: f.offset}
	switch {
	// A head that could not be read (the header still being written at
	// the first look) is read again, whole, once the file grew.
	case fresh || f.headErr != nil:
		res = readResult{}
		h, err := readHead(file, size)
		f.headErr = err
		res.head, res.hasHead = h, err == nil
		if size > 0 {
			if err := readTail(file, size, a.cfg.MaxTail, &res); err != nil {
				return false, fmt.Errorf("read session tail: %w", err)
			}
			res.turn.Title = readTitle(file, size)
		}
		fresh = true
	case size-f.offset > a.cfg.MaxTail:
		title := res.turn.Title
		if err := readTail(file, size, a.cfg.MaxTail, &res); err != nil {
			return false, fmt.Errorf("read session tail: %w", err)
		}
		res.turn.Title = title
	default:
		res.turn.Pending = append([]call(nil), res.turn.Pending...)
		if err := readAppended(file, f.offset, size, &res); err != nil {
			return false, fmt.Errorf("read session: %w", err)
		}
	}
	if res.hasHead {
		f.head = res.head
	}
	if fresh {
		f.bad, f.long = res.bad, res.long
	} else {
		f.bad += res.bad
		f.long += res.long
	}
	f.read, f.size, f.mtime, f.readAt, f.dev, f.ino = true, size, mtime, now, dev, ino
	f.turn, f.offset = res.turn, res.offset
	f.edge = readEdge(file, f.offset)
	return true, nil
}

// noteRead counts a read of f: its gen, and its drift in the tally.
func (a *Adapter) noteRead(f *fileState) {
	a.gen++
	f.gen = a.gen
	a.drift.Set(f.path, "session file", f.head.driftVersion(), f.turn.Drift)
}

// edgeLen is how many bytes before the read offset are kept to tell an
// append from a rewrite.
const edgeLen = 64

// readEdge reads the edgeLen bytes (or fewer, at the start) that end at
// offset.
func readEdge(r io.ReaderAt, offset int64) []byte {
	start := max(0, offset-edgeLen)
	buf := make([]byte, offset-start)
	n, _ := r.ReadAt(buf, start)
	return buf[:n]
}

// sameEdge reports whether f's file still has f's edge bytes before its
// offset: a file read before that does not was rewritten.
func sameEdge(r io.ReaderAt, f *fileState) bool {
	if !f.read {
		return true
	}
	return bytes.Equal(readEdge(r, f.offset), f.edge)
}

// observe turns the known session files of r into observations.
func (a *Adapter) observe(r *rootState, procs []*piProc) []adapters.Observed {
	out := make([]adapters.Observed, 0, len(r.files))
	for _, f := range r.files {
		out = append(out, a.observed(r, f, procs))
	}
	return out
}

// observed is one session file's observation.
func (a *Adapter) observed(r *rootState, f *fileState, procs []*piProc) adapters.Observed {
	o := adapters.Observed{
		UpstreamID:       f.id,
		Source:           f.path,
		Root:             r.path,
		Cwd:              f.head.Cwd,
		Title:            f.turn.Title,
		Activity:         session.ActivityIdle,
		ActivityEvidence: "session file tail",
		ActivitySource:   session.SourceTranscript,
		LastActivity:     f.turn.Last,
	}
	if o.LastActivity.IsZero() || (f.read && f.mtime.After(o.LastActivity)) {
		o.LastActivity = f.mtime
	}
	o.Owners = a.ownersOf(f, procs)
	if is, ok := f.turn.Drift.Problem("pi", f.head.driftVersion()); ok {
		o.Problems = append(o.Problems, is)
	}
	if !f.read || !f.turn.Known {
		o.Activity = session.ActivityUnknown
		return o
	}
	t := &f.turn
	if !t.Busy {
		o.WaitingFor = &session.WaitingFor{Kind: session.WaitingInput, Detail: stopWords(t.Stop)}
		return o
	}
	o.Activity = session.ActivityBusy
	for _, c := range t.Pending {
		o.InFlight = append(o.InFlight, adapters.Issue{
			Kind: session.ProblemOrphanedToolCall, Key: c.ID, Since: c.Since,
			Detail: fmt.Sprintf("%s call %s without its result: %s", c.Name, c.ID, c.Args),
		})
	}
	if len(t.Pending) > 0 {
		o.ActivityEvidence = "session file tail: a tool call without its result (a tool running)"
	} else {
		o.ActivityEvidence = "session file tail: waiting for the model's reply"
		o.InFlight = append(o.InFlight, adapters.Issue{
			Kind: session.ProblemIncompleteMessage, Key: "reply", Since: t.Waiting,
			Detail: "a prompt or tool results that never got the model's reply",
		})
	}
	return o
}

// stopWords says how the last turn ended.
func stopWords(stop string) string {
	switch stop {
	case "", "stop":
		return "the turn ended"
	case "error":
		return "the turn ended in an error"
	case "aborted":
		return "the turn was aborted"
	case "length":
		return "the reply was cut at its length limit"
	}
	return "the turn ended (" + stop + ")"
}

// warnings names session files read only in part: a first line that is
// not a session header, lines that do not parse or are too long.
func (a *Adapter) warnings() []adapters.InputError {
	var out []adapters.InputError
	for _, path := range a.order {
		for _, f := range a.roots[path].files {
			switch {
			case f.read && f.headErr != nil && f.size > 0:
				out = append(out, adapters.InputError{Input: f.path, Err: fmt.Errorf("session header not read: %w", f.headErr)})
			case f.bad > 0 || f.long > 0:
				var why []string
				if f.bad > 0 {
					why = append(why, fmt.Sprintf("%d lines skipped: not JSON", f.bad))
				}
				if f.long > 0 {
					why = append(why, fmt.Sprintf("%d lines skipped: longer than %d bytes", f.long, maxLine))
				}
				out = append(out, adapters.InputError{Input: f.path, Err: errors.New(strings.Join(why, "; "))})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Input < out[j].Input })
	return out
}

// updateWatch keeps the watch list: each root, its sessions/ and its
// project folders changed last (hints only: every pass stats each folder,
// and lists it again when it changed).
func (a *Adapter) updateWatch() {
	var out []string
	for _, path := range a.order {
		r := a.roots[path]
		for _, p := range []string{r.path, filepath.Join(r.path, "sessions")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
		// The project folders changed last first: where sessions are
		// being written now.
		var dirs []string
		for dir := range r.dirs {
			if filepath.Dir(dir) == filepath.Join(r.path, "sessions") {
				dirs = append(dirs, dir)
			}
		}
		sort.Slice(dirs, func(i, j int) bool {
			if mi, mj := r.dirs[dirs[i]].Mtime(), r.dirs[dirs[j]].Mtime(); !mi.Equal(mj) {
				return mi.After(mj)
			}
			return dirs[i] < dirs[j]
		})
		out = append(out, dirs[:min(len(dirs), maxDirWatches)]...)
	}
	a.watchMu.Lock()
	a.watch = out
	a.watchMu.Unlock()
}

const maxDirWatches = 64

// driftReport takes the drift of session files no longer listed out of
// the tally (walking only those that showed drift) and reports it.
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
	return a.drift.Report()
}
