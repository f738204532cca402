package claude

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/proc"
)

// Discover implements adapters.Adapter. See the package comment; snap may
// be nil (then no owner is inferred and no orphan is looked for).
func (a *Adapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	full := a.rescan.Due(now, a.cfg.FullRescan)
	if full {
		a.stats.FullRescans++
	}
	a.stats.Passes++

	view := newProcView(snap, a.host, a.cfg.DefaultRoot, a.cfg.Home)
	if !a.cfg.NoLearnedRoots {
		a.learnRoots(view)
	}

	var obs adapters.Observation
	reads := a.newReadPool(ctx)
	looked := 0
	var rootErrs []error
	for _, r := range a.roots {
		if ctx.Err() != nil {
			break // reads.wait reports it
		}
		errs, ok := a.scanRoot(r, full, view, reads)
		obs.Errors = append(obs.Errors, errs...)
		if ok {
			looked++
		} else {
			for _, e := range errs {
				rootErrs = append(rootErrs, e)
			}
		}
	}
	readErrs, nreads, err := reads.wait()
	if err != nil {
		return adapters.Observation{}, fmt.Errorf("claude discover: %w", err)
	}
	if len(a.roots) > 0 && looked == 0 {
		a.inputs.Report(obs.Errors)
		return adapters.Observation{}, fmt.Errorf("claude: no config root could be read: %w", errors.Join(rootErrs...))
	}
	obs.Errors = append(obs.Errors, readErrs...)
	shape := a.shapePrint()
	obs.Warnings = a.warnings(shape)
	obs.Drift = a.driftReport()

	obs.Sessions, obs.Quiet = a.assemble(view, shape)
	// Saved state the first full pass did not find is stale: Checkpoint
	// drops it.
	if a.restored.Holding() {
		a.logRestored()
		a.restored.Drop()
	}
	sort.Slice(obs.Errors, func(i, j int) bool { return obs.Errors[i].Input < obs.Errors[j].Input })
	a.inputs.Report(obs.Errors)
	// The watch list ranks projects by their newest write: it changes only
	// with what shapePrint covers, or a directory listed again.
	if full || shape != a.watchShape {
		a.updateWatch()
		a.watchShape = shape
	}
	a.countState()
	a.log.Debug("claude pass",
		zap.Bool("full", full), zap.Int("sessions", obs.Len()), zap.Int("reads", nreads),
		zap.Int("errors", len(obs.Errors)), zap.Int64("bytes_read_total", a.bytesRead.Load()))
	return obs, nil
}

func (a *Adapter) countState() {
	t, r := 0, 0
	for _, rs := range a.roots {
		for _, p := range rs.projects {
			t += len(p.files)
		}
		r += len(rs.regs)
	}
	a.stats.Transcripts, a.stats.RegistryEntries, a.stats.Roots = t, r, len(a.roots)
}

// fileState is one transcript as last read: the read position, keyed on
// (device, inode, size, mtime), and what the read lines showed.
type fileState struct {
	serial uint64
	path   string
	// dir is the project dir the listing found the file in: path's dir,
	// kept rather than cut from path for every observation.
	dir  string
	id   string // session id: the file name without .jsonl
	read bool   // read at least once

	dev, ino    uint64
	hasID       bool
	size        int64
	mtime       time.Time
	offset      int64
	skipPartial bool
	sum         transcript.Summary
	// bad counts the lines skipped or repaired since the file was last
	// listed from its start: named in health as a warning.
	bad transcript.Counts
	// gen counts the reads that changed this state, so Checkpoint saves
	// only what changed since the last save (see checkpoint.go).
	gen uint64
	// obs is the session as last observed from this file alone (no
	// registry entry, argv or cwd match), built at obsGen; see
	// observeFile.
	obs    *adapters.Observed
	obsGen uint64
	// cwd is filepath.Clean(sum.Cwd), kept for the passes that look it
	// up; cwdOf is the sum.Cwd it was made from.
	cwd, cwdOf string
	// hotMark is the last pass that listed the file to stat, and
	// byCwd whether its project's hotIndex has it by cwd (hot.go).
	hotMark uint64
	byCwd   bool
}

