// Package claude observes Claude Code sessions for sessiond.
//
// It reads, per config root (~/.claude, $CLAUDE_CONFIG_DIR, and roots
// learned from live claude processes):
//
//	<root>/sessions/<pid>.json            the live-process registry (never the *.key files)
//	<root>/projects/<dir>/<uuid>.jsonl    the transcripts
//
// and the process-table snapshot the tracker hands to Discover. Claude
// Code's files are not a contract (see docs/agents/claude.md): every
// field is optional, unknown line types are skipped, corrupt and overlong
// lines are skipped and counted, and nothing here decides liveness. The
// registry names owners (validated against the process identity); a
// transcript tells the last turn's state; the tracker probes the owners.
//
// Reading is incremental: a transcript's first listing reads only its first
// and last 64 KB, later passes read only appended bytes, and a pass over
// unchanged files only stats them. A full rescan of the directories runs
// periodically (default 60 s), because change notifications are hints.
//
// The pass is discover.go: roots.go and registry.go keep what each root
// and registry entry was at its last look, package transcript reads the
// transcripts, owners.go names each session's owners and assemble.go
// builds the observations. checkpoint.go saves what was read, so a
// restart does not read it again.
package claude

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/adapters/internal/inputlog"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/lineage"
	"github.com/sessiond/sessiond/proc"
)

// Config configures an Adapter. Zero values take the defaults.
type Config struct {
	// Roots are the config roots to read (the daemon's --claude-dir).
	Roots []string
	// DefaultRoot is the root of claude processes that have no
	// CLAUDE_CONFIG_DIR (default ~/.claude of the daemon's user).
	DefaultRoot string
	// NoLearnedRoots turns off reading the roots of live claude processes'
	// CLAUDE_CONFIG_DIR (on by default).
	NoLearnedRoots bool
	// ProcRoot is the proc file system root (default /proc), used when a
	// pass comes without a snapshot and for process start times.
	ProcRoot string
	Logger   *zap.Logger
	// FullRescan is how often every directory is listed again even if its
	// mtime did not change (default 60 s).
	FullRescan time.Duration
	// MaxLineBytes caps a transcript line; longer lines are skipped and
	// counted (default 8 MiB; lines near 1 MB are real).
	MaxLineBytes int
	// WindowBytes is how much of a transcript's head and of its tail a
	// listing reads (default 64 KiB).
	WindowBytes int
	// MaxAppendBytes bounds an incremental read: a file that grew more than
	// this since the last pass is re-read from its tail window instead
	// (default 16 MiB).
	MaxAppendBytes int64
	// ColdAfter: a transcript not modified for this long, that no live
	// process may be writing (no registry entry or argv names it, no live
	// claude runs in its cwd), is stat'ed only at full rescans (default
	// 10 min). Zero takes the default; negative stats every file each pass.
	ColdAfter time.Duration
	// MaxWatches bounds WatchPaths (default 512), so neither inotify nor
	// kqueue (a descriptor per watch) runs out.
	MaxWatches int
	// Workers read transcripts in parallel (default 8, or
	// GOMAXPROCS when that is more). More than the cores: a cold read
	// waits on the disk, not the CPU, and the standard home's first start
	// went from 400–465 ms to 344–363 ms with 8 reads in flight instead
	// of 2 on a 2-core machine (the I/O alone: 430 ms with 2, 205 ms with
	// 8, 181 ms with 32); a warm read parses on whichever core is free.
	Workers int
	// FS is the file system (default the OS); tests inject errors with it.
	FS FS
	// Host answers about processes when a pass has no snapshot, and gives
	// process start times (default a proc.Host on ProcRoot).
	Host ProcHost
	// Binary is the claude executable sessiond launches (default "claude"
	// from PATH).
	Binary string
	// Home is sessiond's own home (default $HOME): a claude process with
	// neither CLAUDE_CONFIG_DIR nor another HOME in its environment writes
	// to DefaultRoot; one with another HOME to that home's .claude.
	Home string
}

