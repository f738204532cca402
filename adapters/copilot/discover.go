package copilot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// rootState is what the adapter knows of one Copilot home.
type rootState struct {
	path string
	// real is path with its symlinks resolved, as the kernel names the
	// files a process holds open ("" until it exists).
	real     string
	listed   bool
	mtime    time.Time // session-state/'s, at the last listing
	listedAt time.Time
	sessions map[string]*sessState // by id
}

// fileRead is what is known of one file of a session folder.
type fileRead struct {
	read     bool
	size     int64
	mtime    time.Time
	dev, ino uint64
	at       time.Time // when it was stat'ed: a stat within kit.RacyWindow of mtime is not trusted
}

// unchanged reports whether fi shows the file as it was read, and the
// read is settled.
func (f *fileRead) unchanged(fi fs.FileInfo) bool {
	dev, ino, _ := kit.FileID(fi)
	return f.read && fi.Size() == f.size && fi.ModTime().Equal(f.mtime) && dev == f.dev && ino == f.ino &&
		kit.Settled(f.mtime, f.at)
}

func (f *fileRead) set(fi fs.FileInfo, at time.Time) {
	f.dev, f.ino, _ = kit.FileID(fi)
	f.read, f.size, f.mtime, f.at = true, fi.Size(), fi.ModTime(), at
}

// sessState is what the adapter knows of one session folder.
type sessState struct {
	id  string
	dir string

	// The folder's listing: its mtime, and the pids its inuse.<pid>.lock
	// files name.
	dirRead fileRead
	inuse   []int
	// hasEvents, hasWorkspace: the files exist (at the last listing).
	hasEvents, hasWorkspace bool

	events fileRead
	offset int64 // where the next read of events.jsonl starts
	bad    int   // lines skipped as not JSON
	st     state

	ws    fileRead
	wsv   workspace
	wsErr string // what was not understood in workspace.yaml

	// gen changes with every read (checkpoint.go saves what changed).
	gen uint64
}

// Discover implements adapters.Adapter.
func (a *Adapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	full := a.rescan.Due(now, a.cfg.FullRescan)
	procs := a.copilotProcs(snap)
	var obs adapters.Observation
	var looked []*rootState
	var helds []map[string]bool
	var rootErrs []error
	for _, r := range a.roots {
		if err := ctx.Err(); err != nil {
			return adapters.Observation{}, fmt.Errorf("copilot discover: %w", err)
		}
		held := procs.heldIn(r)
		errs, ok := a.scanRoot(r, full, now, held)
		obs.Errors = append(obs.Errors, errs...)
		if !ok {
			for _, e := range errs {
				rootErrs = append(rootErrs, e)
			}
			continue
		}
		looked = append(looked, r)
		helds = append(helds, held)
	}
	// Every home read, no copilot running, no live process an inuse lock
	// names, no tool of a session alive and none remembered: nothing can
	// own a session or be its orphan, and when no folder or file changed
	// either (key), the last pass's sessions, all quiet, are this one's.
	key := kit.Key{a.gen, a.shape}
	set, again := a.quiet.Again(key)
	again = again && len(looked) == len(a.roots) && len(procs.list) == 0 && !procs.unreadable &&
		a.lineage.Len() == 0 && !lineage.AnyMarked(snap, sessionVar) && !a.liveLock(snap)
	if !again {
		for i, r := range looked {
			obs.Sessions = append(obs.Sessions, a.observe(r, procs, helds[i])...)
		}
	}
	if len(looked) == 0 && len(a.roots) > 0 {
		a.inputs.Report(obs.Errors)
		return adapters.Observation{}, fmt.Errorf("copilot: no Copilot home could be read: %w", errors.Join(rootErrs...))
	}
	if full {
		// Every folder was listed: a saved entry not taken by now has no
		// session any more (the next Checkpoint deletes it).
		a.restored.Drop()
	}
	switch {
	case again:
		obs.Quiet = set
	default:
		a.addToolProcs(obs.Sessions, snap, procs)
		adapters.SortByID(obs.Sessions)
		if len(looked) == len(a.roots) {
			obs.Sessions, obs.Quiet = a.quiet.SplitAt(key, obs.Sessions)
		} else {
			obs.Sessions, obs.Quiet = a.quiet.Split(obs.Sessions)
		}
	}
	sort.Slice(obs.Errors, func(i, j int) bool { return obs.Errors[i].Input < obs.Errors[j].Input })
	obs.Warnings = a.warnings()
	obs.Drift = a.driftReport()
	a.inputs.Report(obs.Errors)
	a.updateWatch(now)
	return obs, nil
}

