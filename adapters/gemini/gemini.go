// Package gemini is sessiond's adapter for Gemini CLI (@google/gemini-cli,
// the `gemini` command).
//
// Gemini CLI keeps no PID registry and holds no lock. Each session is a
// chat file, $GEMINI_CLI_HOME/.gemini/tmp/<project>/chats/
// session-<YYYY-MM-DDThh-mm>-<id8>.jsonl (older versions: a whole-file
// .json), whose lines fold into the conversation (chat.go); a subagent's
// chat is chats/<parent session id>/<session id>.jsonl. <project> is a
// short name ~/.gemini/projects.json gives the project's folder; the chat
// names the folder only by its hash (projectHash, the SHA-256 of its
// path). The last message says the turn state (activity.go); since
// 0.61.0 writes a call only once it finished, a tool process below the
// owner says busy where the chat shows an answer.
//
// Owners are inferred (owners.go): the gemini processes whose folder has
// the chat's projectHash and that started before its last write, exact
// when argv names that very session (--resume, --session-id) or a
// descriptor holds the chat open; several candidates make the session's owner ambiguous, and it
// stops only when every one is dead. What a dead gemini left behind is
// found by the process tree seen while it lived (orphans.go).
//
// Reading is incremental (discover.go): a pass stats the chats that may
// change (new, written recently, or in a folder a live gemini works in)
// and folds only the lines appended; a replaced file is read from its
// start; a full rescan looks at every chat now and then; a checkpoint
// (checkpoint.go) saves what was folded so a restart reads only what
// changed. Launch and resume (launch.go) name the session id on the
// command line. See docs/agents/gemini.md.
package gemini

import (
	"os"
	"path/filepath"
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
	// Roots are the Gemini CLI data folders to read (default
	// $GEMINI_CLI_HOME/.gemini, else ~/.gemini): the daemon's --gemini-dir.
	Roots []string
	// Binary is the gemini executable (default "gemini").
	Binary string
	// Host reads open files and start times (default proc.NewHost()).
	Host   ProcHost
	Logger *zap.Logger
	// ColdAfter: a chat not written for this long, in a folder no gemini
	// works in, is stat'ed at full rescans only (default 10 min).
	ColdAfter time.Duration
	// FullRescan is how often every chat is stat'ed (default 5 min).
	FullRescan time.Duration
	// MaxWhole bounds a whole-file (.json) chat read (default 64 MiB): a
	// larger one is a warning, not read.
	MaxWhole int64
}

// ProcHost is the part of proc.Host the adapter uses.
type ProcHost interface {
	OpenFiles(pid int) (proc.Descriptors, error)
	StartTime(id proc.Identity) (time.Time, error)
}

const (
	defaultColdAfter  = 10 * time.Minute
	defaultFullRescan = 5 * time.Minute
	defaultMaxWhole   = 64 << 20
)

// Adapter observes Gemini CLI sessions. Discover is serialized by mu.
type Adapter struct {
	cfg Config
	log *zap.Logger

	mu     sync.Mutex
	roots  []*rootState
	rescan kit.Rescan
	inputs *inputlog.Log
	gen    uint64 // the last fileState.gen given
	// shape counts the other changes observations are built from: chats
	// listed or gone, projects.json or a .project_root read (kit.Key).
	shape uint64
	// retryRoots: a .project_root could not be read in the last build;
	// each pass builds again until it can.
	retryRoots bool

	// restored is what Restore handed over, by path, until a listing takes
	// it; book the gen each path's committed checkpoint entry was made at.
	restored kit.Restored[*fileState]
	book     kit.Book[uint64]

	// quiet is the set of the sessions no gemini owns, handed out again
	// while they stay the same.
	quiet kit.Quiet

	// lineage is what was seen below owners while they lived; owned the
	// sessions each owner could own when last seen (orphans.go).
	lineage *lineage.Memory
	owned   map[proc.Identity]*ownerMemo

	// drift is what the chats showed that sessiond does not understand,
	// by path (kit.Drift).
	drift kit.Drift
	// hookDrift is the hooks' (unknown events, by session).
	hookDrift kit.Drift

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
		cfg.Roots = agents.Gemini.DefaultRoots()
	}
	if cfg.Binary == "" {
		cfg.Binary = "gemini"
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
	if cfg.MaxWhole <= 0 {
		cfg.MaxWhole = defaultMaxWhole
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger, inputs: inputlog.New(cfg.Logger, "Gemini CLI data"),
		lineage: lineage.New(treeBounds), owned: map[proc.Identity]*ownerMemo{}}
	seen := map[string]bool{}
	for _, r := range cfg.Roots {
		r = filepath.Clean(r)
		if !seen[r] {
			seen[r] = true
			a.roots = append(a.roots, newRoot(r))
		}
	}
	return a
}

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return "gemini" }

// RequestRescan implements adapters.Rescanner: the next pass stats every
// chat and lists every folder again.
func (a *Adapter) RequestRescan() { a.rescan.Request() }

// WatchPaths implements adapters.Adapter: each root, its tmp/, and the
// chats/ folders of its projects, those that exist.
func (a *Adapter) WatchPaths() []string {
	a.watchMu.Lock()
	defer a.watchMu.Unlock()
	if a.watch != nil {
		return append([]string(nil), a.watch...)
	}
	var out []string
	for _, r := range a.cfg.Roots {
		for _, p := range []string{r, filepath.Join(r, "tmp")} {
			if fi, err := os.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}
