// Package codex is sessiond's adapter for the OpenAI Codex CLI.
//
// Codex keeps no PID registry. Each session is a rollout file,
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl (moved flat
// into archived_sessions/ by `codex archive`), whose first line is the
// session_meta and whose tail says the turn state (rollout.go). Its writer
// is named by the kernel: the process writing a rollout holds an exclusive
// flock on thread-writer-locks/<uuid>.lock, which dies with it, so the
// lock's holder is the session's owner and a lock file nobody holds is a
// dead writer (owners.go). For the interactive TUI that holder is Codex's
// managed app-server daemon, which outlives the TUI and finishes the turn
// after it quits: the TUI's own pid is never the liveness test. Codex's
// thread_turns.status stays "inProgress" after a kill, so its databases
// are not read for liveness at all.
//
// A pending approval looks exactly like a running tool in the rollout, so
// the rollout never says waiting: only sessiond's hooks do
// (docs/agents/codex.md). Tools Codex ran
// carry CODEX_THREAD_ID, which anything they start inherits; those a dead
// owner left behind are orphan_processes, reapable only on evidence from
// the process tree seen while the owner lived (orphans.go). Reading is incremental (discover.go): a
// pass stats the rollouts that may change (new, written recently, or
// with a writer lock file) and reads only appended bytes; a full rescan
// looks at every rollout now and then. See docs/agents/codex.md.
package codex

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters/internal/inputlog"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/agents"
	"github.com/sessiond/sessiond/proc"
)

// Config configures the adapter. Zero values take the defaults.
type Config struct {
	// Roots are the Codex homes to read (default $CODEX_HOME, else
	// ~/.codex): the daemon's --codex-dir.
	Roots []string
	// NoLearnedRoots turns off reading the homes of live codex processes
	// (their CODEX_HOME) beside Roots.
	NoLearnedRoots bool
	// Binary is the codex executable sessiond launches (default "codex").
	Binary string
	// Host reads the lock table and open files (default proc.NewHost()).
	Host   ProcHost
	Logger *zap.Logger
	// ColdAfter: a rollout not written for this long, with no writer lock
	// file, is stat'ed at full rescans only (default 10 min).
	ColdAfter time.Duration
	// FullRescan is how often every rollout is stat'ed (default 5 min).
	FullRescan time.Duration
	// MaxTail bounds the tail read for the turn state (default 4 MiB); a
	// larger growth between passes is read as a new tail.
	MaxTail int64
	// ReleaseGrace is how long a rollout's writer lock must be seen held
	// by nobody before its owners are called exact, so that a live
	// recorded owner counts as having let the session go (default 3 s;
	// negative: at once). A writer that drops and takes its lock again
	// between two reads of the lock table (Codex 0.171.0's TUI was seen
	// to, once under load) is not a release.
	ReleaseGrace time.Duration
}

// ProcHost is the part of proc.Host the adapter uses.
type ProcHost interface {
	LockTable() (*proc.LockTable, error)
	Holders(paths ...string) ([]int, error)
	Identify(pid int) (proc.Identity, error)
	StartTime(id proc.Identity) (time.Time, error)
}

const (
	defaultColdAfter    = 10 * time.Minute
	defaultFullRescan   = 5 * time.Minute
	defaultReleaseGrace = 3 * time.Second
)

// Adapter observes Codex sessions. Discover is serialized by mu.
type Adapter struct {
	cfg Config
	log *zap.Logger

	mu     sync.Mutex
	roots  map[string]*rootState
	order  []string // roots in the order they were added
	rescan kit.Rescan
	inputs *inputlog.Log
	gen    uint64 // the last fileState.gen given
	// shape counts the other changes observations are built from:
	// rollouts listed or gone, roots added, a lock folder's state.
	shape uint64
	// quiet is the set of the sessions nothing owns, handed out again
	// while they are as they were (kit.Quiet).
	quiet kit.Quiet

	// restored is what Restore handed over, by path, until a listing takes
	// it; book the gen each path's committed checkpoint entry was made at.
	restored kit.Restored[*fileState]
	book     kit.Book[uint64]

	// lineage is what was seen below owners while they lived, the
	// evidence that attributes what a dead one left behind (orphans.go).
	lineage *lineage.Memory

	watchMu sync.Mutex
	watch   []string

	// drift is what the rollouts showed that sessiond does not
	// understand, by path; hookDrift the hooks' (kit.Drift).
	drift, hookDrift kit.Drift
}

// New returns an adapter with cfg's defaults filled in.
func New(cfg Config) *Adapter {
	if len(cfg.Roots) == 0 {
		cfg.Roots = agents.Codex.DefaultRoots()
	}
	if cfg.Binary == "" {
		cfg.Binary = "codex"
	}
	if cfg.Host == nil {
		cfg.Host = proc.NewHost()
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.ColdAfter <= 0 {
		cfg.ColdAfter = defaultColdAfter
	}
	if cfg.FullRescan <= 0 {
		cfg.FullRescan = defaultFullRescan
	}
	if cfg.MaxTail <= 0 {
		cfg.MaxTail = defaultTail
	}
	if cfg.ReleaseGrace == 0 {
		cfg.ReleaseGrace = defaultReleaseGrace
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger, roots: map[string]*rootState{},
		inputs: inputlog.New(cfg.Logger, "Codex data"), lineage: lineage.NewTagged(treeBounds, threadOf)}
	for _, r := range cfg.Roots {
		a.addRoot(filepath.Clean(r), false)
	}
	return a
}

func (a *Adapter) addRoot(path string, learned bool) {
	if a.roots[path] != nil {
		return
	}
	a.roots[path] = &rootState{path: path, learned: learned, files: map[string]*fileState{}, dirs: kit.Dirs{}}
	a.order = append(a.order, path)
	a.shape++
}

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return "codex" }

// RequestRescan implements adapters.Rescanner: the next pass stats every
// rollout and lists every folder again.
func (a *Adapter) RequestRescan() { a.rescan.Request() }

// WatchPaths implements adapters.Adapter: each root, its sessions/ and
// the newest day folders (where new rollouts appear), archived_sessions/
// and thread-writer-locks/ (a lock file appears when a writer starts,
// including a resume of an old rollout), those that exist.
func (a *Adapter) WatchPaths() []string {
	a.watchMu.Lock()
	defer a.watchMu.Unlock()
	if a.watch != nil {
		return append([]string(nil), a.watch...)
	}
	var out []string
	for _, r := range a.cfg.Roots {
		for _, p := range []string{r, filepath.Join(r, "sessions"), filepath.Join(r, "archived_sessions"), filepath.Join(r, "thread-writer-locks")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}
