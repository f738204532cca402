// Command sessiond-bench measures sessiond against its speed targets
// (BENCHMARKS.md) and prints a table of figures with the machine and the exact
// command.
//
// It generates its agent data in a temporary directory, builds (or takes)
// the sessiond and sessionctl binaries, runs the daemon as a separate
// process, and reads its figures from the kernel (/proc) and its socket.
// Nothing of the real user's agents is read: every daemon gets its own
// HOME and explicit agent directories.
//
//	go run ./cmd/sessiond-bench                 # every scenario at full scale (~12 min; ~3 GiB of disk: the dense home, the 100k growth step)
//	go run ./cmd/sessiond-bench -quick          # every scenario, tiny, in ~40 s
//	go run ./cmd/sessiond-bench -only death,api # some scenarios
//	go run ./cmd/sessiond-bench -format markdown
//
// The scenarios:
//
//	home     the standard home, dense (2,000 transcripts, ~2 GB of real lines, 1 in 20 ending mid tool call): cold ls, CPU, bytes read, warm sessionctl ls, RSS
//	growth   1k, 10k, 100k sessions: steady pass, list, idle CPU, RSS, and the pass after 10 transcripts change (-growth, -growth-idle)
//	peers    N live owners listed by Claude Code's own `claude agents --json` and by `sessionctl ls --json`: both times, and whether they agree (-peers, -claude-bin; skipped without $SESSIOND_CLAUDE_BIN)
//	hooks    50,000 forged hook ids posted while the sessions are listed: the list's p99
//	restart  sessiond stopped (SIGTERM) or killed (SIGKILL) and started again on its store: exec to first complete ls, CPU, bytes read (-restarts, -restart-12k)
//	agents   Gemini CLI, Qwen Code, Pi, Copilot CLI, each alone on a home of its own format: cold start beside its floor, idle CPU, restarts (-agents, -agent-sessions, -agent-turns)
//	seven    one daemon over all seven agents' homes at once: every session listed, RSS
//	web      sessionctl web in headless Chromium over 2,000 sessions: first page, event to page, idle CPU (skipped without chromium)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/sessiond/sessiond/internal/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sessiond-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "tiny scales: every scenario in seconds (checks the benchmark, not sessiond)")
	only := fs.String("only", "", "comma-separated scenarios to run: "+strings.Join(bench.Scenarios, ","))
	format := fs.String("format", "text", "output: text or markdown")
	sessiond := fs.String("sessiond", "", "sessiond binary (default: build ./cmd/sessiond)")
	sessionctl := fs.String("sessionctl", "", "sessionctl binary (default: build ./cmd/sessionctl)")
	tmp := fs.String("tmp", "/tmp", "where the work directory goes (short: sockets live in it)")
	keep := fs.Bool("keep", false, "keep the work directory")
	quiet := fs.Bool("q", false, "no progress lines on stderr")
	dropCaches := fs.Bool("drop-caches", false, "drop the page cache before each cold start (root, Linux)")

	// Scales; their defaults are the full ones, -quick replaces those not
	// given explicitly.
	full := bench.Full()
	kills := fs.Int("kills", full.Kills, "death: owners killed per run")
	poll := fs.Duration("poll-interval", full.PollInterval, "death: --reconcile-interval of the run without exit events")
	homeFiles := fs.Int("home-files", full.HomeFiles, "home: transcripts")
	homeBytes := fs.Int64("home-bytes", full.HomeBytes, "home, restart: the transcripts' total size in bytes (dense: every byte real lines)")
	restarts := fs.Int("restarts", full.Restarts, "restart: restarts after SIGTERM, and as many after SIGKILL")
	restartSettle := fs.Duration("restart-settle", full.RestartSettle, "restart: how long each daemon runs before it is stopped")
	restart12k := fs.Bool("restart-12k", full.RestartTenK, "restart: also restart on the cold scenario's 10,000 Claude + 2,000 OpenCode sessions")
	growth := fs.String("growth", joinInts(full.GrowthScales), "growth: comma-separated session counts")
	growthIdle := fs.Duration("growth-idle", full.GrowthIdle, "growth: the idle window of the steady pass and CPU figures")
	peerOwners := fs.Int("peers", full.PeerOwners, "peers: live owners listed by claude agents --json and sessionctl ls --json")
	peerRuns := fs.Int("peer-runs", full.PeerRuns, "peers: timed runs of each lister")
	claudeBin := fs.String("claude-bin", os.Getenv("SESSIOND_CLAUDE_BIN"), "peers: the real claude CLI ($SESSIOND_CLAUDE_BIN; the scenario is skipped without one)")
	coldFiles := fs.Int("cold-files", full.ColdFiles, "cold/steady/memory/api: Claude transcripts")
	ocSessions := fs.Int("opencode-sessions", full.OpenCodeSessions, "cold: OpenCode sessions")
	cxRollouts := fs.Int("codex-rollouts", full.CodexRollouts, "cold, restart: Codex rollouts")
	cxTurns := fs.Int("codex-turns", full.CodexTurns, "cold, restart: most turns of a Codex rollout (log-uniform from 1)")
	agentSessions := fs.Int("agent-sessions", full.AgentSessions, "agents, seven: sessions in each newer agent's home (Gemini CLI, Qwen Code, Pi, Copilot CLI)")
	agentTurns := fs.Int("agent-turns", full.AgentTurns, "agents, seven: most turns of a newer agent's session (log-uniform from 1)")
	agentProjects := fs.Int("agent-projects", full.AgentProjects, "agents, seven: project folders of each newer agent's home")
	agentList := fs.String("agents", strings.Join(full.Agents, ","), "agents: the newer agents measured alone")
	steadyFor := fs.Duration("steady", full.SteadyFor, "steady: the idle window")
	apiClients := fs.Int("api-clients", full.APIClients, "api: concurrent clients on GET /v1/sessions/{id}")
	hookIDs := fs.Int("hook-ids", full.HookIDs, "hooks: distinct forged session ids posted as hooks while the sessions are listed")
	subscribers := fs.Int("subscribers", full.Subscribers, "burst: event-stream subscribers")
	burst := fs.Int("burst", full.Burst, "burst: owners killed at once (status events)")
	loadClients := fs.Int("load-clients", full.LoadClients, "load: concurrent clients")
	loadFor := fs.Duration("load-duration", full.LoadFor, "load: duration")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	opt := full
	if *quick {
		opt = bench.Quick()
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pick := func(name string, dst *int, v int) {
		if set[name] {
			*dst = v
		}
	}
	pick("kills", &opt.Kills, *kills)
	pick("home-files", &opt.HomeFiles, *homeFiles)
	pick("cold-files", &opt.ColdFiles, *coldFiles)
	pick("restarts", &opt.Restarts, *restarts)
	pick("peers", &opt.PeerOwners, *peerOwners)
	pick("peer-runs", &opt.PeerRuns, *peerRuns)
	opt.ClaudeBin = *claudeBin
	if set["restart-settle"] {
		opt.RestartSettle = *restartSettle
	}
	if set["growth"] {
		v, err := parseInts(*growth)
		if err != nil {
			fmt.Fprintf(stderr, "sessiond-bench: -growth: %v\n", err)
			return 2
		}
		opt.GrowthScales = v
	}
	if set["growth-idle"] {
		opt.GrowthIdle = *growthIdle
	}
	if set["restart-12k"] {
		opt.RestartTenK = *restart12k
	}
	pick("opencode-sessions", &opt.OpenCodeSessions, *ocSessions)
	pick("codex-rollouts", &opt.CodexRollouts, *cxRollouts)
	pick("codex-turns", &opt.CodexTurns, *cxTurns)
	pick("agent-sessions", &opt.AgentSessions, *agentSessions)
	pick("agent-turns", &opt.AgentTurns, *agentTurns)
	pick("agent-projects", &opt.AgentProjects, *agentProjects)
	if set["agents"] {
		opt.Agents = nil
		for _, a := range strings.Split(*agentList, ",") {
			if !slices.Contains(full.Agents, a) {
				fmt.Fprintf(stderr, "sessiond-bench: -agents: unknown agent %q (want some of %s)\n", a, strings.Join(full.Agents, ","))
				return 2
			}
			opt.Agents = append(opt.Agents, a)
		}
	}
	pick("api-clients", &opt.APIClients, *apiClients)
	pick("hook-ids", &opt.HookIDs, *hookIDs)
	pick("subscribers", &opt.Subscribers, *subscribers)
	pick("burst", &opt.Burst, *burst)
	pick("load-clients", &opt.LoadClients, *loadClients)
	if set["poll-interval"] {
		opt.PollInterval = *poll
	}
	if set["home-bytes"] {
		opt.HomeBytes = *homeBytes
	}
	if set["steady"] {
		opt.SteadyFor = *steadyFor
	}
	if set["load-duration"] {
		opt.LoadFor = *loadFor
	}
	if *only != "" {
		opt.Only = map[string]bool{}
		known := strings.Join(bench.Scenarios, ",")
		for _, s := range strings.Split(*only, ",") {
			if !strings.Contains(","+known+",", ","+s+",") {
				fmt.Fprintf(stderr, "sessiond-bench: unknown scenario %q (want %s)\n", s, known)
				return 2
			}
			opt.Only[s] = true
		}
	}
	if *format != "text" && *format != "markdown" {
		fmt.Fprintf(stderr, "sessiond-bench: -format must be text or markdown\n")
		return 2
	}
	opt.Keep, opt.DropCaches = *keep, *dropCaches
	if !*quiet {
		opt.Log = func(f string, a ...any) {
			fmt.Fprintf(stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(f, a...))
		}
	}
	if !bench.Supported {
		fmt.Fprintln(stderr, "sessiond-bench: this platform has no /proc; process figures (RSS, CPU, bytes read, descriptors) will fail")
	}

	work, err := os.MkdirTemp(*tmp, "sdb")
	if err != nil {
		fmt.Fprintf(stderr, "sessiond-bench: %v\n", err)
		return 1
	}
	opt.Work = work
	if *keep {
		fmt.Fprintf(stderr, "sessiond-bench: keeping %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	opt.Bins = bench.Bins{Sessiond: *sessiond, Sessionctl: *sessionctl}
	if opt.Bins.Sessiond == "" || opt.Bins.Sessionctl == "" {
		b, err := build(filepath.Join(work, "bin"))
		if err != nil {
			fmt.Fprintf(stderr, "sessiond-bench: %v\n", err)
			return 1
		}
		if opt.Bins.Sessiond == "" {
			opt.Bins.Sessiond = b.Sessiond
		}
		if opt.Bins.Sessionctl == "" {
			opt.Bins.Sessionctl = b.Sessionctl
		}
	}

	start := time.Now()
	load0 := bench.LoadAverage()
	res := bench.Run(ctx, opt)
	m := machine(opt.Bins.Sessiond)
	m.Load = load0 + " at start, " + bench.LoadAverage() + " at end"
	cmdline := "sessiond-bench " + strings.Join(args, " ")
	printTable(stdout, *format, m, strings.TrimSpace(cmdline), time.Since(start), res)
	for _, r := range res {
		if r.Verdict == "ERROR" {
			return 1
		}
	}
	if ctx.Err() != nil {
		return 1
	}
	return 0
}

// build builds sessiond and sessionctl from the module the command runs in.
func build(dir string) (bench.Bins, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return bench.Bins{}, fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return bench.Bins{}, errors.New("run inside the sessiond module, or give -sessiond and -sessionctl")
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/sessiond", "./cmd/sessionctl")
	cmd.Dir = filepath.Dir(gomod)
	if b, err := cmd.CombinedOutput(); err != nil {
		return bench.Bins{}, fmt.Errorf("go build: %v\n%s", err, b)
	}
	return bench.Bins{Sessiond: filepath.Join(dir, "sessiond"), Sessionctl: filepath.Join(dir, "sessionctl")}, nil
}

type machineInfo struct {
	CPU, Cores, Memory, Kernel, Go, Sessiond, Load string
}

func machine(sessiond string) machineInfo {
	m := machineInfo{Cores: fmt.Sprint(runtime.NumCPU()), Go: runtime.Version(), CPU: "?", Memory: "?", Kernel: "?"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && k == "MemTotal" {
				var kb uint64
				fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
				m.Memory = bench.Bytes(kb << 10)
			}
		}
	} else if out, err := exec.Command("sysctl", "-n", "hw.memsize").Output(); err == nil {
		var n uint64
		fmt.Sscanf(strings.TrimSpace(string(out)), "%d", &n)
		m.Memory = bench.Bytes(n)
	}
	if out, err := exec.Command("uname", "-sr").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command(sessiond, "--version").Output(); err == nil {
		m.Sessiond = strings.TrimSpace(string(out))
	}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.Sessiond += " (checkout " + strings.TrimSpace(string(out)) + ")"
	}
	return m
}

