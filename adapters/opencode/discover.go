package opencode

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

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// databases lists the opencode*.db files of the data dir. A missing data
// dir is no error: OpenCode is not installed (yet).
func (a *Adapter) databases() ([]string, error) {
	ents, err := os.ReadDir(a.cfg.DataDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list OpenCode data dir: %w", err)
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "opencode") || !strings.HasSuffix(n, ".db") || e.IsDir() {
			continue
		}
		out = append(out, filepath.Join(a.cfg.DataDir, n))
	}
	sort.Strings(out)
	return out, nil
}

// Discover reads every database and the legacy storage, finds owners and
// servers in snap (nil: no owners this pass), and reports every session.
// A database that cannot be read is an Observation.Errors entry and its
// sessions are left out, so they keep their last known state; the error
// is non-nil only when no input at all could be read.
func (a *Adapter) Discover(ctx context.Context, snap *proc.Snapshot) (adapters.Observation, error) {
	a.passMu.Lock()
	defer a.passMu.Unlock()
	now := a.cfg.Now()

	paths, err := a.databases()
	if err != nil {
		return adapters.Observation{}, err
	}
	if a.sessions == nil {
		a.sessions, a.owners, a.acts = map[string]*sessionData{}, map[string][]adapters.Owner{}, map[string]*actResult{}
	}
	clear(a.sessions)
	clear(a.owners)
	clear(a.acts)
	g := &gathered{sessions: a.sessions}
	if err := a.readDatabases(ctx, now, paths, g); err != nil {
		return adapters.Observation{}, err
	}
	if err := a.readLegacy(ctx, g); err != nil {
		return adapters.Observation{}, err
	}
	if err := g.unreadable(); err != nil {
		return g.obs, err
	}

	procs := a.inspect(snap, paths)
	servers := a.probeServers(ctx, procs, statusDirs(g.sessions, now))
	p := a.newPass(ctx, now, g.sessions, procs, servers, paths)
	orphans := a.orphans(snap, procs)

	ids := make([]string, 0, len(g.sessions))
	for id := range g.sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	clear(a.built)
	built := a.built[:0]
	for _, id := range ids {
		built = append(built, p.observe(g.sessions[id], orphans[id]))
	}
	a.built = built
	g.obs.Sessions = built
	g.obs.Drift = a.driftReport(g.sessions)

	a.remember(g.obs.Sessions, servers, now)
	// The sessions nothing runs for go to the tracker as one set, which
	// it skips while the set is the last one (the tracker looked up,
	// fingerprinted and compared 2,000 sessions of history every pass).
	// With the kept maps and list, an idle pass allocates 0.26 MB, not
	// 3.7 (BenchmarkIdlePass/opencode): the garbage that made an idle
	// daemon over every agent's home collect every few seconds.
	g.obs.Sessions, g.obs.Quiet = a.quiet.Split(g.obs.Sessions)
	return g.obs, nil
}

// driftReport brings the drift tally to the sessions of the pass (a
// session read again to the same drift costs a comparison) and reports
// it.
func (a *Adapter) driftReport(sessions map[string]*sessionData) []adapters.Drift {
	for id, s := range sessions {
		a.drift.Set(id, "session", s.Version, s.drift)
	}
	if a.drift.Len() > 0 {
		a.drift.Keep(func(id string) bool { return sessions[id] != nil })
	}
	return a.drift.Report()
}

// gathered is what a pass has read: its sessions by id, the observation's
// errors and warnings so far, and how many inputs it tried and could not
// read.
type gathered struct {
	obs      adapters.Observation
	sessions map[string]*sessionData
	inputs   int
	failed   int
}

// unreadable is the pass's error when no input at all could be read.
func (g *gathered) unreadable() error {
	if g.inputs == 0 || g.failed != g.inputs {
		return nil
	}
	errs := make([]error, len(g.obs.Errors))
	for i, e := range g.obs.Errors {
		errs[i] = fmt.Errorf("%s: %w", e.Input, e.Err)
	}
	return fmt.Errorf("no OpenCode data could be read: %w", errors.Join(errs...))
}

