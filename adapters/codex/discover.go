package codex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// rootState is what the adapter knows of one Codex home.
type rootState struct {
	path    string
	learned bool
	files   map[string]*fileState // by path
	dirs    kit.Dirs              // listed folders, by path
	// unheld is, by session id, when a pass first saw its writer lock held
	// by nobody (exactly: the table read and every candidate checked),
	// since when no pass saw it held (Config.ReleaseGrace).
	unheld map[string]time.Time
	// unsettled says the last observe found a release still in its
	// grace: a later one may find the owners exact, with time alone.
	unsettled bool
	// lockSig is the lock folder as the last pass found it.
	lockSig lockSig
	// listings are the folders' listings the last listRollouts found,
	// and paths the rollouts it returned.
	listings []listing
	paths    []string
}

// lockSig is what a lock folder's listing changes observations by.
type lockSig struct {
	read bool
	n    int
}

// fileState is what the adapter knows of one rollout.
type fileState struct {
	path       string
	id         string
	archived   bool
	compressed bool // .jsonl.zst or .jsonl.gz: read whole (compressed.go)
	nameTime   time.Time

	read     bool
	size     int64
	mtime    time.Time
	dev, ino uint64
	meta     meta
	metaErr  error
	turn     turn
	offset   int64
	bad      int
	// readErr: a compressed rollout that could not be read; partial: one
	// read only in part (compressed.go).
	readErr, partial error
	// gen changes with every read (checkpoint.go saves what changed).
	gen uint64
}

// rolloutName matches rollout-YYYY-MM-DDThh-mm-ss-<uuid>.jsonl, and the
// compressed forms.
var rolloutName = regexp.MustCompile(`^rollout-(\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2})-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl(\.zst|\.gz)?$`)

