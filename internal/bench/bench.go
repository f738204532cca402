// Package bench measures a real sessiond from outside: it generates agent
// data in a temporary directory, runs the built sessiond binary on it, and
// takes its figures from the kernel (/proc/<pid>/status, stat, io and fd)
// and from the daemon's socket, as a user's tools would. cmd/sessiond-bench
// prints them; internal/load runs the load part as a test.
//
// Nothing here touches the real agents' data (~/.claude,
// ~/.local/share/opencode, ~/.codex, ~/.gemini, ~/.qwen, ~/.pi,
// ~/.copilot): every daemon gets its own HOME and explicit agent
// directories.
package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// Scenarios are the benchmark's scenarios in the order they run.
var Scenarios = []string{"death", "home", "cold", "steady", "memory", "api", "hooks", "burst", "load", "restart", "agents", "seven", "growth", "peers", "web"}

// Options scale and select the scenarios.
type Options struct {
	Bins Bins
	// Work is the directory for data, state and sockets (short: sockets
	// live in it). It is removed afterwards unless Keep.
	Work string
	Keep bool
	// Only, if not empty, selects scenarios by name.
	Only map[string]bool

	// death: kills of real owner processes, with exit events and without.
	Kills        int
	PollInterval time.Duration // --reconcile-interval of the polling run

	// home (and restart): the standard home, dense transcripts.
	HomeFiles, HomeBig, HomeProjects int
	HomeBytes                        int64

	// restart: Restarts restarts after SIGTERM and as many after SIGKILL,
	// each after the daemon ran RestartSettle; RestartTenK adds the
	// series on the cold scenario's 10,000 + 2,000 sessions.
	Restarts      int
	RestartSettle time.Duration
	RestartTenK   bool

	// growth: for each of GrowthScales sessions (small dense transcripts
	// in HomeProjects folders), the steady pass over a GrowthIdle window
	// after GrowthSettle, GrowthLists session lists, and the pass after
	// GrowthTouch transcripts change.
	GrowthScales             []int
	GrowthIdle, GrowthSettle time.Duration
	GrowthLists, GrowthTouch int

	// peers: PeerOwners live owners listed PeerRuns times by the real
	// claude CLI at ClaudeBin (skipped when empty) and by sessionctl.
	PeerOwners, PeerRuns int
	ClaudeBin            string

	// cold: Claude transcripts of skewed sizes plus an OpenCode database.
	ColdFiles, ColdProjects int
	OpenCodeSessions        int
	OpenCodeTurns           int
	// CodexRollouts: the Codex home of the cold and restart scenarios
	// (codextest.WriteHome, up to CodexTurns turns each).
	CodexRollouts, CodexTurns int
	// agents, seven: the homes of the newer agents (Gemini CLI, Qwen Code,
	// Pi, GitHub Copilot CLI), AgentSessions each in AgentProjects
	// folders, up to AgentTurns turns per session; Agents selects those
	// the agents scenario measures.
	AgentSessions, AgentProjects, AgentTurns int
	Agents                                   []string
	// DropCaches empties the page cache before each cold start (root).
	DropCaches bool

	// steady: the idle window after Settle.
	Settle, SteadyFor time.Duration

	// api: sequential session lists; Clients x Requests lookups by id.
	ListRequests, APIClients, APIRequests int
	// hooks: HookIDs forged hook ids posted by HookSenders at once while
	// the sessions are listed.
	HookIDs, HookSenders int
	// burst: Subscribers following the stream while Burst owners die.
	Subscribers, Burst int

	// load
	LoadClients, LoadSubscribers, LoadHistory int
	LoadFor                                   time.Duration

	// web: the sessions (besides its live owners) of sessionctl web's
	// first page.
	WebSessions int

	// Log receives progress lines.
	Log func(format string, args ...any)
}

// Full are the scales of the targets in BENCHMARKS.md.
func Full() Options {
	return Options{
		Kills: 50, PollInterval: 5 * time.Second,
		HomeFiles: 2000, HomeBig: 3, HomeProjects: 150, HomeBytes: 2e9, // "1.9 GB"
		Restarts: 5, RestartSettle: 2 * time.Second, RestartTenK: true,
		GrowthScales: []int{1000, 10000, 100000}, GrowthIdle: 20 * time.Second, GrowthSettle: 10 * time.Second, GrowthLists: 5, GrowthTouch: 10,
		PeerOwners: 20, PeerRuns: 10,
		ColdFiles: 10000, ColdProjects: 150, OpenCodeSessions: 2000, OpenCodeTurns: 25, CodexRollouts: 5000, CodexTurns: 40,
		AgentSessions: 2000, AgentProjects: 50, AgentTurns: 30, Agents: newAgents,
		Settle: 15 * time.Second, SteadyFor: 60 * time.Second,
		ListRequests: 20, APIClients: 100, APIRequests: 200,
		HookIDs: 50000, HookSenders: 8,
		Subscribers: 100, Burst: 1000,
		LoadClients: 200, LoadSubscribers: 20, LoadHistory: 500, LoadFor: 20 * time.Second,
		WebSessions: 1990,
	}
}

