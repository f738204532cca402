package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// death: real owner processes with Claude registry entries are killed one
// by one; the latency is from just before kill(2) to the arrival of the
// session's status change on an event stream opened beforehand.
func (r *runner) death(ctx context.Context) error {
	var split deathSplit
	ev, err := r.deathRun(ctx, true, &split)
	if err != nil {
		return fmt.Errorf("with exit events: %w", err)
	}
	how := fmt.Sprintf("%d kill -9 of sleep owners with registry entries, one at a time after a random 0-50 ms pause; kill(2) to the status event on a /v1/events stream; default --reconcile-interval", ev.N)
	r.add("death", "latency with exit events (pidfd), p50", dur(ev.P50), "", nil, how)
	r.add("death", "latency with exit events (pidfd), p99", fmt.Sprintf("%s (max %s)", dur(ev.P99), dur(ev.Max)), "≤ 50 ms", ptr(ev.P99 <= 50*time.Millisecond), how)
	if split.passes > 0 && ev.N > 0 {
		pass := split.passTime / time.Duration(split.passes)
		commit := time.Duration(0)
		if split.commits > 0 {
			commit = split.commitTime / time.Duration(split.commits)
		}
		mean := ev.Mean
		r.add("death", "where a death's time goes (means)", fmt.Sprintf("%s in all: the exit pass %s (of which the store commit with fsync %s), noticing the exit and delivering the event %s",
			dur(mean), dur(pass), dur(commit), dur(max(0, mean-pass))), "", nil,
			fmt.Sprintf("deltas over the kills of sessiond_reconcile_duration_seconds{trigger=\"exit\"} (%d passes) and sessiond_store_commit_seconds_total (%d commits); the rest is the kill-to-event latency minus the pass", split.passes, split.commits))
	}
	poll, err := r.deathRun(ctx, false, nil)
	if err != nil {
		return fmt.Errorf("polling: %w", err)
	}
	how = fmt.Sprintf("as above with --no-exit-events --reconcile-interval %s, each kill after a random pause of up to one interval", r.opt.PollInterval)
	r.add("death", "latency polling only, p50", dur(poll.P50), "", nil, how)
	r.add("death", "latency polling only, p99", fmt.Sprintf("%s (max %s)", dur(poll.P99), dur(poll.Max)), "", nil, how)
	return nil
}

// deathSplit is where the kills' time went, from the daemon's metrics.
type deathSplit struct {
	passes, commits      int
	passTime, commitTime time.Duration
}

func (r *runner) deathRun(ctx context.Context, events bool, split *deathSplit) (Percentiles, error) {
	var p Percentiles
	dir, owners, done, err := r.ownersWorld("death")
	if err != nil {
		return p, err
	}
	defer done()
	var list []*Owner
	for i := range r.opt.Kills {
		o, err := owners.Start(fmt.Sprintf("/home/u/src/live-%02d", i%10))
		if err != nil {
			return p, err
		}
		list = append(list, o)
	}
	var args []string
	if !events {
		args = []string{"--no-exit-events", "--reconcile-interval", r.opt.PollInterval.String()}
	}
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{owners.Root.Dir}, Args: args})
	if err != nil {
		return p, err
	}
	defer d.Stop()
	if err := d.WaitReady(ctx, 30*time.Second); err != nil {
		return p, err
	}
	ss, err := d.WaitStatus(ctx, string(session.StatusRunning), len(list), 30*time.Second)
	if err != nil {
		return p, err
	}
	idOf := map[string]string{}
	for _, s := range ss {
		idOf[s.UpstreamID] = s.ID
	}
	h, err := d.Client().Health(ctx)
	if err != nil {
		return p, err
	}
	type arrival struct {
		id string
		at time.Time
	}
	arrivals := make(chan arrival, 4*len(list))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.Client().Events(sctx, api.EventsOptions{Since: h.LastEventSeq, Follow: true}, func(ev api.Event) error {
		if ev.Type == session.EventStatus && (ev.To == session.StatusStopped || ev.To == session.StatusInterrupted) {
			select {
			case arrivals <- arrival{ev.SessionID, time.Now()}:
			case <-sctx.Done():
				return sctx.Err()
			}
		}
		return nil
	})
	if err := waitSubscribers(ctx, d.Socket, 1); err != nil {
		return p, err
	}
	before, err := metrics(ctx, d.Socket)
	if err != nil {
		return p, err
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	pause := 50 * time.Millisecond
	timeout := 10 * time.Second
	if !events {
		pause = r.opt.PollInterval
		timeout = 3*r.opt.PollInterval + 10*time.Second
	}
	var lat []time.Duration
	for _, o := range list {
		id := idOf[o.SessionID]
		if id == "" {
			return p, fmt.Errorf("session %s of pid %d not listed", o.SessionID, o.pid())
		}
		time.Sleep(time.Duration(rng.Int64N(int64(pause))))
		t0 := time.Now()
		if err := o.kill(); err != nil {
			return p, err
		}
		deadline := time.After(timeout)
	wait:
		for {
			select {
			case a := <-arrivals:
				if a.id == id {
					lat = append(lat, a.at.Sub(t0))
					break wait
				}
			case <-deadline:
				return p, fmt.Errorf("no status change of session %s within %s of killing pid %d\n%s", id, timeout, o.pid(), d.Stderr())
			case <-ctx.Done():
				return p, ctx.Err()
			}
		}
	}
	if split != nil {
		after, err := metrics(ctx, d.Socket)
		if err != nil {
			return p, err
		}
		delta := func(name string) float64 { return after[name] - before[name] }
		split.passes = int(delta(`sessiond_reconcile_duration_seconds_count{trigger="exit"}`))
		split.passTime = time.Duration(delta(`sessiond_reconcile_duration_seconds_sum{trigger="exit"}`) * float64(time.Second))
		split.commits = int(delta("sessiond_store_commits_total"))
		split.commitTime = time.Duration(delta("sessiond_store_commit_seconds_total") * float64(time.Second))
	}
	return percentile(lat), nil
}