// Discover implements adapters.Adapter.
func (a *Adapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	full := a.rescan.Due(now, a.cfg.FullRescan)
	if !a.cfg.NoLearnedRoots {
		a.learnRoots(snap)
	}
	table := newLockTable(a.cfg.Host)
	var obs adapters.Observation
	var looked []scanned
	var rootErrs []error
	for _, path := range a.order {
		if err := ctx.Err(); err != nil {
			return adapters.Observation{}, fmt.Errorf("codex discover: %w", err)
		}
		r := a.roots[path]
		sc, errs, ok := a.scanRoot(r, full, now, table)
		obs.Errors = append(obs.Errors, errs...)
		if ok {
			looked = append(looked, sc)
		} else {
			for _, e := range errs {
				rootErrs = append(rootErrs, e)
			}
		}
	}
	if len(looked) == 0 && len(a.order) > 0 {
		a.inputs.Report(obs.Errors)
		return adapters.Observation{}, fmt.Errorf("codex: no Codex home could be read: %w", errors.Join(rootErrs...))
	}
	if full {
		// Every rollout was listed: a saved entry not taken by now has no
		// rollout any more (the next Checkpoint deletes it).
		a.restored.Drop()
	}
	// Every home read, none with a lock file, no release still in its
	// grace, no codex running, none of its tools and none remembered:
	// nothing can own a session or leave an orphan, and when no rollout,
	// listing or lock folder changed either (key), the last pass's
	// sessions, all quiet, are this one's. 5,000 rollouts of history took
	// 15 ms and 5 MB every pass to build again.
	key := kit.Key{a.gen, a.shape}
	idle := len(looked) == len(a.order) && !codexRunning(snap) && (a.lineage == nil || a.lineage.Len() == 0) &&
		!lineage.AnyMarked(snap, threadVar)
	for _, sc := range looked {
		idle = idle && sc.locks == 0 && sc.locksRead && !sc.r.unsettled
	}
	if set, ok := a.quiet.Again(key); ok && idle {
		obs.Quiet = set
	} else {
		for _, sc := range looked {
			obs.Sessions = append(obs.Sessions, a.observe(sc.r, sc.owners, sc.inexact, now)...)
		}
		a.addToolProcs(obs.Sessions, snap, table.unchecked)
		markShared(obs.Sessions, snap)
		adapters.SortByID(obs.Sessions)
		if len(looked) == len(a.order) {
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

// learnRoots adds the Codex homes of live codex processes of this user
// that set CODEX_HOME.
func (a *Adapter) learnRoots(snap *proc.Snapshot) {
	if snap == nil {
		return
	}
	uid := os.Getuid()
	for _, p := range snap.Procs {
		home := p.Env["CODEX_HOME"]
		if home == "" || p.UID != uid || !isCodexArgv(p.Argv) || !filepath.IsAbs(home) {
			continue
		}
		home = filepath.Clean(home)
		if a.roots[home] == nil && len(a.order) < maxRoots {
			a.addRoot(home, true)
			a.log.Info("learned Codex home from a live process", zap.String("root", home), zap.Int("pid", p.Identity.PID))
		}
	}
}

const maxRoots = 64

// isCodexArgv: the native codex binary or its npm wrapper.
func isCodexArgv(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	if filepath.Base(argv[0]) == "codex" {
		return true
	}
	return len(argv) > 1 && strings.HasPrefix(filepath.Base(argv[0]), "node") && filepath.Base(argv[1]) == "codex"
}

// scanned is one Codex home as a pass found it: what its sessions are
// observed from.
type scanned struct {
	r       *rootState
	owners  map[string][]adapters.Owner
	inexact map[string]bool
	// locks is how many lock files the lock folder holds; locksRead
	// whether it could be listed (or is absent).
	locks     int
	locksRead bool
}

// codexRunning reports whether a codex process is in snap.
func codexRunning(snap *proc.Snapshot) bool {
	if snap == nil {
		return false
	}
	for _, p := range snap.Procs {
		if isCodexArgv(p.Argv) {
			return true
		}
	}
	return false
}

// scanRoot finds and reads the rollouts of one Codex home, and finds
// their owners. ok is false when the home itself could not be looked at.
func (a *Adapter) scanRoot(r *rootState, full bool, now time.Time, table *lockTable) (scanned, []adapters.InputError, bool) {
	fi, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(r.files) > 0 || r.lockSig != (lockSig{read: true}) {
			a.shape++
		}
		clear(r.files)
		clear(r.dirs)
		r.listings, r.paths = nil, nil
		r.lockSig = lockSig{read: true}
		return scanned{r: r, locksRead: true}, nil, true // Codex never ran with this home
	case err != nil:
		return scanned{}, []adapters.InputError{{Input: r.path, Err: err}}, false
	case !fi.IsDir():
		return scanned{}, []adapters.InputError{{Input: r.path, Err: errors.New("not a directory")}}, false
	}
	locks, errs := a.lockFiles(r)
	locksRead := len(errs) == 0
	if sig := (lockSig{read: locksRead, n: len(locks)}); sig != r.lockSig {
		r.lockSig = sig
		a.shape++
	}
	paths, lerrs := a.listRollouts(r, full, now)
	errs = append(errs, lerrs...)
	for _, path := range paths {
		f := r.files[path]
		if !(full || !f.read || now.Sub(f.mtime) < a.cfg.ColdAfter || locks[f.id]) {
			if f.readErr != nil {
				errs = append(errs, adapters.InputError{Input: path, Err: f.readErr})
			}
			continue
		}
		if err := a.refresh(f); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				delete(r.files, path)
				a.shape++
				continue
			}
			errs = append(errs, adapters.InputError{Input: path, Err: err})
		} else if f.readErr != nil {
			errs = append(errs, adapters.InputError{Input: path, Err: f.readErr})
		}
	}
	ow, inexact := a.owners(r, locks, table)
	if !locksRead {
		inexact = nil // every id: an unlisted lock folder names no one
	}
	return scanned{r: r, owners: ow, inexact: inexact, locks: len(locks), locksRead: locksRead}, errs, true
}

