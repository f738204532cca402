// Package pi is sessiond's adapter for Pi, the coding agent of
// @mariozechner/pi-coding-agent (its binary `pi`).
//
// Pi keeps no PID registry and holds no lock. Each session is one file,
// <root>/sessions/--<cwd, / as ->--/<time>_<uuid>.jsonl (root ~/.pi/agent,
// or $PI_CODING_AGENT_DIR), whose first line is the session header and
// whose later lines are entries appended as the session goes: prompts,
// replies, tool calls and their results (session.go). The turn state is
// read from the tail; reading is incremental (discover.go): a pass stats
// the files that may change (new, written recently) and reads only
// appended bytes; a file replaced at its path is read from its start; a
// full rescan stats every file now and then. What was read is saved
// (checkpoint.go), so a restart reads only what changed.
//
// Nothing in Pi's data names its process, so owners are found among the
// live pi processes (node running Pi's cli.js): exactly when one names
// the session's file or id on its command line (--session) or holds the
// file open, else inferred by its working directory, every candidate
// listed, so that the session stops only when all are dead (owners.go).
// Pi asks for no permission before a tool runs: a tool call without its
// result is a tool running. What a dead pi left behind is found from the
// process tree seen while it lived (orphans.go). See docs/agents/pi.md.
package pi

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
	// Roots are Pi's agent dirs to read (default $PI_CODING_AGENT_DIR,
	// else ~/.pi/agent): the daemon's --pi-dir.
	Roots []string
	// Binary is the pi executable sessiond launches (default "pi").
	Binary string
	// Host reads the process table's open files and start times (default
	// proc.NewHost()).
	Host   ProcHost
	Logger *zap.Logger
	// ColdAfter: a session file not written for this long is stat'ed at
	// full rescans only, unless a live pi may be writing it (default
	// 10 min).
	ColdAfter time.Duration
	// FullRescan is how often every session file is stat'ed (default
	// 5 min).
	FullRescan time.Duration
	// MaxTail bounds the tail read for the turn state (default 8 MiB); a
	// larger growth between passes is read as a new tail.
	MaxTail int64
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

// Adapter observes Pi sessions. Discover is serialized by mu.
type Adapter struct {
	cfg Config
	log *zap.Logger

	mu     sync.Mutex
	roots  map[string]*rootState
	order  []string
	rescan kit.Rescan
	inputs *inputlog.Log
	gen    uint64 // the last fileState.gen given
	// shape counts the other changes observations are built from: session
	// files listed or gone (kit.Key).
	shape uint64

	// quiet is the set of the sessions no pi owns, handed out again
	// while they stay the same.
	quiet kit.Quiet

	// restored is what Restore handed over, by path, until a listing takes
	// it; book the gen each path's committed checkpoint entry was made at.
	restored kit.Restored[*fileState]
	book     kit.Book[uint64]

	// lineage is what was seen below owners while they lived; owned the
	// sessions each owner was a candidate of, for what it left behind
	// (orphans.go).
	lineage *lineage.Memory
	owned   map[proc.Identity]*ownerMemo

	// drift is what the session files showed that sessiond does not
	// understand, by path (kit.Drift).
	drift kit.Drift

	watchMu sync.Mutex
	watch   []string
}

// New returns an adapter with cfg's defaults filled in.
func New(cfg Config) *Adapter {
	if len(cfg.Roots) == 0 {
		cfg.Roots = agents.Pi.DefaultRoots()
	}
	if cfg.Binary == "" {
		cfg.Binary = "pi"
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
	a := &Adapter{cfg: cfg, log: cfg.Logger, roots: map[string]*rootState{},
		inputs: inputlog.New(cfg.Logger, "Pi data"), lineage: lineage.New(treeBounds), owned: map[proc.Identity]*ownerMemo{}}
	for _, r := range cfg.Roots {
		p := filepath.Clean(r)
		if a.roots[p] == nil {
			a.roots[p] = &rootState{path: p, files: map[string]*fileState{}, dirs: kit.Dirs{}}
			a.order = append(a.order, p)
		}
	}
	return a
}

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return "pi" }

// RequestRescan implements adapters.Rescanner: the next pass stats every
// session file and lists every folder again.
func (a *Adapter) RequestRescan() { a.rescan.Request() }

// WatchPaths implements adapters.Adapter: each root, its sessions/ and the
// project folders in it (where session files appear and grow), those that
// exist.
func (a *Adapter) WatchPaths() []string {
	a.watchMu.Lock()
	defer a.watchMu.Unlock()
	if a.watch != nil {
		return append([]string(nil), a.watch...)
	}
	var out []string
	for _, r := range a.cfg.Roots {
		for _, p := range []string{r, filepath.Join(r, "sessions")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}