// ProcHost is the part of proc.Host the adapter uses.
type ProcHost interface {
	BootID() (string, error)
	Identify(pid int) (proc.Identity, error)
	// Probe is the tracker's identity probe: a repair acts only on an
	// owner it confirms dead.
	Probe(proc.Identity) proc.Result
	proc.StartTimer
	domainHost
}

// Defaults for Config.
const (
	defaultFullRescan     = 60 * time.Second
	defaultMaxLineBytes   = 8 << 20
	defaultWindowBytes    = transcript.DefaultWindow
	defaultMaxAppendBytes = 16 << 20
	defaultMaxWatches     = 512
	defaultColdAfter      = 10 * time.Minute
	defaultWorkers        = 8
	maxLearnedRoots       = 32
)

// Adapter is the Claude Code adapter. Safe for concurrent use; passes
// serialize.
type Adapter struct {
	cfg  Config
	log  *zap.Logger
	fs   FS
	host ProcHost

	rescan    kit.Rescan
	bytesRead atomic.Int64

	mu    sync.Mutex // one pass at a time; guards the fields below
	roots []*rootState
	// lineage is what was seen below live claudes (orphans.go).
	lineage *lineage.Memory
	inputs  *inputlog.Log
	stats   stats
	// restored holds saved transcript state (Restore), encoded, until the
	// first pass lists each transcript; book is the gen of each saved
	// entry's state.
	restored   kit.Restored[[]byte]
	restoredMu sync.Mutex // takeRestored runs on scanProjects' goroutines; guards restoreLog too
	restoreLog restoreLog
	book       kit.Book[uint64]
	// stamp is the last Observed.Stamp given out (observeFile).
	stamp uint64
	// quiet keeps the quiet sessions' observations between passes.
	quiet quietCache
	// fileWarn are the transcripts' warnings as of fileWarnShape.
	fileWarn      []adapters.InputError
	fileWarnShape uint64
	fileWarnOK    bool
	// watchShape is the shape the watch list was made at; cpShape the
	// shape of the last committed Checkpoint (cpShapeOK once there is one).
	watchShape uint64
	cpShape    uint64
	cpShapeOK  bool

	watchMu sync.Mutex
	watch   []string
	passed  bool

	// drift is what the transcripts showed that sessiond does not
	// understand, by path; regDrift the registry entries', hookDrift the
	// hooks' (kit.Drift). dropped is set where a transcript's state is
	// dropped, so the pass takes its drift out.
	drift, regDrift, hookDrift kit.Drift
	dropped                    atomic.Bool
}

// New returns an Adapter. It does no I/O.
func New(cfg Config) *Adapter {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = proc.DefaultRoot
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	if cfg.FullRescan <= 0 {
		cfg.FullRescan = defaultFullRescan
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = defaultMaxLineBytes
	}
	if cfg.WindowBytes <= 0 {
		cfg.WindowBytes = defaultWindowBytes
	}
	if cfg.MaxAppendBytes <= 0 {
		cfg.MaxAppendBytes = defaultMaxAppendBytes
	}
	if cfg.ColdAfter == 0 {
		cfg.ColdAfter = defaultColdAfter
	}
	if cfg.ColdAfter < 0 {
		cfg.ColdAfter = 1<<63 - 1
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = defaultMaxWatches
	}
	if cfg.Workers <= 0 {
		cfg.Workers = max(runtime.GOMAXPROCS(0), defaultWorkers)
	}
	if cfg.FS == nil {
		cfg.FS = osFS{}
	}
	if cfg.Host == nil {
		cfg.Host = &proc.Host{Root: cfg.ProcRoot}
	}
	if cfg.Binary == "" {
		cfg.Binary = "claude"
	}
	if cfg.Home == "" {
		cfg.Home, _ = os.UserHomeDir()
	}
	if cfg.DefaultRoot == "" && cfg.Home != "" {
		cfg.DefaultRoot = filepath.Join(cfg.Home, ".claude")
	}
	cfg.DefaultRoot = cleanPath(cfg.DefaultRoot)
	a := &Adapter{
		cfg:     cfg,
		log:     cfg.Logger,
		fs:      cfg.FS,
		host:    cfg.Host,
		lineage: lineage.New(treeBounds),
		inputs:  inputlog.New(cfg.Logger, "Claude Code data"),
	}
	seen := map[string]bool{}
	for _, r := range cfg.Roots {
		r = cleanPath(r)
		if r == "" || seen[r] {
			continue
		}
		seen[r] = true
		a.roots = append(a.roots, newRootState(r, false))
	}
	return a
}