func waitSubscribers(ctx context.Context, socket string, n int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := metrics(ctx, socket)
		if err == nil && int(m["sessiond_event_subscribers"]) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d event subscribers not connected after 10s (%v)", n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ctlTime runs `sessionctl ls --all --json` n times after one warm-up run
// and returns the latencies and the session count of the last run.
func (r *runner) ctlTime(ctx context.Context, d *daemon, n int) (Percentiles, int, error) {
	var ds []time.Duration
	count := 0
	for i := 0; i <= n; i++ {
		cmd := exec.CommandContext(ctx, r.opt.Bins.Sessionctl, "ls", "--all", "--json")
		cmd.Env = testenv.Isolated(d.Home, d.Socket, d.StateDir)
		t0 := time.Now()
		out, err := cmd.Output()
		el := time.Since(t0)
		if err != nil {
			return Percentiles{}, 0, fmt.Errorf("sessionctl ls --all --json: %w", err)
		}
		l, err := decodeSessions(out)
		if err != nil {
			return Percentiles{}, 0, fmt.Errorf("decode sessionctl ls --json: %w", err)
		}
		count = len(l)
		if i > 0 {
			ds = append(ds, el)
		}
	}
	return percentile(ds), count, nil
}

// homeData writes, once per run, the standard home: dense
// transcripts (every byte a real 2.1.328 line), 1 in 20 ending mid tool
// call. The home and restart scenarios share it.
func (r *runner) homeData() (*claudetest.Root, claudetest.History, error) {
	if r.homeRoot != nil {
		return r.homeRoot, r.homeHist, nil
	}
	dir, err := r.dir("home")
	if err != nil {
		return nil, claudetest.History{}, err
	}
	root := &claudetest.Root{Dir: filepath.Join(dir, "claude")}
	sizes := claudetest.HomeSizes(r.opt.HomeFiles, r.opt.HomeBig, r.opt.HomeBytes, 9)
	t0 := time.Now()
	hist, err := root.WriteHistory(claudetest.HistorySpec{
		Files: r.opt.HomeFiles, Projects: r.opt.HomeProjects, Seed: 9, Dense: true, MidTool: 20,
		Size: func(i int, _ *rand.Rand) int64 { return sizes[i] },
	})
	if err != nil {
		r.cleanup(dir)
		return nil, hist, err
	}
	took := time.Since(t0)
	r.opt.Log("home: wrote %d dense transcripts, %s, in %s", len(hist.Paths), Bytes(hist.Bytes), took.Round(time.Millisecond))
	r.homeRoot, r.homeHist, r.homeWrite = root, hist, took
	r.later(func() { r.cleanup(dir) })
	return root, hist, nil
}

// homeDataRow describes the standard home.
func (r *runner) homeDataRow() (string, string) {
	h := r.homeHist
	return fmt.Sprintf("%d transcripts, %s (%.2f GB), every byte real lines, in %d project folders, 10 KiB-5 MiB log-uniform plus %d of 100 MiB; %d end mid tool call, the rest with a closing reply; no registry entries",
			len(h.Paths), Bytes(h.Bytes), float64(h.Bytes)/1e9, r.opt.HomeProjects, r.opt.HomeBig, len(h.MidTool)),
		fmt.Sprintf("claudetest.HomeSizes and WriteHistory with Dense (no sparse file): turns of 2.1.328 line shapes from a pool of %d rendered once (prompts, thinking, Bash/Read/Edit/Grep/TodoWrite tool_use lines with matching tool_result lines, outputs up to 48 KiB, closing replies), fresh ids and timestamps per file; written in %s, then synced",
			claudetest.DensePoolTurns, dur(r.homeWrite))
}

// home: the standard home for comparisons.
func (r *runner) home(ctx context.Context) error {
	root, hist, err := r.homeData()
	if err != nil {
		return err
	}
	dir, err := r.dir("homed")
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	n := len(hist.Paths)
	data, dataHow := r.homeDataRow()
	r.add("home", "data", data, "", nil, dataHow)
	r.homeRowDone = true
	cache := r.dropCaches()
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{root.Dir}})
	if err != nil {
		return err
	}
	defer d.Stop()
	cold, err := d.WaitComplete(ctx, n, 5*time.Minute)
	if err != nil {
		return err
	}
	st, err := procStats(d)
	if err != nil {
		return err
	}
	r.add("home", "first complete ls, empty store (cold start)", dur(cold), "≤ 300 ms", ptr(cold <= 300*time.Millisecond),
		"sessiond exec to the first GET /v1/sessions?all=true listing every session; "+cache)
	r.add("home", "CPU time to the first complete ls", fmt.Sprintf("%.2f s (threads waited %s for a CPU)", st.CPUSeconds, dur(st.RunQueueWait)), "", nil, "utime+stime of sessiond from /proc/<pid>/stat: the work, whatever else the machine runs")
	per := float64(st.ReadChars) / float64(n)
	r.add("home", "bytes read per transcript", fmt.Sprintf("%s (rchar %s in all)", Bytes(per), Bytes(st.ReadChars)), "≤ 32 KiB", ptr(per <= 32<<10),
		"/proc/<pid>/io rchar after the first complete ls, divided by the transcripts; an upper bound (it also counts the store and /proc scans)")
	if ss, err := d.Sessions(ctx); err == nil {
		r.add("home", "sessions shown interrupted", fmt.Sprintf("%d (%d transcripts end mid tool call)", countStatus(ss, session.StatusInterrupted), len(hist.MidTool)), "", nil,
			"GET /v1/sessions?all=true after the first complete ls: a check that the data is read as meant (no owner lives, so a tool_use without result makes the session interrupted)")
	}
	lp, got, err := r.ctlTime(ctx, d, 10)
	if err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("sessionctl ls --all --json listed %d sessions, want %d", got, n)
	}
	r.add("home", "warm `sessionctl ls --all --json`", fmt.Sprintf("p50 %s, max %s", dur(lp.P50), dur(lp.Max)), "≤ 40 ms", ptr(lp.P50 <= 40*time.Millisecond),
		fmt.Sprintf("wall time of the sessionctl process, %d runs after one warm-up, %d sessions listed; verdict on p50", lp.N, got))
	st, err = procStats(d)
	if err != nil {
		return err
	}
	r.add("home", "peak RSS", Bytes(st.PeakRSS), "", nil, "/proc/<pid>/status VmHWM after the runs above")
	return r.addFloor("home", cold, []string{root.Dir})
}