// liveLock reports whether an inuse lock of some session names a live
// process: it may own that session (procView.ownersOf).
func (a *Adapter) liveLock(snap *proc.Snapshot) bool {
	if snap == nil {
		return false
	}
	for _, r := range a.roots {
		for _, s := range r.sessions {
			for _, pid := range s.inuse {
				if p := snap.Procs[pid]; p != nil && !p.Exited() {
					return true
				}
			}
		}
	}
	return false
}

// scanRoot lists a home's sessions where it changed and reads what
// changed in each that may change. ok is false when the home itself could
// not be looked at.
func (a *Adapter) scanRoot(r *rootState, full bool, now time.Time, held map[string]bool) ([]adapters.InputError, bool) {
	fi, err := os.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if len(r.sessions) > 0 {
			a.shape++
		}
		clear(r.sessions)
		r.listed = false
		return nil, true // Copilot never ran with this home
	case err != nil:
		return []adapters.InputError{{Input: r.path, Err: err}}, false
	case !fi.IsDir():
		return []adapters.InputError{{Input: r.path, Err: errors.New("not a directory")}}, false
	}
	if real, err := filepath.EvalSymlinks(r.path); err == nil {
		r.real = real
	}
	var errs []adapters.InputError
	dir := filepath.Join(r.path, "session-state")
	if err := a.listSessions(r, dir, full, now); err != nil {
		errs = append(errs, adapters.InputError{Input: dir, Err: err})
	}
	var due []*sessState
	for _, s := range r.sessions {
		if full || held[s.id] || a.hot(s, now) {
			due = append(due, s)
		}
	}
	// Many sessions (a first start, a restart) are read on every core,
	// then counted in order.
	kit.ReadEach(due, func(s *sessState) (bool, error) { return a.read(s, now) }, func(s *sessState, read bool, err error) {
		if read {
			a.noteRead(s)
		}
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				delete(r.sessions, s.id)
				a.shape++
				return
			}
			errs = append(errs, adapters.InputError{Input: s.dir, Err: err})
		}
	})
	return errs, true
}

// hot reports whether a session folder may change without a full rescan
// noticing soon: one not read yet, written within ColdAfter, or with
// inuse files (a process has it, or one died with it).
func (a *Adapter) hot(s *sessState, now time.Time) bool {
	return !s.dirRead.read || len(s.inuse) > 0 || now.Sub(s.lastWrite()) < a.cfg.ColdAfter
}

func (s *sessState) lastWrite() time.Time {
	t := s.dirRead.mtime
	for _, x := range []time.Time{s.events.mtime, s.ws.mtime} {
		if x.After(t) {
			t = x
		}
	}
	return t
}

// listSessions lists session-state/ when its mtime changed (or the last
// listing was not settled, or at a full rescan). A folder that does not
// exist has no sessions; one that cannot be read keeps its last listing.
func (a *Adapter) listSessions(r *rootState, dir string, full bool, now time.Time) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if len(r.sessions) > 0 {
			a.shape++
		}
		clear(r.sessions)
		r.listed = false
		return nil
	}
	if err != nil {
		return err
	}
	if r.listed && !full && fi.ModTime().Equal(r.mtime) && kit.Settled(r.mtime, r.listedAt) {
		return nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, e := range ents {
		id := e.Name()
		if !e.IsDir() || !isSessionID(id) {
			continue
		}
		seen[id] = true
		if r.sessions[id] == nil {
			path := filepath.Join(dir, id)
			s, _ := a.restored.Take(path)
			if s == nil || s.id != id {
				s = &sessState{}
			} else {
				a.drift.Set(path, "event log", s.st.Version, s.st.Drift)
			}
			s.id, s.dir = id, path
			r.sessions[id] = s
			a.shape++
		}
	}
	for id := range r.sessions {
		if !seen[id] {
			delete(r.sessions, id)
			a.shape++
		}
	}
	r.listed, r.mtime, r.listedAt = true, fi.ModTime(), now
	return nil
}

// isSessionID: Copilot names a session folder by its uuid (lowercase
// hex, 8-4-4-4-12).
func isSessionID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// read looks at one session folder: lists it when it changed, and reads
// what changed of events.jsonl and workspace.yaml. It touches s alone
// (folders are read on several cores); read says it changed s, which
// noteRead then counts.
func (a *Adapter) read(s *sessState, now time.Time) (read bool, err error) {
	fi, err := os.Stat(s.dir)
	if err != nil {
		return false, err
	}
	changed := false
	if !s.dirRead.unchanged(fi) {
		ents, err := os.ReadDir(s.dir)
		if err != nil {
			return false, err
		}
		s.inuse, s.hasEvents, s.hasWorkspace = nil, false, false
		for _, e := range ents {
			switch n := e.Name(); {
			case n == "events.jsonl":
				s.hasEvents = true
			case n == "workspace.yaml":
				s.hasWorkspace = true
			default:
				if pid, ok := inusePID(n, ".lock"); ok {
					s.inuse = append(s.inuse, pid)
				}
			}
		}
		sort.Ints(s.inuse)
		s.dirRead.set(fi, now)
		changed = true
	}
	var errs []error
	if c, err := a.readEvents(s, now); err != nil {
		errs = append(errs, fmt.Errorf("events.jsonl: %w", err))
	} else {
		changed = changed || c
	}
	if c, err := a.readWorkspace(s, now); err != nil {
		errs = append(errs, fmt.Errorf("workspace.yaml: %w", err))
	} else {
		changed = changed || c
	}
	return changed, errors.Join(errs...)
}