// Name implements adapters.Adapter.
func (a *Adapter) Name() string { return "claude" }

// RequestRescan makes the next pass list every directory again, as the
// periodic full rescan does (after a watcher overflow, say).
func (a *Adapter) RequestRescan() { a.rescan.Request() }

// stats count the adapter's work; tests read them (counters, in
// export_test.go) to check what a pass read and reused.
type stats struct {
	Passes      uint64
	FullRescans uint64
	// BytesRead counts every byte read from agent files (transcripts and
	// registry entries), through the adapter's own counting reader.
	BytesRead      int64
	FilesListed    uint64 // first listings and restarts (head and tail)
	FilesRestarted uint64 // of which: replaced, shrunk or rewritten files
	FilesAppended  uint64 // incremental reads of appended bytes
	FilesRetailed  uint64 // grew too much: re-read from the tail window
	// QuietReused counts the passes that reused the quiet sessions'
	// observations instead of building every session (quiet.go).
	QuietReused     uint64
	LinesRead       int64
	LinesTooLong    int64
	LinesCorrupt    int64
	LinesGlued      int64
	Transcripts     int
	RegistryEntries int
	Roots           int
}

// WatchPaths implements adapters.Adapter: each root's sessions/ and
// projects/ and the most recently used project folders (bounded by
// MaxWatches), or the root itself while those do not exist yet.
func (a *Adapter) WatchPaths() []string {
	a.watchMu.Lock()
	if a.passed {
		defer a.watchMu.Unlock()
		return append([]string(nil), a.watch...)
	}
	a.watchMu.Unlock()
	// Before the first pass: the fixed directories that exist.
	var out []string
	for _, r := range a.cfg.Roots {
		r = cleanPath(r)
		n := 0
		for _, sub := range []string{"sessions", "projects"} {
			p := filepath.Join(r, sub)
			if fi, err := a.fs.Stat(p); err == nil && fi.IsDir() {
				out = append(out, p)
				n++
			}
		}
		if n < 2 {
			if fi, err := a.fs.Stat(r); err == nil && fi.IsDir() {
				out = append(out, r)
			}
		}
	}
	return out
}

// updateWatch recomputes WatchPaths after a pass.
func (a *Adapter) updateWatch() {
	var fixed []string
	type proj struct {
		path string
		last time.Time
	}
	var projs []proj
	for _, r := range a.roots {
		if !r.present {
			continue
		}
		n := 0
		if r.sessionsDir.exists {
			fixed = append(fixed, filepath.Join(r.path, "sessions"))
			n++
		}
		if r.projectsDir.exists {
			fixed = append(fixed, filepath.Join(r.path, "projects"))
			n++
		}
		if n < 2 {
			fixed = append(fixed, r.path) // to see sessions/ or projects/ appear
		}
		for _, p := range r.projects {
			last := p.dir.mtime
			for _, f := range p.files {
				if f.mtime.After(last) {
					last = f.mtime
				}
			}
			projs = append(projs, proj{p.path, last})
		}
	}
	sort.Slice(projs, func(i, j int) bool {
		if !projs[i].last.Equal(projs[j].last) {
			return projs[i].last.After(projs[j].last)
		}
		return projs[i].path < projs[j].path
	})
	out := fixed
	if len(out) > a.cfg.MaxWatches {
		out = out[:a.cfg.MaxWatches]
	}
	for _, p := range projs {
		if len(out) >= a.cfg.MaxWatches {
			break
		}
		out = append(out, p.path)
	}
	a.watchMu.Lock()
	a.watch, a.passed = out, true
	a.watchMu.Unlock()
}