func countStatus(ss []api.Session, st session.Status) int {
	n := 0
	for _, s := range ss {
		if s.Status == st {
			n++
		}
	}
	return n
}

// tenK starts, once, the daemon over the 10,000-transcript history (Claude
// only) that the cold, steady, memory and api scenarios share.
func (r *runner) tenK(ctx context.Context) (*daemon, error) {
	if r.tenk != nil || r.tenkErr != nil {
		return r.tenk, r.tenkErr
	}
	r.tenk, r.tenkErr = r.startTenK(ctx)
	return r.tenk, r.tenkErr
}

func (r *runner) tenKData() (string, int, error) {
	if r.tenkRoot != "" {
		return r.tenkRoot, r.tenkN, nil
	}
	dir, err := r.dir("tenk")
	if err != nil {
		return "", 0, err
	}
	root := &claudetest.Root{Dir: filepath.Join(dir, "claude")}
	t0 := time.Now()
	hist, err := root.WriteHistory(claudetest.HistorySpec{Files: r.opt.ColdFiles, Projects: r.opt.ColdProjects, Seed: 1, Size: claudetest.SkewedSize})
	if err != nil {
		return "", 0, err
	}
	r.opt.Log("cold: wrote %d transcripts, %s apparent (%d sparse), in %s", len(hist.Paths), Bytes(hist.Bytes), hist.Sparse, time.Since(t0).Round(time.Millisecond))
	r.tenkRoot, r.tenkN = root.Dir, len(hist.Paths)
	r.add(r.current, "Claude data", fmt.Sprintf("%d transcripts, %s apparent, in %d project folders (60 %% 2-40 KiB, 30 %% 200 KiB-5 MiB, 9.9 %% 10-100 MiB, 10 of 300-700 MiB)", len(hist.Paths), Bytes(hist.Bytes), r.opt.ColdProjects), "", nil,
		"claudetest.SkewedSize, the size mix of adapters/claude BenchmarkColdDiscovery; files over 64 KiB are sparse (real lines in the first and last 64 KiB, a hole between: 62 GiB apparent does not fit dense on disk), so this data costs a reader less than real data; the dense data is the standard home's (home, restart)")
	return r.tenkRoot, r.tenkN, nil
}

func (r *runner) startTenK(ctx context.Context) (*daemon, error) {
	root, n, err := r.tenKData()
	if err != nil {
		return nil, err
	}
	dir, err := r.dir("tenkd")
	if err != nil {
		return nil, err
	}
	r.dropCaches()
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{root}})
	if err != nil {
		return nil, err
	}
	r.tenkCold, err = d.WaitComplete(ctx, n, 5*time.Minute)
	if err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// openCodeData writes, once per run, the OpenCode database of the cold
