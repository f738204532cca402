// Package qwen is sessiond's adapter for Qwen Code (the `qwen` CLI).
//
// Each session is a chat file, <home>/projects/<cwd with every
// non-alphanumeric byte as '-'>/chats/<sessionId>.jsonl, one record per
// line, appended and never rewritten (chat.go); the name of the project
// folder cannot be turned back into the cwd, which every record carries.
// The interactive TUI also registers itself in <home>/sessions/<pid>.json
// with its session id and its start ticks (registry.go); `qwen -p`
// registers nothing, so its owner is found in the process table (argv,
// cwd, the tools it runs; owners.go). Nothing in Qwen's files says a
// permission prompt waits: it looks like a running tool. Tools carry
// QWEN_CODE_SESSION_ID, and those a dead owner left behind are
// orphan_processes, reapable only on evidence from the process tree seen
// while the owner lived (orphans.go). Reading is incremental
// (discover.go): a pass stats the chats that may change, reads only what
// was appended, and a replaced file from its start; what was read is
// checkpointed (checkpoint.go). See docs/agents/qwen.md.
package qwen

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/inputlog"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/agents"
	"github.com/sessiond/sessiond/proc"
)

// Config configures the adapter. Zero values take the defaults.
type Config struct {
	// Roots are the Qwen homes to read (default $QWEN_HOME, else ~/.qwen):
	// the daemon's --qwen-dir.
	Roots []string
	// Binary is the qwen executable sessiond launches (default "qwen").
	Binary string
	// StartTimer gives process start times (default proc.NewHost()).
	StartTimer StartTimer
	Logger     *zap.Logger
	// ColdAfter: a chat not written for this long is stat'ed at full
	// rescans only, unless a live qwen works in its cwd (default 10 min).
	ColdAfter time.Duration
	// FullRescan is how often every chat is stat'ed (default 5 min).
	FullRescan time.Duration
	// MaxLine bounds a line held in memory (default 64 MiB); a longer one
	// is skipped, with a warning.
	MaxLine int
}

const (
	defaultColdAfter  = 10 * time.Minute
	defaultFullRescan = 5 * time.Minute
	// sessionVar is the variable Qwen sets in every tool it runs.
	sessionVar = "QWEN_CODE_SESSION_ID"
)

// Adapter observes Qwen Code sessions. Discover is serialized by mu.
type Adapter struct {
	cfg   Config
	log   *zap.Logger
	pidNS uint64

	mu     sync.Mutex
	roots  map[string]*rootState
	order  []string
	rescan kit.Rescan
	inputs *inputlog.Log
	gen    uint64 // the last fileState.gen given
	// shape counts the other changes observations are built from: chats
	// listed or gone (kit.Key).
	shape uint64
	// reads and bytesRead count the chats read and the bytes read.
	reads     int
	bytesRead int64

	// quiet is the set of the sessions no qwen owns, handed out again
	// while they stay the same.
	quiet kit.Quiet

	restored kit.Restored[*fileState]
	book     kit.Book[uint64]

	lineage *lineage.Memory
	// drift is what the chats showed that sessiond does not understand,
	// by path; hookDrift the hooks' (kit.Drift).
	drift, hookDrift kit.Drift

	watchMu sync.Mutex
	watch   []string
}

var (
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Rescanner = (*Adapter)(nil)
)

// New returns an adapter with cfg's defaults filled in.
func New(cfg Config) *Adapter {
	if len(cfg.Roots) == 0 {
		cfg.Roots = agents.Qwen.DefaultRoots()
	}
	if cfg.Binary == "" {
		cfg.Binary = "qwen"
	}
	if cfg.StartTimer == nil {
		cfg.StartTimer = proc.NewHost()
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
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = defaultMaxLine
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger, roots: map[string]*rootState{}, pidNS: ownPIDNamespace(),
		inputs: inputlog.New(cfg.Logger, "Qwen Code data"), lineage: lineage.NewTagged(treeBounds, sessionOf)}
	for _, r := range cfg.Roots {
		r = filepath.Clean(r)
		if a.roots[r] == nil {
			a.roots[r] = newRoot(r)
			a.order = append(a.order, r)
		}
	}
	return a
}

// ownPIDNamespace is the inode of this process's PID namespace, as Qwen
// writes pidNs; 0 where there is none to read.
func ownPIDNamespace() uint64 {
	l, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return 0
	}
	l = strings.TrimSuffix(strings.TrimPrefix(l, "pid:["), "]")
	n, _ := strconv.ParseUint(l, 10, 64)
	return n
}

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return agents.Qwen.Name }

// RequestRescan implements adapters.Rescanner.
func (a *Adapter) RequestRescan() { a.rescan.Request() }

// WatchPaths implements adapters.Adapter: each home, its projects/ and
// sessions/, and the chats/ folders of the projects written to most
// recently.
func (a *Adapter) WatchPaths() []string {
	a.watchMu.Lock()
	defer a.watchMu.Unlock()
	if a.watch != nil {
		return append([]string(nil), a.watch...)
	}
	var out []string
	for _, r := range a.cfg.Roots {
		for _, p := range []string{r, filepath.Join(r, "projects"), filepath.Join(r, "sessions")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}