// cwdKey is the transcript's cwd, cleaned, as the process view keys it.
func (f *fileState) cwdKey() string {
	if f.cwdOf != f.sum.Cwd || f.cwd == "" {
		f.cwd, f.cwdOf = filepath.Clean(f.sum.Cwd), f.sum.Cwd
	}
	return f.cwd
}

// scanRoot stats and lists one root and hands the transcripts to read to
// reads. ok is false when the root itself could not be looked at.
func (a *Adapter) scanRoot(r *rootState, full bool, v *procView, reads *readPool) (errs []adapters.InputError, ok bool) {
	r.ok = false
	fi, err := a.fs.Stat(r.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// No such root (Claude never ran with it): nothing to see, no error.
		*r = *newRootState(r.path, r.learned)
		r.ok = true
		return nil, true
	case err != nil:
		return []adapters.InputError{{Input: r.path, Err: err}}, false
	case !fi.IsDir():
		return []adapters.InputError{{Input: r.path, Err: errors.New("not a directory")}}, false
	}
	r.present, r.ok = true, true
	errs = append(errs, a.scanRegistry(r, full)...)
	return append(errs, a.scanProjects(r, full, a.hotSet(r, v), reads)...), true
}

// scanProjects looks at the root's projects/: lists it again when it
// changed, then scans each project.
func (a *Adapter) scanProjects(r *rootState, full bool, h *hot, reads *readPool) []adapters.InputError {
	dir := filepath.Join(r.path, "projects")
	fi, err := a.fs.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		r.projectsDir = dirState{}
		clear(r.projects)
		a.dropped.Store(true)
		return nil
	case err != nil:
		// Keep what was known; the sessions of this root are not reported
		// this pass (the tracker keeps their last state).
		for _, p := range r.projects {
			p.ok = false
		}
		return []adapters.InputError{{Input: dir, Err: err}}
	}
	r.projectsDir.exists = true
	if r.projectsDir.needList(fi, full) {
		if err := a.listProjects(r, dir); err != nil {
			for _, p := range r.projects {
				p.ok = false
			}
			return []adapters.InputError{{Input: dir, Err: err}}
		}
		r.projectsDir.listedNow(fi)
	}
	return a.scanProjectDirs(r, full, h, reads)
}

// listProjects lists dir, the root's projects/: a state for each project
// dir new in it, none for one gone from it. Symlinks are never followed:
// they are kept as skipped.
func (a *Adapter) listProjects(r *rootState, dir string) error {
	ents, err := a.fs.ReadDir(dir)
	if err != nil {
		return err
	}
	seen := make(map[string]bool, len(ents))
	r.skipped = nil
	for _, e := range ents {
		if e.Type()&fs.ModeSymlink != 0 {
			r.skipped = append(r.skipped, skippedLink(a.fs, filepath.Join(dir, e.Name())))
			continue
		}
		if !e.IsDir() { // symlinks too: never followed
			continue
		}
		seen[e.Name()] = true
		if r.projects[e.Name()] == nil {
			r.projects[e.Name()] = &projectState{serial: nextSerial(), path: filepath.Join(dir, e.Name()), files: map[string]*fileState{}}
		}
	}
	for name := range r.projects {
		if !seen[name] {
			delete(r.projects, name)
			a.dropped.Store(true)
		}
	}
	return nil
}

