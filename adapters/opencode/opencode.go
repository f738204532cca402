// Package opencode is sessiond's adapter for OpenCode (sst/opencode).
//
// It reads every opencode*.db in OpenCode's data dir (SQLite since v1.2,
// read-only through the pure-Go modernc.org/sqlite driver, in short read
// statements that never hold up OpenCode's checkpoints) and the legacy JSON
// storage of v1.1.x when present. Reading is incremental: a pass re-reads
// only sessions whose row changed, that got new message or part rows, or
// that still have work in flight. What was read is saved in sessiond's
// store (adapters.Checkpointer, checkpoint.go), so a restart continues
// from there instead of reading every database whole again.
//
// OpenCode stores no PID, so owners are found in the process table: an
// opencode process naming the session with -s/--session, a server
// (`serve`, `web`, --port) whose GET /session/status reports the session
// busy (only servers of sessiond's uid, on loopback, are asked: trust.go),
// or, inferred, an opencode process working in the session's directory
// that holds the database open and started before the session's last
// write. Discover only observes; the tracker probes the owners and
// decides running, stopped or interrupted. See shared/agents/opencode.md.
//
// Asked to (sessionctl repair, abort, or the opencode-offline policy), the
// adapter also cleans up what a dead or stuck OpenCode left in flight,
// following the ladder of opencode.md: through a reachable server's API
// (repair.go); else, when no process holds the database, offline after a
// backup, in one short transaction (offline.go); else not at all, pending
// on the processes that hold it.
package opencode

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Config configures the adapter. Zero values take the defaults.
type Config struct {
	// DataDir is OpenCode's data dir ($XDG_DATA_HOME/opencode, else
	// ~/.local/share/opencode), the daemon's --opencode-dir.
	DataDir string
	// Binary is the opencode executable sessiond launches (default
	// "opencode" from PATH).
	Binary string
	// ProcRoot is the proc file system ("/proc"), for open files and
	// listening sockets; tests point it at a fixture tree.
	ProcRoot string
	Logger   *zap.Logger
	// HTTPClient talks to OpenCode servers (default: a client with a 2 s
	// timeout and no proxy).
	HTTPClient *http.Client
	// ServerPassword and ServerUsername are OPENCODE_SERVER_PASSWORD and
	// OPENCODE_SERVER_USERNAME from sessiond's environment: HTTP Basic auth
	// for servers started with a password (user default "opencode").
	ServerPassword string
	ServerUsername string
	// BusyTimeout is SQLite's busy timeout: how long a read waits for a
	// writer's lock before the database is reported as locked (default 2 s).
	BusyTimeout time.Duration
	// ServerTimeout bounds each request to a server (default 1 s).
	ServerTimeout time.Duration
	// FullEvery forces a full re-read of each database this often, as a
	// backstop for the incremental reading (default 10 min; negative: never).
	// After a restart that restored a database's saved state, it counts from
	// the first pass.
	FullEvery time.Duration
	// StaleAfter is how long in-flight data must have been still before a
	// live server that owns it and reports it idle makes it stale (default 10 s).
	StaleAfter time.Duration
	// StartTimer converts a process identity to its start time, for "started
	// before the session's last write" (default proc.Host on ProcRoot).
	StartTimer proc.StartTimer
	// Now is the clock (default time.Now).
	Now func() time.Time

	// BackupDir is where an offline repair backs a database up before
	// writing it (the daemon uses <state-dir>/backups/opencode). Empty:
	// offline repairs fail rather than write without a backup.
	BackupDir string
	// BackupKeep is how many backups are kept per database (default 10):
	// each is a full copy, so an unbounded number would fill the disk.
	BackupKeep int
	// RepairGrace: an offline repair touches a session only once its data
	// has been still this long (default 60 s), so a turn that is still
	// being written, by a process sessiond cannot see, is left alone.
	RepairGrace time.Duration
	// WriteBusyTimeout is how long a repair waits for SQLite's write lock
	// (default 250 ms). OpenCode gives up after its own 5 s busy timeout,
	// so a repair waits briefly and is retried later instead.
	WriteBusyTimeout time.Duration
	// AbortWait bounds each wait of Abort for a server to report the
	// session idle (default 5 s; the API handler allows 30 s in all).
	AbortWait time.Duration
}

