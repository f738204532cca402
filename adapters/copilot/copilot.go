// Package copilot is sessiond's adapter for GitHub Copilot CLI (npm
// @github/copilot, the `copilot` command).
//
// Copilot keeps each session in a folder of its home ($COPILOT_HOME, else
// ~/.copilot): session-state/<uuid>/, with events.jsonl (the session's
// events, appended: events.go) and workspace.yaml (its id, cwd and title,
// rewritten whole: workspace.go). A process that has a session open
// creates inuse.<pid>.lock (its pid) and inuse.<pid>.hold in that folder
// and holds the .hold file open with flock(LOCK_EX); a clean exit removes
// both, a kill -9 leaves them, held by nobody, and the next Copilot to
// take the session sweeps them. So the process that holds a session's
// inuse.<its pid>.hold open is its owner, named by its own descriptor
// (owners.go); a live process an inuse.<pid>.lock names that no
// descriptor read confirms, or else (where a copilot's descriptors cannot
// be read) a copilot in the session's cwd, stands in (owner_ambiguous
// when several fit).
//
// The npm package's `copilot` is a node loader that spawns the native
// binary (@github/copilot-<platform>/copilot) and waits for it: the
// native binary is the owner, writes the files and runs the tools. Each
// tool is its child in a session of its own, with COPILOT_AGENT_SESSION_ID
// (the session id) in its environment; what a dead owner left behind is
// an orphan_processes issue on tree evidence only (orphans.go).
//
// Reading is incremental (discover.go): a pass stats the session folders
// that may change (new, written recently, in use) and reads only the
// bytes appended to events.jsonl; a full rescan looks at every folder now
// and then. What was read is checkpointed (checkpoint.go). See
// docs/agents/copilot.md.
package copilot

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
	// Roots are the Copilot homes to read (default $COPILOT_HOME, else
	// ~/.copilot): the daemon's --copilot-dir.
	Roots []string
	// Host reads the open files of copilot processes (default
	// proc.NewHost()).
	Host   ProcHost
	Logger *zap.Logger
	// ColdAfter: a session folder not written for this long and not in
	// use is stat'ed at full rescans only (default 10 min).
	ColdAfter time.Duration
	// FullRescan is how often every session folder is stat'ed (default 5
	// min).
	FullRescan time.Duration
}

// ProcHost is the part of proc.Host the adapter uses.
type ProcHost interface {
	OpenFiles(pid int) (proc.Descriptors, error)
	StartTime(id proc.Identity) (time.Time, error)
}

const (
	defaultColdAfter  = 10 * time.Minute
	defaultFullRescan = 5 * time.Minute
)

// Adapter observes Copilot sessions. Discover is serialized by mu.
type Adapter struct {
	cfg Config
	log *zap.Logger

	mu     sync.Mutex
	roots  []*rootState
	rescan kit.Rescan
	inputs *inputlog.Log
	gen    uint64 // the last sessState.gen given
	// shape counts the other changes observations are built from: session
	// folders listed or gone (kit.Key).
	shape uint64

	// quiet is the set of the sessions no copilot owns, handed out again
	// while they stay the same.
	quiet kit.Quiet

	// restored is what Restore handed over, by session folder, until a
	// listing takes it; book the gen each folder's committed checkpoint
	// entry was made at.
	restored kit.Restored[*sessState]
	book     kit.Book[uint64]

	// lineage is what was seen below owners while they lived (orphans.go).
	lineage *lineage.Memory

	// drift is what the event logs showed that sessiond does not
	// understand, by session folder (kit.Drift).
	drift kit.Drift
	// hookDrift is the hooks' (unknown events, by session).
	hookDrift kit.Drift

	watchMu sync.Mutex
	watch   []string
}

// New returns an adapter with cfg's defaults filled in.
func New(cfg Config) *Adapter {
	if len(cfg.Roots) == 0 {
		cfg.Roots = agents.Copilot.DefaultRoots()
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
	a := &Adapter{cfg: cfg, log: cfg.Logger, inputs: inputlog.New(cfg.Logger, "Copilot data"),
		lineage: lineage.NewTagged(treeBounds, sessionOf)}
	seen := map[string]bool{}
	for _, r := range cfg.Roots {
		r = filepath.Clean(r)
		if !seen[r] {
			seen[r] = true
			a.roots = append(a.roots, &rootState{path: r, sessions: map[string]*sessState{}})
		}
	}
	return a
}

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return "copilot" }

// RequestRescan implements adapters.Rescanner: the next pass stats every
// session folder.
func (a *Adapter) RequestRescan() { a.rescan.Request() }

// WatchPaths implements adapters.Adapter: each home and its
// session-state/ (where a new session's folder appears), and the folders
// of the sessions in use or written lately (where inuse files come and
// go).
func (a *Adapter) WatchPaths() []string {
	a.watchMu.Lock()
	defer a.watchMu.Unlock()
	if a.watch != nil {
		return append([]string(nil), a.watch...)
	}
	var out []string
	for _, r := range a.cfg.Roots {
		for _, p := range []string{r, filepath.Join(r, "session-state")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}