// listRollouts lists sessions/YYYY/MM/DD/ and archived_sessions/ where
// they changed and returns every rollout path known, each with its state.
func (a *Adapter) listRollouts(r *rootState, full bool, now time.Time) ([]string, []adapters.InputError) {
	var errs []adapters.InputError
	// Each folder's names, in the order listed: when every folder gave
	// the very listing it gave last time (kit.Dirs hands out the same
	// names until the folder changes) and no rollout was dropped since,
	// the paths are the last pass's, and nothing is joined or looked up
	// again (5,000 rollouts: 1.4 MB a pass).
	listings := make([]listing, 0, len(r.listings))
	list := func(dir string, keep func(string, fs.DirEntry) bool) []string {
		names := r.dirs.List(dir, full, now, &errs, keep)
		listings = append(listings, listing{dir, names})
		return names
	}
	var dayDirs []string
	sessions := filepath.Join(r.path, "sessions")
	for _, y := range list(sessions, isDigits(4)) {
		for _, m := range list(filepath.Join(sessions, y), isDigits(2)) {
			for _, d := range list(filepath.Join(sessions, y, m), isDigits(2)) {
				dayDirs = append(dayDirs, filepath.Join(sessions, y, m, d))
			}
		}
	}
	for _, d := range dayDirs {
		list(d, isRollout)
	}
	archived := filepath.Join(r.path, "archived_sessions")
	list(archived, isRollout)
	if r.paths != nil && len(r.files) == len(r.paths) && slices.EqualFunc(listings, r.listings, listing.same) {
		return r.paths, errs
	}
	var paths []string
	i := len(listings) - len(dayDirs) - 1 // the first day folder's listing
	add := func(dir string, archived bool) {
		l := listings[i]
		i++
		for _, n := range l.names {
			p := filepath.Join(dir, n)
			if r.files[p] == nil {
				m := rolloutName.FindStringSubmatch(n)
				t, _ := time.ParseInLocation("2006-01-02T15-04-05", m[1], time.Local)
				f, _ := a.restored.Take(p)
				if f == nil || f.id != m[2] {
					f = &fileState{}
				} else {
					a.drift.Set(p, "rollout", f.meta.CLIVersion, f.turn.Drift)
				}
				f.path, f.id, f.archived, f.compressed, f.nameTime = p, m[2], archived, m[3] != "", t
				r.files[p] = f
				a.shape++
			}
			paths = append(paths, p)
		}
	}
	for _, d := range dayDirs {
		add(d, false)
	}
	add(archived, true)
	a.shape += uint64(kit.Prune(r.files, paths))
	r.listings, r.paths = listings, paths
	if r.paths == nil {
		r.paths = []string{}
	}
	return paths, errs
}

// listing is one folder's names as kit.Dirs.List gave them.
type listing struct {
	dir   string
	names []string
}

// same reports whether l and m are the same folder's same listing (the
// same slice of names: kit.Dirs hands out a new one for every listing).
func (l listing) same(m listing) bool {
	return l.dir == m.dir && len(l.names) == len(m.names) && (len(l.names) == 0 || &l.names[0] == &m.names[0])
}

func isDigits(n int) func(string, fs.DirEntry) bool {
	return func(name string, e fs.DirEntry) bool {
		if len(name) != n || !e.IsDir() {
			return false
		}
		for _, c := range name {
			if c < '0' || c > '9' {
				return false
			}
		}
		return true
	}
}

func isRollout(name string, e fs.DirEntry) bool {
	return e.Type().IsRegular() && rolloutName.MatchString(name)
}

// lockFiles lists thread-writer-locks/: the ids with a lock file, held or
// not. A clean exit removes its lock file, so this folder holds only the
// sessions being written and those whose writer died.
func (a *Adapter) lockFiles(r *rootState) (map[string]bool, []adapters.InputError) {
	dir := filepath.Join(r.path, "thread-writer-locks")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []adapters.InputError{{Input: dir, Err: err}}
	}
	out := map[string]bool{}
	for _, e := range ents {
		if id, ok := strings.CutSuffix(e.Name(), ".lock"); ok && !strings.HasPrefix(id, ".") {
			out[id] = true
		}
	}
	return out, nil
}