// Defaults for Config.
const (
	DefaultBusyTimeout   = 2 * time.Second
	DefaultServerTimeout = time.Second
	DefaultFullEvery     = 10 * time.Minute
	DefaultStaleAfter    = 10 * time.Second

	DefaultBackupKeep       = 10
	DefaultRepairGrace      = 60 * time.Second
	DefaultWriteBusyTimeout = 250 * time.Millisecond
	DefaultAbortWait        = 5 * time.Second
)

// startSlack allows for the resolution of process start times (the boot
// time is known to the second) when comparing them with a write time.
const startSlack = 2 * time.Second

// memoTTL is how long a process is remembered as a session's owner after it
// was last seen, so tool processes it leaves behind can be attributed.
const memoTTL = 24 * time.Hour

// Adapter observes OpenCode sessions. Safe for concurrent use; Discover
// passes serialize.
type Adapter struct {
	cfg Config
	log *zap.Logger
	// uid is sessiond's own: only servers of this uid are asked anything.
	uid int
	// host reads open files and listening sockets on ProcRoot.
	host *proc.Host

	passMu sync.Mutex // one Discover at a time; guards dbs, legacy, starts, restored
	dbs    map[string]*dbReader
	legacy *legacyReader
	starts map[proc.Identity]time.Time
	// restored is what Restore was handed, by database path, until a pass
	// lists that database (checkpoint.go).
	restored map[string]*savedDB

	// What Checkpoint saves (checkpoint.go), guarded by cpMu: each
	// database's state after its last successful read, the databases the
	// last pass listed (nil before the first pass), and what the store
	// holds by key.
	cpMu     sync.Mutex
	cpSeed   maphash.Seed
	cpDBs    map[string]*savedDB
	cpListed map[string]bool
	cpSaved  map[string]cpEntry

	// repairMu serializes repairs and aborts: one writer at a time, and a
	// plan is never interleaved with another repair's writes.
	repairMu sync.Mutex

	// prompts caches sessions' first prompts (db path + id -> text): they
	// never change once written. Guarded by passMu.
	prompts map[string]string

	mu               sync.Mutex // guards the fields below
	servers          []Server
	memo             map[int]ownerMemo
	loggedServerErrs map[string]bool
	watch            []string
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

// ownerMemo remembers a process that owned sessions.
type ownerMemo struct {
	id       proc.Identity
	sessions map[string]bool
	seen     time.Time
}

// New returns an adapter for cfg.
func New(cfg Config) *Adapter {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 2, IdleConnTimeout: 30 * time.Second}}
	}
	if cfg.BusyTimeout <= 0 {
		cfg.BusyTimeout = DefaultBusyTimeout
	}
	if cfg.ServerTimeout <= 0 {
		cfg.ServerTimeout = DefaultServerTimeout
	}
	if cfg.FullEvery == 0 {
		cfg.FullEvery = DefaultFullEvery
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	host := &proc.Host{Root: cfg.ProcRoot}
	if cfg.StartTimer == nil {
		cfg.StartTimer = host
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BackupKeep <= 0 {
		cfg.BackupKeep = DefaultBackupKeep
	}
	if cfg.RepairGrace <= 0 {
		cfg.RepairGrace = DefaultRepairGrace
	}
	if cfg.WriteBusyTimeout <= 0 {
		cfg.WriteBusyTimeout = DefaultWriteBusyTimeout
	}
	if cfg.AbortWait <= 0 {
		cfg.AbortWait = DefaultAbortWait
	}
	a := &Adapter{
		cfg:              cfg,
		log:              cfg.Logger,
		uid:              os.Getuid(),
		host:             host,
		dbs:              map[string]*dbReader{},
		starts:           map[proc.Identity]time.Time{},
		cpSeed:           maphash.MakeSeed(),
		memo:             map[int]ownerMemo{},
		loggedServerErrs: map[string]bool{},
	}
	a.legacy = &legacyReader{root: filepath.Join(cfg.DataDir, "storage"), log: cfg.Logger}
	a.watch = []string{cfg.DataDir}
	return a
}

// Name is the agent name stored in records.
func (a *Adapter) Name() string { return "opencode" }

// WatchPaths are the data dir (the .db and -wal files change on every
// write) and, for a legacy install, its session directories and the
// message and part directories of sessions with work in flight.
func (a *Adapter) WatchPaths() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.watch...)
}