// scanProjectDirs scans the root's projects, listed, hands the transcripts
// to read to reads and returns what could not be looked at. A project dir
// gone since the listing is forgotten.
func (a *Adapter) scanProjectDirs(r *rootState, full bool, h *hot, reads *readPool) []adapters.InputError {
	// The projects are looked at on Workers goroutines: a full pass stats
	// every transcript (10,000 stats were a third of a restart), and each
	// project's state is its own.
	type scanned struct {
		name string
		p    *projectState
		err  *adapters.InputError
	}
	work := make([]scanned, 0, len(r.projects))
	for name, p := range r.projects {
		work = append(work, scanned{name: name, p: p})
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(a.cfg.Workers, len(work)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(work); i = int(next.Add(1)) - 1 {
				work[i].err = a.scanProject(work[i].p, full, h, reads)
			}
		}()
	}
	wg.Wait()
	var errs []adapters.InputError
	for _, w := range work {
		if w.err != nil {
			if errors.Is(w.err.Err, fs.ErrNotExist) {
				delete(r.projects, w.name)
				a.dropped.Store(true)
				continue
			}
			errs = append(errs, *w.err)
		}
	}
	return errs
}

// scanProject lists and stats one project's transcripts and hands those
// to read to reads, each once the scan is done with its state.
func (a *Adapter) scanProject(p *projectState, full bool, h *hot, reads *readPool) *adapters.InputError {
	p.ok = false
	fi, err := a.fs.Stat(p.path)
	if err != nil {
		return &adapters.InputError{Input: p.path, Err: err}
	}
	if p.dir.needList(fi, full) {
		ents, err := a.fs.ReadDir(p.path)
		if err != nil {
			return &adapters.InputError{Input: p.path, Err: err}
		}
		seen := make(map[string]bool, len(ents))
		p.skipped = nil
		for _, e := range ents {
			name := e.Name()
			if !transcript.IsName(name) {
				continue
			}
			if e.Type()&fs.ModeSymlink != 0 {
				p.skipped = append(p.skipped, skippedLink(a.fs, filepath.Join(p.path, name)))
				continue
			}
			if !e.Type().IsRegular() {
				p.skipped = append(p.skipped, adapters.InputError{Input: filepath.Join(p.path, name), Err: errors.New("not a regular file: skipped")})
				continue
			}
			seen[name] = true
			if p.files[name] == nil {
				path := filepath.Join(p.path, name)
				f := a.takeRestored(path)
				if f == nil {
					f = &fileState{path: path, id: strings.TrimSuffix(name, ".jsonl")}
				} else {
					a.drift.Set(path, "transcript", f.sum.Version, f.sum.Drift())
				}
				f.serial, f.dir = nextSerial(), p.path
				p.files[name] = f
				p.filesChanged()
			}
		}
		for name := range p.files {
			if !seen[name] {
				delete(p.files, name)
				p.filesChanged()
				a.dropped.Store(true)
			}
		}
		p.dir.listedNow(fi)
	}
	p.ok = true
	var firstErr *adapters.InputError
	now := time.Now()
	files := p.hot.files(p, full, h, now)
	var warm []*fileState
	for _, f := range files {
		fi, err := a.fs.Stat(f.path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			delete(p.files, f.id+".jsonl")
			p.filesChanged()
			a.dropped.Store(true)
			continue
		case err != nil:
			if firstErr == nil {
				firstErr = &adapters.InputError{Input: f.path, Err: err}
			}
			warm = append(warm, f) // looked at again next pass
			continue
		}
		if h.byTime(f.read, fi.ModTime(), now) {
			warm = append(warm, f)
		}
		// Last: once handed over, f belongs to the reader.
		if k := a.plan(f, fi); k != jobNone {
			p.shapeOK = false // the read changes the file's state
			reads.submit(&job{f: f, fi: fi, kind: k})
		}
	}
	p.hot.settle(warm)
	return firstErr
}

type jobKind int

const (
	jobNone    jobKind = iota
	jobList            // first listing, or a restart: head and tail
	jobRestart         // replaced, shrunk or rewritten: list again from scratch
	jobAppend          // read the appended bytes
	jobRetail          // grew too much: keep the head, re-read the tail window
)

type job struct {
	f    *fileState
	fi   fs.FileInfo
	kind jobKind
}