// noteRead counts a read of s: its gen, and its drift in the tally.
func (a *Adapter) noteRead(s *sessState) {
	a.gen++
	s.gen = a.gen
	a.drift.Set(s.dir, "event log", s.st.Version, s.st.Drift)
}

// inusePID reads the pid of an inuse.<pid><ext> name.
func inusePID(name, ext string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "inuse.")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, ext)
	if !ok || num == "" || len(num) > 10 {
		return 0, false
	}
	pid, err := strconv.Atoi(num)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != num {
		return 0, false
	}
	return pid, true
}

// readEvents reads what was appended to events.jsonl since the last read;
// a file replaced (another inode) or shrunk is read from its start.
func (a *Adapter) readEvents(s *sessState, now time.Time) (bool, error) {
	path := filepath.Join(s.dir, "events.jsonl")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		changed := s.events.read
		s.events, s.offset, s.bad, s.st = fileRead{}, 0, 0, state{}
		return changed, nil
	}
	if err != nil {
		return false, err
	}
	if s.events.unchanged(fi) {
		return false, nil
	}
	dev, ino, _ := kit.FileID(fi)
	if s.events.read && (dev != s.events.dev || ino != s.events.ino || fi.Size() < s.offset) {
		s.offset, s.bad, s.st = 0, 0, state{}
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	st := s.st
	st.Pending = append([]call(nil), st.Pending...)
	st.Perms = append([]perm(nil), st.Perms...)
	end, bad, err := readEvents(f, s.offset, fi.Size(), &st)
	if err != nil {
		return false, err
	}
	s.st, s.offset, s.bad = st, end, s.bad+bad
	s.events.set(fi, now)
	return true, nil
}

// readWorkspace reads workspace.yaml when it changed (Copilot rewrites it
// whole).
func (a *Adapter) readWorkspace(s *sessState, now time.Time) (bool, error) {
	path := filepath.Join(s.dir, "workspace.yaml")
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		changed := s.ws.read
		s.ws, s.wsv, s.wsErr = fileRead{}, workspace{}, ""
		return changed, nil
	}
	if err != nil {
		return false, err
	}
	if s.ws.unchanged(fi) {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxWorkspace+1))
	if err != nil {
		return false, err
	}
	if len(b) > maxWorkspace {
		s.wsv, s.wsErr = workspace{}, fmt.Sprintf("longer than %d bytes: not read", maxWorkspace)
	} else {
		w, err := parseWorkspace(b)
		s.wsv, s.wsErr = w, ""
		if err != nil {
			s.wsErr = err.Error()
		}
	}
	s.ws.set(fi, now)
	return true, nil
}

// observe turns the known sessions of r into observations.
func (a *Adapter) observe(r *rootState, procs *procView, held map[string]bool) []adapters.Observed {
	out := make([]adapters.Observed, 0, len(r.sessions))
	for _, s := range r.sessions {
		if !s.events.read && !s.ws.read {
			continue // a folder being made: nothing says what it is yet
		}
		o := observed(r, s)
		procs.ownersOf(&o, s, r)
		out = append(out, o)
	}
	return out
}