// Servers returns the servers that answered in the last Discover pass.
func (a *Adapter) Servers() []Server {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Server(nil), a.servers...)
}

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
	var obs adapters.Observation
	now := a.cfg.Now()

	paths, err := a.databases()
	if err != nil {
		return obs, err
	}
	inputs, failed := 0, 0
	sessions := map[string]*sessionData{}
	keep := map[string]bool{}
	for _, path := range paths {
		keep[path] = true
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
		inputs++
		if err := r.read(ctx, now, a.cfg.FullEvery); err != nil {
			if ctx.Err() != nil {
				return adapters.Observation{}, ctx.Err()
			}
			failed++
			obs.Errors = append(obs.Errors, adapters.InputError{Input: path, Err: err})
			continue
		}
		a.published(path, r)
		if r.warning != nil {
			obs.Warnings = append(obs.Warnings, adapters.InputError{Input: path, Err: r.warning})
		}
		for id, s := range r.sessions {
			if old := sessions[id]; old == nil || s.LastWrite.After(old.LastWrite) {
				sessions[id] = s
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
	if a.legacy.present() {
		inputs++
		if err := a.legacy.read(ctx); err != nil {
			if ctx.Err() != nil {
				return adapters.Observation{}, ctx.Err()
			}
			failed++
			obs.Errors = append(obs.Errors, adapters.InputError{Input: a.legacy.root, Err: err})
		} else {
			for id, e := range a.legacy.cache {
				if sessions[id] == nil { // the database wins: v1.2 migrated these
					sessions[id] = e.data
				}
			}
			obs.Warnings = append(obs.Warnings, a.legacy.skipped...)
		}
	} else {
		a.legacy.cache = nil
	}
	if inputs > 0 && failed == inputs {
		errs := make([]error, len(obs.Errors))
		for i, e := range obs.Errors {
			errs[i] = fmt.Errorf("%s: %w", e.Input, e.Err)
		}
		return obs, fmt.Errorf("no OpenCode data could be read: %w", errors.Join(errs...))
	}

	procs := a.inspect(snap, paths)
	servers := a.probeServers(ctx, procs, statusDirs(sessions, now))
	p := &pass{a: a, ctx: ctx, now: now, sessions: sessions, procs: procs, servers: servers,
		dbKeys: map[string]string{}, owners: map[string][]adapters.Owner{}, acts: map[string]*actResult{}, children: map[string][]string{}}
	for _, path := range paths {
		p.dbKeys[path] = dbKey(realPath(path))
	}
	for id, s := range sessions {
		if s.ParentID != "" {
			p.children[s.ParentID] = append(p.children[s.ParentID], id)
		}
	}
	orphans := a.orphans(snap)

	ids := make([]string, 0, len(sessions))
	for id := range sessions {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		s := sessions[id]
		o := adapters.Observed{
			UpstreamID:   s.ID,
			Source:       s.Source,
			Root:         a.cfg.DataDir,
			Cwd:          s.Directory,
			Title:        s.Title,
			Owners:       p.ownersOf(s, 0),
			LastActivity: p.lastActivity(s, 0),
		}
		act := p.activity(s, 0)
		o.Activity, o.ActivityEvidence = act.activity, act.evidence
		if s.inFlight() {
			o.InFlight = s.issues("")
			if act.stale {
				o.Problems = append(o.Problems, s.issues("stale (the live server that owns it reports it idle): ")...)
			}
		}
		o.Problems = append(o.Problems, orphans[id]...)
		obs.Sessions = append(obs.Sessions, o)
	}

	a.remember(obs.Sessions, servers, now)
	return obs, nil
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
	a.servers = a.servers[:0]
	for _, s := range servers {
		a.servers = append(a.servers, s.Server)
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

// pass holds one Discover's evidence while observations are built.
type pass struct {
	a        *Adapter
	ctx      context.Context
	now      time.Time
	sessions map[string]*sessionData
	procs    []*ocProc
	servers  []*server
	dbKeys   map[string]string // db path -> normalized real path
	children map[string][]string
	owners   map[string][]adapters.Owner
	acts     map[string]*actResult
}

// maxDepth bounds parent/child recursion (and breaks cycles in odd data).
const maxDepth = 8

// ownersOf lists the processes that own or may own s. Named owners (argv
// --session, a server reporting it busy) exclude inferred ones.
func (p *pass) ownersOf(s *sessionData, depth int) []adapters.Owner {
	if o, ok := p.owners[s.ID]; ok {
		return o
	}
	var out []adapters.Owner
	seen := map[proc.Identity]bool{}
	add := func(id proc.Identity, inferred bool, ev string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, adapters.Owner{Identity: id, Inferred: inferred, Evidence: ev})
		}
	}
	for _, o := range p.procs {
		if o.owner() && o.args.Session == s.ID && !o.args.Fork {
			add(o.id(), false, "argv --session "+s.ID)
		}
	}
	for _, sv := range p.servers {
		if st, ok := sv.status[s.ID]; ok {
			add(sv.Owner, false, fmt.Sprintf("server %s reports it %s", sv.URL, st.Type))
		}
	}
	// An `opencode run <message>` whose message is the session's first
	// prompt created it: named exactly, so two runs in one directory never
	// take each other's session. A run whose message is another prompt
	// runs another session, and is no candidate for this one.
	if len(out) == 0 {
		for _, o := range p.procs {
			if !o.inDir(s.Directory) || !p.startedBefore(o, s.LastWrite) {
				continue
			}
			if m := p.runMatches(o, s); m == runIsOwner {
				add(o.id(), false, "argv message is the session's first prompt")
			}
		}
	}
	if len(out) == 0 {
		dbName := filepath.Base(s.Source)
		for _, o := range p.procs {
			if !o.owner() || !o.inDir(s.Directory) || !p.startedBefore(o, s.LastWrite) || p.runMatches(o, s) == runIsOther {
				continue
			}
			held, how := p.holds(o, s)
			if !held {
				continue
			}
			ev := "cwd matches the session directory"
			switch how {
			case holdsYes:
				ev += ", holds " + dbName + " open"
			case holdsUnknown:
				ev += " (open files not checked)"
			}
			add(o.id(), true, ev+", started before the last write")
		}
	}
	// A subagent session runs in its parent's process.
	if len(out) == 0 && s.ParentID != "" && depth < maxDepth {
		if parent := p.sessions[s.ParentID]; parent != nil {
			for _, ow := range p.ownersOf(parent, depth+1) {
				add(ow.Identity, ow.Inferred, "owner of parent session "+parent.ID+": "+ow.Evidence)
			}
		}
	}
	if len(out) == 0 && s.inFlight() && !s.legacy {
		// Work in flight and nobody fits by directory: any opencode that
		// holds this database and started before the last write may be
		// running it (a server serving another directory, say). Better
		// several candidates than a live turn called interrupted.
		for _, o := range p.procs {
			if o.owner() && o.fdKnown && o.held[p.dbKeys[s.Source]] && p.startedBefore(o, s.LastWrite) && p.runMatches(o, s) != runIsOther {
				add(o.id(), true, "holds "+filepath.Base(s.Source)+" open and started before the last write (no directory match)")
			}
		}
	}
	p.owners[s.ID] = out
	return out
}

// runMatch says what a run's argv message tells about a session.
type runMatch int

const (
	// runUnknown: not a run with a message, or the session's first prompt
	// is not known: no evidence either way.
	runUnknown runMatch = iota
	runIsOwner
	runIsOther
)

// runMatches compares an `opencode run <message>` (that names no session
// and continues none: it creates its own) with the session's first prompt.
func (p *pass) runMatches(o *ocProc, s *sessionData) runMatch {
	if !o.owner() || o.args.Sub != "run" || o.args.Message == "" || o.args.Session != "" || o.args.Continue || s.legacy {
		return runUnknown
	}
	if !o.start.IsZero() && !s.Created.IsZero() && o.start.After(s.Created.Add(startSlack)) {
		// Such a run creates its session after it starts: one that existed
		// before is another's. (No database read for old sessions.)
		return runIsOther
	}
	prompt := p.a.firstPrompt(p.ctx, s)
	switch {
	case prompt == "":
		return runUnknown
	case strings.TrimSpace(prompt) == strings.TrimSpace(o.args.Message):
		return runIsOwner
	}
	return runIsOther
}

type holdState int

const (
	holdsNo holdState = iota
	holdsYes
	holdsUnknown
)

// holds reports whether o holds the session's database open. Legacy
// storage is not held open; unreadable open files cannot be checked.
func (p *pass) holds(o *ocProc, s *sessionData) (bool, holdState) {
	if s.legacy {
		return true, holdsUnknown
	}
	if !o.fdKnown {
		return true, holdsUnknown
	}
	if o.held[p.dbKeys[s.Source]] {
		return true, holdsYes
	}
	return false, holdsNo
}

func (p *pass) startedBefore(o *ocProc, t time.Time) bool {
	if o.start.IsZero() || t.IsZero() {
		return true // unknown: do not rule the process out
	}
	return !o.start.After(t.Add(startSlack))
}

// actResult is a session's activity and the evidence for it.
type actResult struct {
	activity session.Activity
	evidence string
	// stale: the data shows work in flight, but the live server that owns
	// the session reports it idle (the restart shape of the seed report).
	stale bool
}

// activity decides busy / waiting / idle:
//   - a pending question or permission on a server, or a running question
//     tool part (unless a server that answered lists no question for it),
//     is waiting;
//   - a server's busy or retry is busy;
//   - a parent running a task judges its leaf: the child's activity;
//   - data in flight is busy, unless stale;
//   - else idle.
func (p *pass) activity(s *sessionData, depth int) *actResult {
	if r, ok := p.acts[s.ID]; ok {
		return r
	}
	r := p.decideActivity(s, depth)
	p.acts[s.ID] = r
	return r
}

func (p *pass) decideActivity(s *sessionData, depth int) *actResult {
	var busyServer *server
	var st SessionStatus
	for _, sv := range p.servers {
		if sv.questions[s.ID] {
			return &actResult{activity: session.ActivityWaiting, evidence: "server " + sv.URL + ": question pending"}
		}
		if sv.permissions[s.ID] {
			return &actResult{activity: session.ActivityWaiting, evidence: "server " + sv.URL + ": permission pending"}
		}
		if v, ok := sv.status[s.ID]; ok && busyServer == nil {
			busyServer, st = sv, v
		}
	}
	if q := s.runningQuestion(); q != nil {
		switch {
		case busyServer != nil && busyServer.askedDirs[s.Directory]:
			return &actResult{activity: session.ActivityBusy, evidence: "data: question tool part " + q.ID + " running, but server " + busyServer.URL + " has no pending question for it (stuck)"}
		case busyServer == nil && p.stale(s):
			return &actResult{activity: session.ActivityIdle, stale: true,
				evidence: "server reports it idle; the data's running question is stale (" + s.describeFlight() + ")"}
		}
		return &actResult{activity: session.ActivityWaiting, evidence: "data: question tool part " + q.ID + " running"}
	}
	if busyServer != nil {
		ev := "server " + busyServer.URL + " status " + st.Type
		if st.Type == "retry" {
			ev += fmt.Sprintf(" (attempt %d", st.Attempt)
			if !st.Next.IsZero() {
				ev += ", next at " + st.Next.UTC().Format(time.RFC3339)
			}
			ev += ")"
		}
		return &actResult{activity: session.ActivityBusy, evidence: ev}
	}
	if !s.inFlight() {
		if s.LastAssistant == nil {
			return &actResult{activity: session.ActivityIdle, evidence: "data: no assistant message"}
		}
		return &actResult{activity: session.ActivityIdle, evidence: "data: last assistant message completed"}
	}
	if depth < maxDepth {
		for _, cid := range p.workingChildren(s) {
			c := p.sessions[cid]
			cr := p.activity(c, depth+1)
			if cr.activity == session.ActivityWaiting || cr.activity == session.ActivityBusy {
				return &actResult{activity: cr.activity, evidence: "subagent session " + cid + ": " + cr.evidence}
			}
		}
	}
	if p.stale(s) {
		return &actResult{activity: session.ActivityIdle, stale: true,
			evidence: "server reports it idle; the data's in-flight work is stale (" + s.describeFlight() + ")"}
	}
	return &actResult{activity: session.ActivityBusy, evidence: "data: " + s.describeFlight()}
}

// workingChildren are the child sessions a running task part of s works
// through: named by the part's metadata, else children with work in flight.
func (p *pass) workingChildren(s *sessionData) []string {
	var out []string
	seen := map[string]bool{}
	task := false
	for _, t := range s.Tools {
		if t.Tool != "task" || t.Status != "running" {
			continue
		}
		task = true
		if c := t.ChildSessionID; c != "" && p.sessions[c] != nil && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if task && len(out) == 0 {
		for _, c := range p.children[s.ID] {
			if cs := p.sessions[c]; cs != nil && cs.inFlight() && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Strings(out)
	return out
}

// lastActivity is the session's last write, or its working child's when
// the session waits on a subagent: a parent is not idle while its child
// works.
func (p *pass) lastActivity(s *sessionData, depth int) time.Time {
	t := s.LastWrite
	if depth < maxDepth && s.inFlight() {
		for _, c := range p.workingChildren(s) {
			if ct := p.lastActivity(p.sessions[c], depth+1); ct.After(t) {
				t = ct
			}
		}
	}
	return t
}

// stale reports in-flight data that no live process is working on: every
// owner is a server that answered for the session's directory and none
// reports it busy, and the data has been still for StaleAfter.
func (p *pass) stale(s *sessionData) bool {
	owners := p.ownersOf(s, 0)
	if len(owners) == 0 || p.now.Sub(s.LastWrite) < p.a.cfg.StaleAfter {
		return false
	}
	for _, ow := range owners {
		var sv *server
		for _, x := range p.servers {
			if x.Owner == ow.Identity {
				sv = x
			}
		}
		if sv == nil || !sv.answeredFor(s.Directory) {
			return false
		}
		if _, busy := sv.status[s.ID]; busy {
			return false
		}
	}
	return true
}

// orphans finds tool processes whose OPENCODE_PID names a dead opencode
// process, attributed to the sessions that process owned when it was seen.
func (a *Adapter) orphans(snap *proc.Snapshot) map[string][]adapters.Issue {
	out := map[string][]adapters.Issue{}
	if snap == nil {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	pids := make([]int, 0)
	for pid, p := range snap.Procs {
		if p.Env["OPENCODE_PID"] != "" && p.State != 'Z' && p.State != 'X' {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	for _, pid := range pids {
		p := snap.Procs[pid]
		ownerPID, err := strconv.Atoi(p.Env["OPENCODE_PID"])
		if err != nil || ownerPID <= 0 {
			continue
		}
		if o := snap.Procs[ownerPID]; o != nil && o.State != 'Z' && o.State != 'X' && o.Identity.StartTicks <= p.Identity.StartTicks {
			if _, _, ok := commandLine(o.Argv); ok {
				continue // its opencode lives
			}
		}
		m, ok := a.memo[ownerPID]
		if !ok || m.id.StartTicks > p.Identity.StartTicks {
			a.log.Debug("orphaned OpenCode tool process with an unknown owner", zap.Int("pid", pid), zap.Int("opencode_pid", ownerPID))
			continue
		}
		cmd := strings.Join(p.Argv, " ")
		if len(cmd) > 80 {
			cmd = cmd[:80] + "…"
		}
		var since time.Time
		if t, err := a.cfg.StartTimer.StartTime(p.Identity); err == nil {
			since = t
		}
		// The identity lets reap signal exactly this process.
		id := p.Identity
		is := adapters.Issue{
			Kind:    session.ProblemOrphanProcesses,
			Key:     strconv.Itoa(pid),
			Detail:  fmt.Sprintf("pid %d (%s) still runs; its opencode (pid %d) is dead", pid, cmd, ownerPID),
			Since:   since,
			Process: &id,
		}
		for sid := range m.sessions {
			out[sid] = append(out[sid], is)
		}
	}
	return out
}