// plan decides what a transcript needs from its stat alone.
func (a *Adapter) plan(f *fileState, fi fs.FileInfo) jobKind {
	dev, ino, hasID := kit.FileID(fi)
	size, mtime := fi.Size(), fi.ModTime()
	switch {
	case !f.read:
		return jobList
	case hasID && f.hasID && (dev != f.dev || ino != f.ino):
		return jobRestart // replaced (a new inode at the same path)
	case size < f.size:
		return jobRestart // shrunk (rewritten by compaction)
	case size > f.size:
		if size-f.offset > a.cfg.MaxAppendBytes {
			return jobRetail
		}
		return jobAppend
	case !mtime.Equal(f.mtime):
		return jobRestart // same size, new content
	}
	return jobNone
}

// readPool reads planned transcripts on Workers goroutines while the scan
// that plans them goes on. On a cold start the scan's stats (inode reads)
// and the transcripts' data reads then wait on the disk together, instead
// of every stat of every project before the first read. A job is handed
// over once the scan is done with its fileState: from then on the worker
// owns it until wait returns. At most Workers files are open at once.
type readPool struct {
	a     *Adapter
	ctx   context.Context
	start sync.Once
	ch    chan *job
	wg    sync.WaitGroup

	mu    sync.Mutex
	jobs  int
	total transcript.Counts
	kinds [jobRetail + 1]uint64
	errs  []adapters.InputError
}

func (a *Adapter) newReadPool(ctx context.Context) *readPool {
	return &readPool{a: a, ctx: ctx, ch: make(chan *job)}
}

// submit hands j to a worker, starting the workers at the first job (a
// steady pass has none).
func (p *readPool) submit(j *job) {
	p.start.Do(func() {
		for range p.a.cfg.Workers {
			p.wg.Add(1)
			go p.work()
		}
	})
	p.ch <- j
}