// readDatabases reads each database into g (of two copies of a session,
// the one written last wins) and forgets the databases no longer listed.
// It fails only when ctx is done.
func (a *Adapter) readDatabases(ctx context.Context, now time.Time, paths []string, g *gathered) error {
	keep := map[string]bool{}
	for _, path := range paths {
		keep[path] = true
		r := a.reader(path)
		g.inputs++
		if err := r.read(ctx, now, a.cfg.FullEvery); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			g.failed++
			g.obs.Errors = append(g.obs.Errors, adapters.InputError{Input: path, Err: err})
			continue
		}
		a.published(path, r)
		if r.warning != nil {
			g.obs.Warnings = append(g.obs.Warnings, adapters.InputError{Input: path, Err: r.warning})
		}
		for id, s := range r.sessions {
			if old := g.sessions[id]; old == nil || s.LastWrite.After(old.LastWrite) {
				g.sessions[id] = s
			}
		}
	}
	for path := range a.dbs {
		if !keep[path] {
			delete(a.dbs, path)
		}
	}
	for path := range a.restored {
		if !keep[path] {
			delete(a.restored, path) // that database is gone
		}
	}
	a.listed(keep)
	return nil
}

// reader is the database's reader, made on first use, handed what a
// checkpoint saved of the database if it has read nothing yet.
func (a *Adapter) reader(path string) *dbReader {
	r := a.dbs[path]
	if r == nil {
		r = &dbReader{path: path, busy: a.cfg.BusyTimeout, log: a.log}
		a.dbs[path] = r
	}
	if d := a.restored[path]; d != nil {
		delete(a.restored, path)
		if r.sessions == nil {
			r.restored = d
		}
	}
	return r
}

// readLegacy reads the legacy storage, when there is one, into g: its
// sessions that no database has (v1.2 migrated those). It fails only when
// ctx is done.
func (a *Adapter) readLegacy(ctx context.Context, g *gathered) error {
	if !a.legacy.present() {
		a.legacy.cache = nil
		return nil
	}
	g.inputs++
	if err := a.legacy.read(ctx); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g.failed++
		g.obs.Errors = append(g.obs.Errors, adapters.InputError{Input: a.legacy.root, Err: err})
		return nil
	}
	for id, e := range a.legacy.cache {
		if g.sessions[id] == nil { // the database wins: v1.2 migrated these
			g.sessions[id] = e.data
		}
	}
	g.obs.Warnings = append(g.obs.Warnings, a.legacy.skipped...)
	return nil
}

// observe reports one session as this pass found it, with the orphaned
// tool processes attributed to it.
func (p *pass) observe(s *sessionData, orphans []adapters.Issue) adapters.Observed {
	o := adapters.Observed{
		UpstreamID:   s.ID,
		Source:       s.Source,
		Root:         p.a.cfg.DataDir,
		Cwd:          s.Directory,
		Title:        s.Title,
		Owners:       p.ownersOf(s, 0),
		LastActivity: p.lastActivity(s, 0),
	}
	act := p.activity(s, 0)
	o.Activity, o.ActivityEvidence, o.WaitingFor = act.activity, act.evidence, act.wait
	o.ActivitySource = session.SourceTranscript
	if act.server {
		o.ActivitySource = session.SourceServer
	}
	if s.inFlight() {
		o.InFlight = s.issues("")
		if act.stale {
			o.Problems = append(o.Problems, s.issues("stale (the live server that owns it reports it idle): ")...)
		}
	}
	o.Problems = append(o.Problems, orphans...)
	if is, ok := s.drift.Problem("opencode", s.Version); ok {
		o.Problems = append(o.Problems, is)
	}
	return o
}