// and restart scenarios and returns its directory and session ids.
func (r *runner) openCodeData() (string, []string, error) {
	if r.ocDir != "" {
		return r.ocDir, r.ocIDs, nil
	}
	dir, err := r.dir("oc")
	if err != nil {
		return "", nil, err
	}
	ocDir := filepath.Join(dir, "opencode")
	t0 := time.Now()
	ids, err := opencodetest.WriteHistory(filepath.Join(ocDir, "opencode.db"), opencodetest.HistorySpec{
		Sessions: r.opt.OpenCodeSessions, Turns: r.opt.OpenCodeTurns, InFlight: min(20, r.opt.OpenCodeSessions/10),
	})
	if err != nil {
		r.cleanup(dir)
		return "", nil, err
	}
	fi, err := os.Stat(filepath.Join(ocDir, "opencode.db"))
	if err != nil {
		r.cleanup(dir)
		return "", nil, err
	}
	r.opt.Log("wrote the OpenCode database (%d sessions, %s) in %s", len(ids), Bytes(fi.Size()), time.Since(t0).Round(time.Millisecond))
	r.add(r.current, "OpenCode data", fmt.Sprintf("one opencode.db of %s: %d sessions, %d messages, %d parts", Bytes(fi.Size()), len(ids),
		2*len(ids)*r.opt.OpenCodeTurns, 6*len(ids)*r.opt.OpenCodeTurns), "", nil, "opencodetest.WriteHistory, the shape of adapters/opencode BenchmarkColdPass")
	r.ocDir, r.ocIDs = ocDir, ids
	r.later(func() { r.cleanup(dir) })
	return ocDir, ids, nil
}

// codexData writes, once per run, the Codex home of the cold and restart
// scenarios.
func (r *runner) codexData() (*codextest.Home, error) {
	if r.codex != nil {
		return r.codex, nil
	}
	dir, err := r.dir("cx")
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	h, err := codextest.WriteHome(filepath.Join(dir, "codex"), codextest.HomeSpec{
		Rollouts: r.opt.CodexRollouts, Days: 120, MaxTurns: r.opt.CodexTurns, InFlightEvery: 20, Seed: 16})
	if err != nil {
		r.cleanup(dir)
		return nil, err
	}
	r.opt.Log("wrote the Codex home (%d rollouts, %s) in %s", len(h.IDs), Bytes(h.Bytes), time.Since(t0).Round(time.Millisecond))
	r.add(r.current, "Codex data", fmt.Sprintf("%d rollouts, %s, over 120 day folders; 1 in 20 ends mid tool call", len(h.IDs), Bytes(h.Bytes)), "",
		nil, fmt.Sprintf("codextest.WriteHome: the real lines of a codex exec 0.169.0 rollout, 1–%d turns (log-uniform) of ~13 KB each after a ~21 KB session_meta", r.opt.CodexTurns))
	r.codex = h
	r.later(func() { r.cleanup(dir) })
	return h, nil
}

// cold: time to the first complete ls over the Claude history plus an
// OpenCode database, and the bytes read.
func (r *runner) cold(ctx context.Context) error {
	root, n, err := r.tenKData()
	if err != nil {
		return err
	}
	dir, err := r.dir("cold")
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	ocDir, ids, err := r.openCodeData()
	if err != nil {
		return err
	}

	cache := r.dropCaches()
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{root}, OpenCodeDir: ocDir})
	if err != nil {
		return err
	}
	both, err := d.WaitComplete(ctx, n+len(ids), 5*time.Minute)
	if err != nil {
		d.Stop()
		return err
	}
	st, err := procStats(d)
	d.Stop()
	if err != nil {
		return err
	}
	r.add("cold", fmt.Sprintf("first complete ls, %d Claude + %d OpenCode sessions", n, len(ids)), dur(both), "≤ 1.5 s", ptr(both <= 1500*time.Millisecond),
		"sessiond exec to the first GET /v1/sessions?all=true listing every session (the daemon serves only after its startup reconciliation); "+cache)
	r.add("cold", "CPU time to that ls, Claude + OpenCode", fmt.Sprintf("%.2f s (threads waited %s for a CPU)", st.CPUSeconds, dur(st.RunQueueWait)), "", nil,
		"utime+stime from /proc/<pid>/stat; the wait is the sum over threads of /proc/<pid>/task/*/schedstat run-queue time, what a busy machine adds")
	r.add("cold", "bytes read, Claude + OpenCode", fmt.Sprintf("rchar %s, from disk (read_bytes) %s", Bytes(st.ReadChars), Bytes(st.ReadBytes)), "", nil,
		"/proc/<pid>/io after the first complete ls; rchar includes SQLite's page reads and sessiond's /proc scans")
	r.add("cold", "peak RSS, Claude + OpenCode", Bytes(st.PeakRSS), "≤ 100 MiB", ptr(st.PeakRSS <= 100<<20), "/proc/<pid>/status VmHWM after the first complete ls")

	// The same history, Claude only: what is read per transcript. This
	// daemon stays up for the steady, memory and api scenarios.
	d, err = r.tenK(ctx)
	if err != nil {
		return err
	}
	st, err = procStats(d)
	if err != nil {
		return err
	}
	per := float64(st.ReadChars) / float64(n)
	r.add("cold", fmt.Sprintf("first complete ls, %d Claude sessions only", n), dur(r.tenkCold), "", nil, "as above, another fresh state dir, no OpenCode data")
	r.add("cold", "CPU time to that ls, Claude only", fmt.Sprintf("%.2f s (threads waited %s for a CPU)", st.CPUSeconds, dur(st.RunQueueWait)), "", nil, "as above")
	r.add("cold", "bytes read per transcript", fmt.Sprintf("%s (rchar %s in all)", Bytes(per), Bytes(st.ReadChars)), "≤ 128 KiB", ptr(per <= 128<<10),
		"/proc/<pid>/io rchar of the Claude-only daemon after its first complete ls, divided by the transcripts; an upper bound (it also counts /proc scans)")
	r.add("cold", "peak RSS, Claude only", Bytes(st.PeakRSS), "", nil, "VmHWM")
	if err := r.addFloor("cold", r.tenkCold, []string{root}); err != nil {
		return err
	}
	if err := r.addFloor("cold", both, []string{root}, filepath.Join(ocDir, "opencode.db")); err != nil {
		return err
	}
	return r.coldCodex(ctx)
}