// observed is one session's observation, its owners aside.
func observed(r *rootState, s *sessState) adapters.Observed {
	st := &s.st
	o := adapters.Observed{
		UpstreamID:       s.id,
		Source:           filepath.Join(s.dir, "events.jsonl"),
		Root:             r.path,
		Cwd:              s.wsv.Cwd,
		Title:            s.wsv.Name,
		Activity:         session.ActivityIdle,
		ActivityEvidence: "events.jsonl",
		ActivitySource:   session.SourceTranscript,
		LastActivity:     st.Last,
	}
	if o.Cwd == "" {
		o.Cwd = st.Cwd
	}
	if o.Title == "" {
		o.Title = st.Prompt
	}
	if o.LastActivity.IsZero() {
		o.LastActivity = s.lastWrite()
	}
	if is, ok := st.Drift.Problem("copilot", st.Version); ok {
		o.Problems = append(o.Problems, is)
	}
	switch {
	case !s.events.read:
		// The TUI makes the folder and workspace.yaml at its start, and
		// events.jsonl only with the first prompt: nothing ran yet.
		o.ActivityEvidence = "workspace.yaml (no events yet)"
		return o
	case !st.Known:
		o.Activity = session.ActivityUnknown
		o.ActivityEvidence = "events.jsonl without a session.start"
		return o
	}
	if st.Busy || len(st.Pending) > 0 || len(st.Perms) > 0 {
		o.Activity = session.ActivityBusy
	}
	if len(st.Perms) > 0 {
		p := st.Perms[len(st.Perms)-1]
		o.Activity, o.ActivityAt = session.ActivityWaiting, p.Since
		o.ActivityEvidence = "events.jsonl: permission.requested without permission.completed"
		o.WaitingFor = &session.WaitingFor{Kind: session.WaitingPermission, Tool: toolOf(st, p), Input: p.Detail}
	} else if c, ok := asking(st); ok {
		o.Activity, o.ActivityAt = session.ActivityWaiting, c.Since
		o.ActivityEvidence = "events.jsonl: " + c.Name + " running"
		o.WaitingFor = &session.WaitingFor{Kind: session.WaitingQuestion, Tool: c.Name, Question: c.Args}
	}
	if o.Activity == session.ActivityIdle {
		return o
	}
	// With the owner dead, what was in flight.
	for _, c := range st.Pending {
		o.InFlight = append(o.InFlight, adapters.Issue{
			Kind: session.ProblemOrphanedToolCall, Key: c.ID, Since: c.Since,
			Detail: fmt.Sprintf("%s call %s without its completion: %s", c.Name, c.ID, c.Args),
		})
	}
	if len(o.InFlight) == 0 {
		o.InFlight = append(o.InFlight, adapters.Issue{
			Kind: session.ProblemIncompleteMessage, Key: "turn", Since: st.Since,
			Detail: "a prompt or tool results never got the model's reply (no assistant.turn_end ending the interaction)",
		})
	}
	return o
}

// toolOf names the tool a permission is for: the pending call it names,
// else its kind.
func toolOf(st *state, p perm) string {
	for _, c := range st.Pending {
		if c.ID == p.CallID {
			return c.Name
		}
	}
	return p.Kind
}

// asking returns a running tool that waits for the user's answer:
// ask_user, whose question Copilot shows without writing it (its
// user_input.requested is ephemeral), so the call's arguments say it.
func asking(st *state) (call, bool) {
	for i := len(st.Pending) - 1; i >= 0; i-- {
		if st.Pending[i].Name == "ask_user" {
			return st.Pending[i], true
		}
	}
	return call{}, false
}

// warnings names sessions read only in part: lines that do not parse,
// a workspace.yaml not wholly understood.
func (a *Adapter) warnings() []adapters.InputError {
	var out []adapters.InputError
	for _, r := range a.roots {
		for _, s := range r.sessions {
			if s.bad > 0 {
				out = append(out, adapters.InputError{Input: filepath.Join(s.dir, "events.jsonl"), Err: fmt.Errorf("%d lines skipped: not JSON", s.bad)})
			}
			if s.wsErr != "" {
				out = append(out, adapters.InputError{Input: filepath.Join(s.dir, "workspace.yaml"), Err: errors.New(s.wsErr)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Input < out[j].Input })
	return out
}

// updateWatch keeps the watch list: each home, its session-state/, and
// the folders of hot sessions (bounded).
func (a *Adapter) updateWatch(now time.Time) {
	var out []string
	for _, r := range a.roots {
		for _, p := range []string{r.path, filepath.Join(r.path, "session-state")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
		var hot []*sessState
		for _, s := range r.sessions {
			if s.dirRead.read && a.hot(s, now) {
				hot = append(hot, s)
			}
		}
		sort.Slice(hot, func(i, j int) bool { return hot[i].lastWrite().After(hot[j].lastWrite()) })
		for _, s := range hot[:min(len(hot), maxSessionWatches)] {
			out = append(out, s.dir)
		}
	}
	a.watchMu.Lock()
	a.watch = out
	a.watchMu.Unlock()
}

const maxSessionWatches = 16

// driftReport takes the drift of sessions no longer listed out of the
// tally (walking only those that showed drift) and reports it.
func (a *Adapter) driftReport() []adapters.Drift {
	if a.drift.Len() > 0 {
		a.drift.Keep(func(dir string) bool {
			for _, r := range a.roots {
				if s := r.sessions[filepath.Base(dir)]; s != nil && s.dir == dir {
					return true
				}
			}
			return false
		})
	}
	return a.drift.Report(&a.hookDrift)
}