// statusDirs are the directories worth asking servers about: those of
// sessions with work in flight, then of sessions written in the last ten
// minutes, newest first.
func statusDirs(sessions map[string]*sessionData, now time.Time) []string {
	type dt struct {
		dir    string
		flight bool
		t      time.Time
	}
	best := map[string]dt{}
	for _, s := range sessions {
		if s.Directory == "" {
			continue
		}
		f := s.inFlight()
		if !f && now.Sub(s.LastWrite) > 10*time.Minute {
			continue
		}
		cur, ok := best[s.Directory]
		if !ok || (f && !cur.flight) || (f == cur.flight && s.LastWrite.After(cur.t)) {
			best[s.Directory] = dt{s.Directory, f || cur.flight, s.LastWrite}
		}
	}
	list := make([]dt, 0, len(best))
	for _, v := range best {
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool {
		if list[i].flight != list[j].flight {
			return list[i].flight
		}
		if !list[i].t.Equal(list[j].t) {
			return list[i].t.After(list[j].t)
		}
		return list[i].dir < list[j].dir
	})
	out := make([]string, len(list))
	for i, v := range list {
		out[i] = v.dir
	}
	return out
}

// inspect finds the opencode processes and reads their open files and
// start times.
func (a *Adapter) inspect(snap *proc.Snapshot, dbPaths []string) []*ocProc {
	procs := findOpenCode(snap)
	keys := map[string]bool{}
	for _, p := range dbPaths {
		keys[dbKey(realPath(p))] = true
	}
	live := map[proc.Identity]bool{}
	for _, o := range procs {
		id := o.id()
		live[id] = true
		if t, ok := a.starts[id]; ok {
			o.start = t
		} else if t, err := a.cfg.StartTimer.StartTime(id); err == nil {
			o.start = t
			a.starts[id] = t
		}
		o.held = map[string]bool{}
		fds, err := a.host.OpenFiles(id.PID)
		if err != nil {
			continue
		}
		o.fdKnown = true
		o.sockets = fds.Sockets
		for _, f := range fds.Files {
			if k := dbKey(f); keys[k] {
				o.held[k] = true
			}
		}
	}
	for id := range a.starts {
		if !live[id] {
			delete(a.starts, id)
		}
	}
	return procs
}

// remember keeps the servers, the owners (for attributing orphan tool
// processes later) and the paths to watch.
func (a *Adapter) remember(obs []adapters.Observed, servers []*server, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	before := make(map[string]bool, len(a.servers))
	for _, s := range a.servers {
		before[s.URL] = true
	}
	a.servers = a.servers[:0]
	changed := false
	for _, s := range servers {
		a.servers = append(a.servers, s.serverInfo)
		changed = changed || !before[s.URL]
	}
	if changed || len(before) != len(a.servers) {
		select { // Follow subscribes to the new set
		case a.serversChanged <- struct{}{}:
		default:
		}
	}
	for _, o := range obs {
		for _, ow := range o.Owners {
			m, ok := a.memo[ow.Identity.PID]
			if !ok || m.id != ow.Identity {
				m = ownerMemo{id: ow.Identity, sessions: map[string]bool{}}
			}
			m.sessions[o.UpstreamID] = true
			m.seen = now
			a.memo[ow.Identity.PID] = m
		}
	}
	for pid, m := range a.memo {
		if now.Sub(m.seen) > memoTTL {
			delete(a.memo, pid)
		}
	}
	a.watch = append(a.watch[:0], a.cfg.DataDir)
	if a.legacy.cache != nil {
		a.watch = append(a.watch, a.legacy.watchDirs(256)...)
	}
}

// maxPrompts bounds the first-prompt cache; it is cleared when full.
const maxPrompts = 4096

// firstPrompt is the session's first prompt, read once and cached; "" when
// there is none yet or it cannot be read now (asked again next pass).
func (a *Adapter) firstPrompt(ctx context.Context, s *sessionData) string {
	key := s.Source + "\x00" + s.ID
	if t, ok := a.prompts[key]; ok {
		return t
	}
	t, err := firstPrompt(ctx, s.Source, a.cfg.BusyTimeout, s.ID)
	if err != nil {
		a.log.Debug("cannot read a session's first prompt", zap.String("session", s.ID), zap.String("db", s.Source), zap.Error(err))
		return ""
	}
	if t == "" {
		return ""
	}
	if a.prompts == nil || len(a.prompts) >= maxPrompts {
		a.prompts = map[string]string{}
	}
	a.prompts[key] = t
	return t
}