// Quick are tiny scales that run every scenario in seconds, to check the
// benchmark works (its figures mean little).
func Quick() Options {
	return Options{
		Kills: 5, PollInterval: 500 * time.Millisecond,
		HomeFiles: 40, HomeBig: 1, HomeProjects: 5, HomeBytes: 150 << 20,
		Restarts: 2, RestartSettle: 200 * time.Millisecond, RestartTenK: true,
		GrowthScales: []int{100, 1000}, GrowthIdle: 6 * time.Second, GrowthSettle: time.Second, GrowthLists: 3, GrowthTouch: 10,
		PeerOwners: 3, PeerRuns: 3,
		ColdFiles: 200, ColdProjects: 10, OpenCodeSessions: 20, OpenCodeTurns: 4, CodexRollouts: 50, CodexTurns: 8,
		AgentSessions: 40, AgentProjects: 5, AgentTurns: 6, Agents: newAgents,
		Settle: 3 * time.Second, SteadyFor: 3 * time.Second,
		ListRequests: 5, APIClients: 10, APIRequests: 20,
		HookIDs: 2000, HookSenders: 4,
		Subscribers: 10, Burst: 30,
		LoadClients: 20, LoadSubscribers: 5, LoadHistory: 50, LoadFor: 2 * time.Second,
		WebSessions: 90,
	}
}

// Result is one row of the figure table.
type Result struct {
	Scenario string
	Metric   string
	Value    string
	Target   string
	// Verdict is "met", "MISSED", "" (no target) or "ERROR".
	Verdict string
	// How says how the figure was measured.
	How string
}

// runner runs scenarios and collects their results.
type runner struct {
	opt Options
	res []Result

	tenk     *daemon
	tenkRoot string
	tenkN    int
	tenkCold time.Duration
	tenkErr  error

	// The standard home, written once by homeData.
	homeRoot  *claudetest.Root
	homeHist  claudetest.History
	homeWrite time.Duration
	// homeRowDone: the home scenario described the data already.
	homeRowDone bool

	// The OpenCode database, written once by openCodeData.
	ocDir string
	ocIDs []string
	codex *codextest.Home
	// The newer agents' homes, written once by agentData.
	agentHomes map[string]*agentHome

	// current is the scenario running (data rows go under the scenario
	// that made the data).
	current string

	// execFloors: the cold exec of sessiond measured, by scenario (its
	// row is added once).
	execFloors map[string]time.Duration

	// deferred run when Run returns, last first.
	deferred []func()
}

// later runs f when Run returns.
func (r *runner) later(f func()) { r.deferred = append(r.deferred, f) }

// Run runs the selected scenarios and returns their rows. A failing
// scenario adds an ERROR row and the others still run.
func Run(ctx context.Context, opt Options) []Result {
	if opt.Log == nil {
		opt.Log = func(string, ...any) {}
	}
	r := &runner{opt: opt}
	// A closure: r.tenk is started later, by the first scenario needing it.
	defer func() { r.tenk.Stop() }()
	defer func() {
		for i := len(r.deferred) - 1; i >= 0; i-- {
			r.deferred[i]()
		}
	}()
	run := map[string]func(context.Context) error{
		"death": r.death, "home": r.home, "cold": r.cold, "steady": r.steady,
		"memory": r.memory, "api": r.api, "hooks": r.hooks, "burst": r.burst, "load": r.load,
		"restart": r.restart, "agents": r.agents, "seven": r.seven, "growth": r.growth, "peers": r.peers,
		"web": r.web,
	}
	for _, name := range Scenarios {
		if len(opt.Only) > 0 && !opt.Only[name] {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		opt.Log("scenario %s (load average %s)", name, LoadAverage())
		start := time.Now()
		r.current = name
		if err := run[name](ctx); err != nil {
			r.res = append(r.res, Result{Scenario: name, Metric: "error", Value: oneLine(err.Error()), Verdict: "ERROR"})
		}
		opt.Log("scenario %s done in %s", name, time.Since(start).Round(time.Millisecond))
	}
	return r.res
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " | ")
	if len(s) > 400 {
		s = s[:400] + "…"
	}
	return s
}

func (r *runner) add(scn, metric, value, target string, ok *bool, how string) {
	v := ""
	if ok != nil {
		v = "MISSED"
		if *ok {
			v = "met"
		}
	}
	r.res = append(r.res, Result{Scenario: scn, Metric: metric, Value: value, Target: target, Verdict: v, How: how})
}

func ptr(b bool) *bool { return &b }

// dir makes a fresh directory under the work dir.
func (r *runner) dir(name string) (string, error) {
	return os.MkdirTemp(r.opt.Work, name)
}

// ownersWorld makes a scenario's directory with a Claude root for owner
// processes; done kills the owners and removes the directory.
func (r *runner) ownersWorld(name string) (dir string, owners *Owners, done func(), err error) {
	if dir, err = r.dir(name); err != nil {
		return "", nil, nil, err
	}
	if owners, err = NewOwners(filepath.Join(dir, "claude")); err != nil {
		r.cleanup(dir)
		return "", nil, nil, err
	}
	return dir, owners, func() { owners.KillAll(); r.cleanup(dir) }, nil
}

func (r *runner) cleanup(dir string) {
	if !r.opt.Keep {
		os.RemoveAll(dir)
	}
}

func (r *runner) dropCaches() string {
	// Write the generated data back first: else the daemon's first fsync
	// (its store's) may wait for the file system to flush our writes.
	syscall.Sync()
	if !r.opt.DropCaches {
		return "page cache warm (data just written, then synced)"
	}
	if err := dropCaches(); err != nil {
		return "page cache NOT dropped: " + err.Error()
	}
	return "page cache dropped before start"
}

// startDaemon starts a daemon and stops it when the caller's cleanup runs.
func (r *runner) startDaemon(dir string, cfg daemonConfig) (*daemon, error) {
	cfg.Dir = dir
	return spawnDaemon(r.opt.Bins, cfg)
}

func procStats(d *daemon) (processStats, error) {
	s, err := readProcessStats(d.PID())
	if err != nil {
		return s, fmt.Errorf("read /proc of sessiond %d: %w", d.PID(), err)
	}
	return s, nil
}

func projectDirs(root string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(root, "projects"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(root, "projects", e.Name()))
		}
	}
	return out, nil
}