// coldCodex: the first complete ls over the Codex home alone.
func (r *runner) coldCodex(ctx context.Context) error {
	h, err := r.codexData()
	if err != nil {
		return err
	}
	dir, err := r.dir("coldcx")
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	cache := r.dropCaches()
	d, err := r.startDaemon(dir, daemonConfig{CodexDir: h.Root})
	if err != nil {
		return err
	}
	defer d.Stop()
	took, err := d.WaitComplete(ctx, len(h.IDs), 5*time.Minute)
	if err != nil {
		return err
	}
	st, err := procStats(d)
	if err != nil {
		return err
	}
	counts, err := statusCounts(ctx, d)
	if err != nil {
		return err
	}
	n := len(h.IDs)
	r.add("cold", fmt.Sprintf("first complete ls, %d Codex sessions", n), dur(took), "", nil, "as above, a fresh state dir, only the Codex home; "+cache)
	r.add("cold", "statuses, Codex", fmt.Sprintf("%d stopped, %d interrupted (want %d, %d)", counts["stopped"], counts["interrupted"], n-len(h.InFlight), len(h.InFlight)), "",
		ptr(counts["stopped"] == n-len(h.InFlight) && counts["interrupted"] == len(h.InFlight)), "GET /v1/sessions?all=true by status")
	r.add("cold", "CPU time to that ls, Codex", fmt.Sprintf("%.2f s (threads waited %s for a CPU)", st.CPUSeconds, dur(st.RunQueueWait)), "", nil, "as above")
	r.add("cold", "bytes read per rollout", fmt.Sprintf("%s (rchar %s in all; the rollouts hold %s)", Bytes(float64(st.ReadChars)/float64(n)), Bytes(st.ReadChars), Bytes(h.Bytes)), "", nil,
		"/proc/<pid>/io rchar divided by the rollouts: the head up to the first prompt (~31 KB), the tail from 16 KiB back to the last turn boundary")
	r.add("cold", "peak RSS, Codex", Bytes(st.PeakRSS), "", nil, "VmHWM")
	return nil
}