// refresh stats f and reads what changed: a new or replaced file from its
// head and tail, a grown one from where the last read ended (a growth
// past MaxTail as a new tail).
func (a *Adapter) refresh(f *fileState) error {
	fi, err := os.Stat(f.path)
	if err != nil {
		return err
	}
	dev, ino, _ := kit.FileID(fi)
	size, mtime := fi.Size(), fi.ModTime()
	replaced := f.read && (dev != f.dev || ino != f.ino || size < f.size)
	if f.read && !replaced && size == f.size && mtime.Equal(f.mtime) {
		return nil
	}
	if f.compressed {
		a.refreshCompressed(f, size, fi, dev, ino)
		return nil
	}
	file, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer file.Close()
	res := readResult{meta: f.meta, hasMeta: f.metaErr == nil && f.read, turn: f.turn, offset: f.offset}
	switch {
	// A head that could not be read (its session_meta line still being
	// written at the first look) is read again, whole, once it grew.
	case !f.read || replaced || f.metaErr != nil:
		res = readResult{}
		m, _, err := readHead(file, size)
		f.metaErr = err
		res.meta, res.hasMeta = m, err == nil
		if size > 0 {
			if err := readTail(file, size, a.cfg.MaxTail, &res); err != nil {
				return fmt.Errorf("read rollout tail: %w", err)
			}
		}
	case size-f.offset > a.cfg.MaxTail:
		if err := readTail(file, size, a.cfg.MaxTail, &res); err != nil {
			return fmt.Errorf("read rollout tail: %w", err)
		}
	default:
		res.turn.Pending = append([]call(nil), res.turn.Pending...)
		if err := readAppended(file, f.offset, size, &res); err != nil {
			return fmt.Errorf("read rollout: %w", err)
		}
	}
	if res.hasMeta {
		f.meta = res.meta
	}
	if fresh := !f.read || replaced; fresh {
		f.bad = res.bad
	} else {
		f.bad += res.bad
	}
	f.read, f.size, f.mtime, f.dev, f.ino = true, size, mtime, dev, ino
	f.turn, f.offset = res.turn, res.offset
	a.gen++
	f.gen = a.gen
	a.drift.Set(f.path, "rollout", f.meta.CLIVersion, f.turn.Drift)
	return nil
}

// observe turns the known rollouts of r into observations.
//
// Where the holder of each lock is known (the lock folder was listed, the
// kernel's lock table read, and every process it names for a lock file's
// inode checked), the owners are exact: a recorded owner that does not
// hold the lock has let the session go. inexact nil means none is exact.
// A lock seen held by nobody makes the owners exact only once no pass has
// seen it held for Config.ReleaseGrace: until then the recorded owner is
// judged by its process alone, as where the owners are not exact.
func (a *Adapter) observe(r *rootState, ow map[string][]adapters.Owner, inexact map[string]bool, now time.Time) []adapters.Observed {
	byID := map[string]*fileState{}
	for _, f := range r.files {
		// One session per id: a live rollout over its archived copy, else
		// the newer file.
		if o := byID[f.id]; o == nil || (o.archived && !f.archived) || (o.archived == f.archived && f.mtime.After(o.mtime)) {
			byID[f.id] = f
		}
	}
	out := make([]adapters.Observed, 0, len(byID))
	unheld := make(map[string]time.Time, len(r.unheld))
	for id, f := range byID {
		o := observed(r, f, ow[id])
		if inexact != nil && !inexact[id] && a.releaseSettled(r, unheld, id, len(ow[id]) > 0, now) {
			o.OwnersExact = "the kernel's lock table, for thread-writer-locks/" + id + ".lock,"
		}
		out = append(out, o)
	}
	r.unheld = unheld
	r.unsettled = false
	if a.cfg.ReleaseGrace >= 0 {
		for _, since := range unheld {
			if now.Sub(since) < a.cfg.ReleaseGrace {
				r.unsettled = true
				break
			}
		}
	}
	return out
}

// releaseSettled reports whether session id's exactly known lock holders
// may stand as its only owners: someone holds the lock now, or nobody has
// for Config.ReleaseGrace. It notes in next since when nobody has.
func (a *Adapter) releaseSettled(r *rootState, next map[string]time.Time, id string, held bool, now time.Time) bool {
	if held || a.cfg.ReleaseGrace < 0 {
		return true
	}
	since, ok := r.unheld[id]
	if !ok {
		since = now
	}
	next[id] = since
	return now.Sub(since) >= a.cfg.ReleaseGrace
}