func (p *readPool) work() {
	defer p.wg.Done()
	var c transcript.Counts
	var kinds [jobRetail + 1]uint64
	var errs []adapters.InputError
	n := 0
	for j := range p.ch {
		n++
		if err := p.ctx.Err(); err != nil {
			continue // wait reports the context's error
		}
		jc, err := p.a.runJob(j)
		c.Add(jc)
		kinds[j.kind]++
		if err != nil {
			errs = append(errs, adapters.InputError{Input: j.f.path, Err: err})
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs += n
	p.total.Add(c)
	for k, v := range kinds {
		p.kinds[k] += v
	}
	p.errs = append(p.errs, errs...)
}

// wait waits for every submitted job, adds the reads to the adapter's
// stats and returns the transcripts that could not be read and the number
// of jobs. No job may be submitted after it.
func (p *readPool) wait() ([]adapters.InputError, int, error) {
	close(p.ch)
	p.wg.Wait()
	a := p.a
	a.stats.LinesRead += p.total.Lines
	a.stats.LinesTooLong += p.total.TooLong
	a.stats.LinesCorrupt += p.total.Corrupt
	a.stats.LinesGlued += p.total.Glued
	a.stats.FilesListed += p.kinds[jobList] + p.kinds[jobRestart]
	a.stats.FilesRestarted += p.kinds[jobRestart]
	a.stats.FilesAppended += p.kinds[jobAppend]
	a.stats.FilesRetailed += p.kinds[jobRetail]
	if err := p.ctx.Err(); err != nil {
		return nil, p.jobs, err
	}
	return p.errs, p.jobs, nil
}

// runJob reads one transcript. On error the file keeps its last state.
func (a *Adapter) runJob(j *job) (transcript.Counts, error) {
	f := j.f
	file, err := a.fs.Open(f.path)
	if err != nil {
		return transcript.Counts{}, err
	}
	defer file.Close()
	r := countingFile{file, &a.bytesRead}
	size := j.fi.Size()
	var res transcript.Result
	sum := f.sum
	switch j.kind {
	case jobList, jobRestart:
		sum = transcript.Summary{}
		res, err = transcript.List(r, size, a.cfg.WindowBytes, &sum)
	case jobRetail:
		sum.ResetTurn()
		err = transcript.Tail(r, size, a.cfg.WindowBytes, &sum, &res)
	case jobAppend:
		sum.Pending = append([]transcript.ToolCall(nil), sum.Pending...)
		res, err = transcript.ReadAppended(r, f.offset, size, f.skipPartial, a.cfg.MaxLineBytes, &sum)
	}
	if err != nil {
		return res.Counts, fmt.Errorf("read transcript: %w", err)
	}
	dev, ino, hasID := kit.FileID(j.fi)
	f.read = true
	f.dev, f.ino, f.hasID = dev, ino, hasID
	f.size, f.mtime = size, j.fi.ModTime()
	f.offset, f.skipPartial = res.Offset, res.SkipPartial
	f.sum = sum
	if j.kind == jobList || j.kind == jobRestart {
		f.bad = transcript.Counts{}
	}
	f.bad.Add(res.Counts)
	f.gen++
	a.drift.Set(f.path, "transcript", sum.Version, sum.Drift())
	return res.Counts, nil
}

// skippedLink names a symbolic link the scan does not follow, with why
// following it would fail if it would (a loop, a dangling target).
func skippedLink(fsys FS, path string) adapters.InputError {
	if _, err := fsys.Stat(path); err != nil {
		return adapters.InputError{Input: path, Err: fmt.Errorf("a symbolic link, not followed (it leads nowhere: %w)", errors.Unwrap(err))}
	}
	return adapters.InputError{Input: path, Err: errors.New("a symbolic link, not followed")}
}

// warnings names the inputs read only in part, as of the last reads: bad
// lines, links not followed, registry entries not used. A registry entry
// is named only once it stayed unparseable past the racy window (a writer
// caught mid-write fixes it within it).
func (a *Adapter) warnings(shape uint64) []adapters.InputError {
	var out []adapters.InputError
	for _, r := range a.roots {
		out = append(out, r.skipped...)
		for _, rf := range r.regs {
			if rf.bad != nil && kit.Settled(rf.mtime, time.Now()) {
				out = append(out, adapters.InputError{Input: rf.path, Err: rf.bad})
			}
		}
		for _, p := range r.projects {
			out = append(out, p.skipped...)
		}
	}
	// The transcripts' own warnings change only with what shapePrint
	// covers: listed once per change, not walked every pass.
	if !a.fileWarnOK || shape != a.fileWarnShape {
		a.fileWarn = a.fileWarn[:0]
		for _, r := range a.roots {
			for _, p := range r.projects {
				for _, f := range p.files {
					if msg := f.bad.Describe(a.cfg.MaxLineBytes, a.cfg.WindowBytes); msg != "" {
						a.fileWarn = append(a.fileWarn, adapters.InputError{Input: f.path, Err: errors.New(msg)})
					}
				}
			}
		}
		a.fileWarnShape, a.fileWarnOK = shape, true
	}
	out = append(out, a.fileWarn...)
	sort.Slice(out, func(i, j int) bool { return out[i].Input < out[j].Input })
	return out
}

// driftReport takes the drift of transcripts and registry entries gone
// out of the tally (walking only those that showed drift, and the
// transcripts' only after one was dropped) and reports it.
func (a *Adapter) driftReport() []adapters.Drift {
	if a.dropped.Swap(false) && a.drift.Len() > 0 {
		a.drift.Keep(func(path string) bool { return a.transcriptAt(path) != nil })
	}
	if a.regDrift.Len() > 0 {
		a.regDrift.Keep(func(path string) bool {
			for _, r := range a.roots {
				if rf := r.regs[filepath.Base(path)]; rf != nil && rf.path == path && rf.entry != nil {
					return true
				}
			}
			return false
		})
	}
	return a.drift.Report(&a.regDrift, &a.hookDrift)
}

// transcriptAt is the state of the transcript at path, <root>/projects/
// <project>/<id>.jsonl, nil if none is kept.
func (a *Adapter) transcriptAt(path string) *fileState {
	proj := filepath.Dir(path)
	for _, r := range a.roots {
		if p := r.projects[filepath.Base(proj)]; p != nil {
			if f := p.files[filepath.Base(path)]; f != nil && f.path == path {
				return f
			}
		}
	}
	return nil
}
