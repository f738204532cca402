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
// OpenCode stores no PID, so owners are found in the process table
// (owners.go): an opencode process naming the session with -s/--session, a
// server (`serve`, `web`, --port) whose GET /session/status reports the
// session busy (only servers of sessiond's uid, on loopback, are asked:
// trust.go), or, inferred, an opencode process working in the session's
// directory that holds the database open and started before the session's
// last write. Discover (discover.go) only observes, with the session's
// activity (activity.go) and the tool processes a dead opencode left
// behind (orphans.go); the tracker probes the owners and decides running,
// stopped or interrupted. See docs/agents/opencode.md.
//
// Asked to (sessionctl repair, abort, or the opencode-offline policy), the
// adapter also cleans up what a dead or stuck OpenCode left in flight,
// following the ladder of docs/agents/opencode.md: through a reachable
// server's API (repair.go); else, when no process holds the database,
// offline after a backup, in one short transaction (offline.go); else not
// at all, pending on the processes that hold it.
package opencode

import (
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
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
	defaultBusyTimeout   = 2 * time.Second
	defaultServerTimeout = time.Second
	defaultFullEvery     = 10 * time.Minute
	defaultStaleAfter    = 10 * time.Second

	defaultBackupKeep       = 10
	DefaultRepairGrace      = 60 * time.Second
	defaultWriteBusyTimeout = 250 * time.Millisecond
	defaultAbortWait        = 5 * time.Second
)

// Adapter observes OpenCode sessions. Safe for concurrent use; Discover
// passes serialize.
type Adapter struct {
	cfg Config
	log *zap.Logger
	// uid is sessiond's own: only servers of this uid are asked anything.
	uid int
	// host reads open files and listening sockets on ProcRoot.
	host *proc.Host

	// drift is what the sessions read showed that sessiond does not
	// understand, by session id (kit.Drift).
	drift kit.Drift

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
	cpDBs    map[string]*savedDB
	cpListed map[string]bool
	cpBook   kit.Book[*sessionData]

	// repairMu serializes repairs and aborts: one writer at a time, and a
	// plan is never interleaved with another repair's writes.
	repairMu sync.Mutex

	// quiet hands the sessions with no owner and no process to the
	// tracker as one set, the same pointer while none of them changes
	// (kit.Quiet). Guarded by passMu.
	quiet kit.Quiet
	// built is the last pass's list of observations, kept to build the
	// next one in (Split copies out what it hands on). Guarded by passMu.
	built []adapters.Observed
	// sessions, owners and acts are the last pass's maps of what it
	// read and decided, by session id, cleared for the next pass to fill:
	// made anew they were most of what an idle pass over 2,000 sessions
	// allocated. Guarded by passMu.
	sessions map[string]*sessionData
	owners   map[string][]adapters.Owner
	acts     map[string]*actResult

	// prompts caches sessions' first prompts (db path + id -> text): they
	// never change once written. Guarded by passMu.
	prompts map[string]string

	// serversChanged tells Follow that the last pass found another set of
	// servers.
	serversChanged chan struct{}

	mu               sync.Mutex // guards the fields below
	servers          []serverInfo
	memo             map[int]ownerMemo
	lineage          *lineage.Memory // what was seen below live opencodes (orphans.go)
	loggedServerErrs map[string]bool
	watch            []string
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
		cfg.BusyTimeout = defaultBusyTimeout
	}
	if cfg.ServerTimeout <= 0 {
		cfg.ServerTimeout = defaultServerTimeout
	}
	if cfg.FullEvery == 0 {
		cfg.FullEvery = defaultFullEvery
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = defaultStaleAfter
	}
	host := &proc.Host{Root: cfg.ProcRoot}
	if cfg.StartTimer == nil {
		cfg.StartTimer = host
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.BackupKeep <= 0 {
		cfg.BackupKeep = defaultBackupKeep
	}
	if cfg.RepairGrace <= 0 {
		cfg.RepairGrace = DefaultRepairGrace
	}
	if cfg.WriteBusyTimeout <= 0 {
		cfg.WriteBusyTimeout = defaultWriteBusyTimeout
	}
	if cfg.AbortWait <= 0 {
		cfg.AbortWait = defaultAbortWait
	}
	a := &Adapter{
		cfg:              cfg,
		log:              cfg.Logger,
		uid:              os.Getuid(),
		host:             host,
		dbs:              map[string]*dbReader{},
		starts:           map[proc.Identity]time.Time{},
		memo:             map[int]ownerMemo{},
		lineage:          lineage.New(treeBounds),
		serversChanged:   make(chan struct{}, 1),
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

// lastServers returns the servers that answered in the last Discover pass.
func (a *Adapter) lastServers() []serverInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]serverInfo(nil), a.servers...)
}