// steady: the 10,000-session daemon left idle.
func (r *runner) steady(ctx context.Context) error {
	d, err := r.tenK(ctx)
	if err != nil {
		return err
	}
	// Let the passes after start settle (files written within the last
	// 2 s are looked at again once).
	select {
	case <-time.After(r.opt.Settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	dirs, err := projectDirs(r.tenkRoot)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(filepath.Join(r.tenkRoot, "sessions")); err == nil && fi.IsDir() {
		dirs = append(dirs, filepath.Join(r.tenkRoot, "sessions"))
	}
	w, err := watchAccess(dirs)
	if err != nil {
		return err
	}
	iw, err := idleWindow(ctx, d, r.opt.SteadyFor)
	reads, opens := w.Stop()
	if err != nil {
		return err
	}
	m0, m1, s0, s1, el, cpu := iw.m0, iw.m1, iw.s0, iw.s1, iw.el, iw.cpu
	nReads, nOpens := 0, 0
	for _, v := range reads {
		nReads += v
	}
	for _, v := range opens {
		nOpens += v
	}
	passes := sumSuffix(m1, "sessiond_reconcile_duration_seconds_count") - sumSuffix(m0, "sessiond_reconcile_duration_seconds_count")
	passTime := sumSuffix(m1, "sessiond_reconcile_duration_seconds_sum") - sumSuffix(m0, "sessiond_reconcile_duration_seconds_sum")
	how := fmt.Sprintf("%d sessions, default --reconcile-interval (5 s) and 60 s full rescan; window of %s after %s settling", r.tenkN, el.Round(time.Second), r.opt.Settle)
	r.add("steady", "CPU while idle", fmt.Sprintf("%.2f %% of one core", cpu), "≤ 0.3 %", ptr(cpu <= 0.3), how+"; utime+stime from /proc/<pid>/stat")
	avg := time.Duration(0)
	if passes > 0 {
		avg = time.Duration(passTime / passes * float64(time.Second))
	}
	r.add("steady", "reconcile passes in the window", fmt.Sprintf("%.0f, %s each on average", passes, dur(avg)), "", nil, "sessiond_reconcile_duration_seconds from /metrics")
	r.add("steady", "transcript bytes re-read", fmt.Sprintf("%d read(2) calls on transcripts (%d opens)", nReads, nOpens), "0", ptr(nReads == 0),
		"inotify IN_ACCESS/IN_OPEN on every project folder and sessions/ during the window: no read call, no byte read")
	r.add("steady", "all bytes read by sessiond", fmt.Sprintf("rchar %s (%s/s), read_bytes %s", Bytes(s1.ReadChars-s0.ReadChars),
		Bytes(float64(s1.ReadChars-s0.ReadChars)/el.Seconds()), Bytes(s1.ReadBytes-s0.ReadBytes)), "", nil,
		"/proc/<pid>/io over the window: the process-table scans of /proc each pass, not agent data")
	return r.steadyOpenCode(ctx)
}

// steadyOpenCode: a daemon over OpenCode's database (WAL mode, as OpenCode
// keeps it) left idle. Each pass opens the database, and SQLite then
// rewrites its -shm index and sets the mode of its -wal and -shm files:
// taken as file change hints, each pass caused the next.
func (r *runner) steadyOpenCode(ctx context.Context) error {
	ocDir, ids, err := r.openCodeData()
	if err != nil {
		return err
	}
	dir, err := r.dir("steadyoc")
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	d, err := r.startDaemon(dir, daemonConfig{OpenCodeDir: ocDir})
	if err != nil {
		return err
	}
	defer d.Stop()
	if _, err := d.WaitComplete(ctx, len(ids), 5*time.Minute); err != nil {
		return err
	}
	// The Claude daemon's window, and at least two ticks of the default
	// interval: the first tick's read is what began the loop. (The first
	// minute after a first start still gives memory back to the system:
	// a shorter window measured that.)
	window := max(r.opt.SteadyFor, 12*time.Second)
	select {
	case <-time.After(r.opt.Settle):
	case <-ctx.Done():
		return ctx.Err()
	}
	iw, err := idleWindow(ctx, d, window)
	if err != nil {
		return err
	}
	m0, m1, el, cpu := iw.m0, iw.m1, iw.el, iw.cpu
	const hintPasses = `sessiond_reconcile_duration_seconds_count{trigger="hint"}`
	hints := m1[hintPasses] - m0[hintPasses]
	passes := sumSuffix(m1, "sessiond_reconcile_duration_seconds_count") - sumSuffix(m0, "sessiond_reconcile_duration_seconds_count")
	how := fmt.Sprintf("%d OpenCode sessions in one WAL database, nothing else, default --reconcile-interval (5 s); window of %s after %s settling", len(ids), el.Round(time.Second), r.opt.Settle)
	r.add("steady", "CPU while idle, OpenCode", fmt.Sprintf("%.2f %% of one core", cpu), "≤ 0.3 %", ptr(cpu <= 0.3), how+"; utime+stime from /proc/<pid>/stat")
	r.add("steady", "passes on file change hints, OpenCode", fmt.Sprintf("%.0f of %.0f passes", hints, passes), "0", ptr(hints == 0),
		"sessiond_reconcile_duration_seconds_count by trigger from /metrics over the window: nothing changed, so only ticks may run a pass")
	return nil
}

// idle is what idleWindow measured of a daemon left alone.
type idle struct {
	m0, m1 map[string]float64 // its /metrics at the start and the end
	s0, s1 processStats
	el     time.Duration
	cpu    float64 // % of one core
}

// idleWindow measures d over window: its CPU, and its metrics and process
// figures at both ends.
func idleWindow(ctx context.Context, d *daemon, window time.Duration) (idle, error) {
	var iw idle
	var err error
	if iw.m0, err = metrics(ctx, d.Socket); err != nil {
		return iw, err
	}
	if iw.s0, err = procStats(d); err != nil {
		return iw, err
	}
	t0 := time.Now()
	select {
	case <-time.After(window):
	case <-ctx.Done():
		return iw, ctx.Err()
	}
	iw.s1, err = procStats(d)
	iw.el = time.Since(t0)
	if err != nil {
		return iw, err
	}
	if iw.m1, err = metrics(ctx, d.Socket); err != nil {
		return iw, err
	}
	iw.cpu = (iw.s1.CPUSeconds - iw.s0.CPUSeconds) / iw.el.Seconds() * 100
	return iw, nil
}

func sumSuffix(m map[string]float64, name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || len(k) > len(name) && k[:len(name)+1] == name+"{" {
			s += v
		}
	}
	return s
}

// memory: the resident set of the 10,000-session daemon.
func (r *runner) memory(ctx context.Context) error {
	d, err := r.tenK(ctx)
	if err != nil {
		return err
	}
	st, err := procStats(d)
	if err != nil {
		return err
	}
	r.add("memory", fmt.Sprintf("RSS with %d sessions", r.tenkN), Bytes(st.RSS), "< 100 MiB", ptr(st.RSS < 100<<20),
		"/proc/<pid>/status VmRSS of the idle daemon (after the steady window when it ran)")
	r.add("memory", "peak RSS since start", Bytes(st.PeakRSS), "", nil, "VmHWM (includes the cold discovery)")
	return nil
}

// api: the 10,000-session daemon's API under clients.
func (r *runner) api(ctx context.Context) error {
	d, err := r.tenK(ctx)
	if err != nil {
		return err
	}
	c := unixClient(d.Socket, true)
	defer c.CloseIdleConnections()
	var ds []time.Duration
	size := 0
	for i := 0; i <= r.opt.ListRequests; i++ {
		t0 := time.Now()
		b, err := get(ctx, c, "/v1/sessions?all=true")
		if err != nil {
			return err
		}
		if i > 0 {
			ds = append(ds, time.Since(t0))
		}
		size = len(b)
	}
	lp := percentile(ds)
	r.add("api", fmt.Sprintf("GET /v1/sessions?all=true, %d sessions", r.tenkN), fmt.Sprintf("p50 %s, max %s (%s of JSON)", dur(lp.P50), dur(lp.Max), Bytes(size)),
		"≤ 50 ms", ptr(lp.P50 <= 50*time.Millisecond),
		fmt.Sprintf("%d sequential requests on one kept-alive connection after a warm-up, request to last body byte; verdict on p50", lp.N))
	cp, n, err := r.ctlTime(ctx, d, 3)
	if err != nil {
		return err
	}
	r.add("api", fmt.Sprintf("`sessionctl ls --all --json`, %d sessions", n), fmt.Sprintf("p50 %s, max %s", dur(cp.P50), dur(cp.Max)), "", nil, "wall time of the sessionctl process (connect, list, decode, print)")

	ss, err := d.Sessions(ctx)
	if err != nil {
		return err
	}
	lat := make([][]time.Duration, r.opt.APIClients)
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for i := range r.opt.APIClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl := unixClient(d.Socket, true)
			defer cl.CloseIdleConnections()
			rng := rand.New(rand.NewPCG(uint64(i), 3))
			for range r.opt.APIRequests {
				id := ss[rng.IntN(len(ss))].ID
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://sessiond/v1/sessions/"+id, nil)
				resp, err := cl.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != 200 {
						err = fmt.Errorf("GET /v1/sessions/%s: %s", id, resp.Status)
					}
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	gp := percentile(all)
	how := fmt.Sprintf("%d clients, each its own connection, %d requests each for random ids, back to back", r.opt.APIClients, r.opt.APIRequests)
	r.add("api", fmt.Sprintf("GET /v1/sessions/{id}, %d concurrent clients", r.opt.APIClients), fmt.Sprintf("p50 %s, p99 %s, max %s; %.0f req/s", dur(gp.P50), dur(gp.P99), dur(gp.Max), float64(gp.N)/el.Seconds()), "", nil, how)
	e := errs.Load()
	detail := fmt.Sprintf("%d", e)
	if e > 0 {
		detail += fmt.Sprintf(" (first: %v)", firstErr.Load())
	}
	r.add("api", "errors under the concurrent lookups", detail, "0", ptr(e == 0), how)
	st, err := procStats(d)
	if err != nil {
		return err
	}
	r.add("api", "RSS after the API runs", fmt.Sprintf("%s (peak %s)", Bytes(st.RSS), Bytes(st.PeakRSS)), "", nil, "VmRSS, VmHWM")
	return nil
}

// burst: subscribers follow the event stream while many owners die at once.
func (r *runner) burst(ctx context.Context) error {
	dir, owners, done, err := r.ownersWorld("burst")
	if err != nil {
		return err
	}
	defer done()
	var list []*Owner
	for i := range r.opt.Burst {
		o, err := owners.Start(fmt.Sprintf("/home/u/src/burst-%02d", i%20))
		if err != nil {
			return err
		}
		list = append(list, o)
	}
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{owners.Root.Dir}})
	if err != nil {
		return err
	}
	defer d.Stop()
	if err := d.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	ss, err := d.WaitStatus(ctx, string(session.StatusRunning), len(list), time.Minute)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	for _, s := range ss {
		ids[s.ID] = true
	}
	h, err := d.Client().Health(ctx)
	if err != nil {
		return err
	}
	type sub struct {
		n    atomic.Int64
		last atomic.Int64 // unix nanos of the last wanted event
		bad  atomic.Int64 // out of order or duplicated
		prev uint64
		err  error
	}
	subs := make([]*sub, r.opt.Subscribers)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range subs {
		s := &sub{}
		subs[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := api.NewClient(d.Socket).Events(sctx, api.EventsOptions{Since: h.LastEventSeq, Follow: true}, func(ev api.Event) error {
				if ev.Seq <= s.prev {
					s.bad.Add(1)
				}
				s.prev = ev.Seq
				if ev.Type == session.EventStatus && ids[ev.SessionID] && (ev.To == session.StatusStopped || ev.To == session.StatusInterrupted) {
					s.n.Add(1)
					s.last.Store(time.Now().UnixNano())
				}
				return nil
			})
			if sctx.Err() == nil {
				s.err = fmt.Errorf("stream ended: %v", err)
			}
		}()
	}
	if err := waitSubscribers(ctx, d.Socket, len(subs)); err != nil {
		return err
	}
	t0 := time.Now()
	for _, o := range list {
		o.kill()
	}
	killTook := time.Since(t0)
	want := int64(len(list))
	deadline := time.Now().Add(2 * time.Minute)
	for {
		done := true
		for _, s := range subs {
			if s.n.Load() < want {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	var got, bad int64
	var lasts []time.Duration
	var errs []string
	for _, s := range subs {
		got += s.n.Load()
		bad += s.bad.Load()
		if s.n.Load() == want {
			lasts = append(lasts, time.Duration(s.last.Load()-t0.UnixNano()))
		}
		if s.err != nil {
			errs = append(errs, s.err.Error())
		}
	}
	sort.Strings(errs)
	lp := percentile(lasts)
	how := fmt.Sprintf("%d owners killed in a loop (%s), %d subscribers connected beforehand; time from the first kill to a subscriber's %d-th status event", len(list), dur(killTook), len(subs), want)
	r.add("burst", fmt.Sprintf("%d subscribers, burst of %d status events: all delivered after", len(subs), want), fmt.Sprintf("p50 %s, max %s over subscribers", dur(lp.P50), dur(lp.Max)), "", nil, how)
	complete := got == want*int64(len(subs)) && bad == 0 && len(errs) == 0
	detail := fmt.Sprintf("%d of %d delivered, %d out of order, %d stream errors", got, want*int64(len(subs)), bad, len(errs))
	if len(errs) > 0 {
		detail += ": " + errs[0]
	}
	r.add("burst", "events delivered", detail, "all, in order", ptr(complete), "each subscriber checks sequence numbers strictly increase")
	return nil
}

// load: 200 clients and event subscribers for 20 s; errors and growth.
func (r *runner) load(ctx context.Context) error {
	dir, owners, done, err := r.ownersWorld("load")
	if err != nil {
		return err
	}
	defer done()
	if _, err := owners.Root.WriteHistory(claudetest.HistorySpec{Files: r.opt.LoadHistory, Projects: 10, Seed: 5}); err != nil {
		return err
	}
	for i := range 10 {
		if _, err := owners.Start(fmt.Sprintf("/home/u/src/live-%d", i)); err != nil {
			return err
		}
	}
	// A second owner set for the churn, so KillAll after the load leaves
	// the ten long-lived owners running.
	churn := &Owners{Root: owners.Root, host: owners.host}
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{owners.Root.Dir}, Args: []string{"--reconcile-interval", "1s"}})
	if err != nil {
		return err
	}
	defer d.Stop()
	if _, err := d.WaitComplete(ctx, r.opt.LoadHistory+10, time.Minute); err != nil {
		return err
	}
	rep, growth, err := LoadWithFootprint(ctx, LoadConfig{
		Socket: d.Socket, Clients: r.opt.LoadClients, Subscribers: r.opt.LoadSubscribers, Duration: r.opt.LoadFor,
		Churn: churn, Cwd: "/home/u/src/churn", Log: r.opt.Log,
	}, d.PID(), 5)
	if err != nil {
		return err
	}
	how := fmt.Sprintf("--reconcile-interval 1s; %d clients back to back for %s (half keep their connection, half dial per request; list, get by id and upstream id, health, event replay, metrics), %d subscribers, an owner started every 100 ms and killed ~300 ms later (%d)",
		r.opt.LoadClients, r.opt.LoadFor, r.opt.LoadSubscribers, rep.OwnersChurned)
	errDetail := fmt.Sprintf("%d of %d requests", rep.Errors, rep.Requests)
	if len(rep.ErrorSamples) > 0 {
		errDetail += " (first: " + rep.ErrorSamples[0] + ")"
	}
	r.add("load", "errors", errDetail, "0", ptr(rep.Errors == 0), how)
	r.add("load", "request latency", fmt.Sprintf("p50 %s, p99 %s, max %s; %.0f req/s", dur(rep.Latency.P50), dur(rep.Latency.P99), dur(rep.Latency.Max), rep.Throughput), "", nil, how)
	r.add("load", "events to subscribers", fmt.Sprintf("%d recorded, %d delivered, %d missed, %d duplicated or out of order", rep.EventsRecorded, rep.EventsDelivered, rep.EventsMissed, rep.EventsDuplicated),
		"none missed", ptr(rep.EventsMissed == 0 && rep.EventsDuplicated == 0 && rep.SubscriberErrors == 0), "each subscriber's sequence numbers against the log read back with /v1/events?follow=false")
	r.add("load", "goroutine growth", growth.GoroutinesString(), "≤ +5", ptr(growth.Goroutines() <= 5), "go_goroutines from /metrics (fresh connection) before the load and after it, once the churned owners' deaths are recorded")
	r.add("load", "file descriptor growth", growth.FDsString(), "≤ +5", ptr(growth.FDs() <= 5), "entries of /proc/<pid>/fd before and after, as above")
	return nil
}