// observed is one rollout's observation.
func observed(r *rootState, f *fileState, owners []adapters.Owner) adapters.Observed {
	o := adapters.Observed{
		UpstreamID:       f.id,
		Source:           f.path,
		Root:             r.path,
		Cwd:              f.meta.Cwd,
		Title:            f.meta.Title,
		Owners:           owners,
		Activity:         session.ActivityIdle,
		ActivityEvidence: "rollout tail",
		ActivitySource:   session.SourceTranscript,
		LastActivity:     f.turn.Last,
	}
	if o.LastActivity.IsZero() {
		o.LastActivity = f.mtime
	}
	if f.compressed {
		o.ActivityEvidence = "compressed rollout"
		switch {
		case f.readErr != nil, f.partial != nil:
			o.Activity, o.ActivityEvidence = session.ActivityUnknown, "compressed rollout, not read to its end"
		}
		if f.turn.Last.IsZero() {
			o.LastActivity = f.nameTime
		}
	}
	if is, ok := f.turn.Drift.Problem("codex", f.meta.CLIVersion); ok {
		o.Problems = append(o.Problems, is)
	}
	if !f.read || !f.turn.Known || f.readErr != nil || f.partial != nil {
		o.Activity = session.ActivityUnknown
		return o
	}
	if !f.turn.Busy {
		return o
	}
	o.Activity = session.ActivityBusy
	for _, c := range f.turn.Pending {
		o.InFlight = append(o.InFlight, adapters.Issue{
			Kind: session.ProblemOrphanedToolCall, Key: c.ID, Since: c.Since,
			Detail: fmt.Sprintf("%s call %s without its output: %s", c.Name, c.ID, c.Args),
		})
	}
	if len(o.InFlight) == 0 {
		o.InFlight = append(o.InFlight, adapters.Issue{
			Kind: session.ProblemIncompleteMessage, Key: f.turn.TurnID, Since: f.turn.Since,
			Detail: fmt.Sprintf("turn %s started and never completed (no task_complete or turn_aborted)", f.turn.TurnID),
		})
	}
	return o
}

// warnings names rollouts read only in part: a first line that is not a
// session_meta, lines that do not parse.
func (a *Adapter) warnings() []adapters.InputError {
	var out []adapters.InputError
	for _, path := range a.order {
		for _, f := range a.roots[path].files {
			switch {
			case f.read && f.metaErr != nil:
				out = append(out, adapters.InputError{Input: f.path, Err: fmt.Errorf("session metadata not read: %w", f.metaErr)})
			case f.partial != nil:
				out = append(out, adapters.InputError{Input: f.path, Err: fmt.Errorf("compressed rollout read only in part (%w): its turn state is unknown", f.partial)})
			case f.bad > 0:
				out = append(out, adapters.InputError{Input: f.path, Err: fmt.Errorf("%d lines skipped: not JSON", f.bad)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Input < out[j].Input })
	return out
}

// updateWatch keeps the watch list: the fixed folders and the newest day
// folders of each home.
func (a *Adapter) updateWatch() {
	var out []string
	for _, path := range a.order {
		r := a.roots[path]
		for _, p := range []string{r.path, filepath.Join(r.path, "sessions"), filepath.Join(r.path, "archived_sessions"), filepath.Join(r.path, "thread-writer-locks")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
		var days []string
		for dir := range r.dirs {
			if rel, err := filepath.Rel(filepath.Join(r.path, "sessions"), dir); err == nil && strings.Count(rel, string(filepath.Separator)) >= 1 {
				days = append(days, dir) // year/month and year/month/day
			}
		}
		sort.Sort(sort.Reverse(sort.StringSlice(days)))
		out = append(out, days[:min(len(days), maxDayWatches)]...)
	}
	a.watchMu.Lock()
	a.watch = out
	a.watchMu.Unlock()
}

const maxDayWatches = 8

// driftReport takes the drift of rollouts no longer known out of the
// tally (walking only those that showed drift) and reports it.
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