func printTable(w io.Writer, format string, m machineInfo, cmdline string, took time.Duration, res []bench.Result) {
	if format == "markdown" {
		fmt.Fprintf(w, "Machine: %s cores (%s), %s memory, %s, %s; %s\n\n", m.Cores, m.CPU, m.Memory, m.Kernel, m.Go, m.Sessiond)
		fmt.Fprintf(w, "Load average (1, 5, 15 min): %s\n\n", m.Load)
		fmt.Fprintf(w, "Command: `%s` (%s)\n\n", cmdline, took.Round(time.Second))
		fmt.Fprintln(w, "| scenario | figure | measured | target | verdict | how |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, r := range res {
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Scenario, md(r.Metric), md(r.Value), md(r.Target), r.Verdict, md(r.How))
		}
		return
	}
	fmt.Fprintf(w, "machine:  %s cores (%s), %s memory, %s, %s\n", m.Cores, m.CPU, m.Memory, m.Kernel, m.Go)
	fmt.Fprintf(w, "sessiond: %s\n", m.Sessiond)
	fmt.Fprintf(w, "load avg: %s\n", m.Load)
	fmt.Fprintf(w, "command:  %s (%s)\n\n", cmdline, took.Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tFIGURE\tMEASURED\tTARGET\tVERDICT")
	for _, r := range res {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Scenario, r.Metric, r.Value, r.Target, r.Verdict)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nhow each figure was measured:")
	seen := map[string]bool{}
	for _, r := range res {
		if r.How == "" || seen[r.Scenario+r.How] {
			continue
		}
		seen[r.Scenario+r.How] = true
		fmt.Fprintf(w, "  %s / %s: %s\n", r.Scenario, r.Metric, r.How)
	}
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func md(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
