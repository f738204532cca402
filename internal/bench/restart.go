package bench

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// restart: sessiond stopped and started again on the same state dir (the
// store intact), cleanly (SIGTERM, as systemctl stop or an upgrade does) and
// after a crash (SIGKILL, which systemd restarts): the time from exec to the
// first complete ls, the CPU time and the bytes the new daemon reads before
// it, on the standard home and on the 10,000 + 2,000 sessions of the cold
// scenario.
func (r *runner) restart(ctx context.Context) error {
	root, hist, err := r.homeData()
	if err != nil {
		return err
	}
	if !r.homeRowDone {
		data, how := r.homeDataRow()
		r.add("restart", "data: the standard home", data, "", nil, how)
	}
	dir, err := r.dir("restart")
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	n := len(hist.Paths)
	if err := r.restartSeries(ctx, fmt.Sprintf("%d sessions", n), dir, daemonConfig{ClaudeDirs: []string{root.Dir}}, n, 100*time.Millisecond); err != nil {
		return fmt.Errorf("standard home: %w", err)
	}
	if err := r.restartCodex(ctx); err != nil {
		return err
	}
	if !r.opt.RestartTenK {
		r.add("restart", "10,000 Claude + 2,000 OpenCode sessions", "not run (-restart-12k=false)", "", nil, "")
		return nil
	}
	croot, cn, err := r.tenKData()
	if err != nil {
		return err
	}
	ocDir, ids, err := r.openCodeData()
	if err != nil {
		return err
	}
	dir2, err := r.dir("restart12k")
	if err != nil {
		return err
	}
	defer r.cleanup(dir2)
	label := fmt.Sprintf("%d sessions", cn+len(ids))
	r.add(r.current, label+": data", fmt.Sprintf("the cold scenario's: %d Claude transcripts (sparse over 64 KiB) + %d OpenCode sessions", cn, len(ids)), "", nil, "")
	if err := r.restartSeries(ctx, label, dir2, daemonConfig{ClaudeDirs: []string{croot}, OpenCodeDir: ocDir}, cn+len(ids), 250*time.Millisecond); err != nil {
		return fmt.Errorf("%d + %d sessions: %w", cn, len(ids), err)
	}
	return nil
}

// restartCodex: the restart series on the cold scenario's Codex home.
func (r *runner) restartCodex(ctx context.Context) error {
	h, err := r.codexData()
	if err != nil {
		return err
	}
	dir, err := r.dir("restartcx")
	if err != nil {
		return err
	}
	defer r.cleanup(dir)
	if err := r.restartSeries(ctx, fmt.Sprintf("%d Codex sessions", len(h.IDs)), dir, daemonConfig{CodexDir: h.Root}, len(h.IDs), 0); err != nil {
		return fmt.Errorf("codex home: %w", err)
	}
	return nil
}

type restartSample struct {
	took  time.Duration // exec to the first complete ls
	stop  time.Duration // signal to exit of the old daemon
	cpu   float64
	wait  time.Duration // run-queue wait
	rchar uint64
	rss   uint64
	diff  string // status counts differing from the first start's
}

// restartSeries starts a daemon on an empty store in dir, then restarts it
// r.opt.Restarts times after SIGTERM and as many after SIGKILL, and adds
// the rows (target 0: none).
func (r *runner) restartSeries(ctx context.Context, label, dir string, cfg daemonConfig, want int, target time.Duration) error {
	r.dropCaches()
	d, err := r.startDaemon(dir, cfg)
	if err != nil {
		return err
	}
	defer func() { d.Stop() }()
	first, err := d.WaitComplete(ctx, want, 5*time.Minute)
	if err != nil {
		return err
	}
	st, err := procStats(d)
	if err != nil {
		return err
	}
	base, err := statusCounts(ctx, d)
	if err != nil {
		return err
	}
	r.add(r.current, label+": first start, empty store", fmt.Sprintf("%s (%.2f s CPU, rchar %s)", dur(first), st.CPUSeconds, Bytes(st.ReadChars)), "", nil,
		"the reference: exec to the first complete ls on a fresh state dir, as in the home and cold scenarios")
	for _, crash := range []bool{false, true} {
		var ss []restartSample
		for range r.opt.Restarts {
			// Let the daemon run a little as it would between restarts
			// (state it writes after ready has time to be written).
			select {
			case <-time.After(r.opt.RestartSettle):
			case <-ctx.Done():
				return ctx.Err()
			}
			var s restartSample
			t0 := time.Now()
			if crash {
				d.Kill()
			} else {
				d.Stop()
			}
			s.stop = time.Since(t0)
			r.dropCaches()
			if d, err = r.startDaemon(dir, cfg); err != nil {
				return err
			}
			if s.took, err = d.WaitComplete(ctx, want, 5*time.Minute); err != nil {
				return err
			}
			st, err := procStats(d)
			if err != nil {
				return err
			}
			s.cpu, s.wait, s.rchar, s.rss = st.CPUSeconds, st.RunQueueWait, st.ReadChars, st.PeakRSS
			got, err := statusCounts(ctx, d)
			if err != nil {
				return err
			}
			s.diff = countsDiff(base, got)
			ss = append(ss, s)
		}
		r.restartRows(label, crash, ss, want, target)
	}
	return nil
}

func (r *runner) restartRows(label string, crash bool, ss []restartSample, want int, target time.Duration) {
	kind, how := "clean restart (SIGTERM)", "SIGTERM to the running daemon, wait for its exit"
	if crash {
		kind, how = "crash restart (SIGKILL)", "SIGKILL to the running daemon (a crash; systemd restarts it), wait for its exit"
	}
	how = fmt.Sprintf("%s, then start sessiond again on the same state dir (store intact, same data, %s); %d restarts, each after the daemon ran %s; %s",
		how, "page cache as the previous daemon left it unless -drop-caches", len(ss), r.opt.RestartSettle, "verdict on p50")
	var took, stop, wait []time.Duration
	var cpu, rchar, rss []float64
	var diffs []string
	for _, s := range ss {
		took = append(took, s.took)
		stop = append(stop, s.stop)
		wait = append(wait, s.wait)
		cpu = append(cpu, s.cpu)
		rchar = append(rchar, float64(s.rchar))
		rss = append(rss, float64(s.rss))
		if s.diff != "" {
			diffs = append(diffs, s.diff)
		}
	}
	tp := percentile(took)
	kind = label + ", " + kind
	name := kind + ": exec to first complete ls"
	if target > 0 {
		r.add(r.current, name, fmt.Sprintf("p50 %s, max %s", dur(tp.P50), dur(tp.Max)), "≤ "+dur(target), ptr(tp.P50 <= target), how)
	} else {
		r.add(r.current, name, fmt.Sprintf("p50 %s, max %s", dur(tp.P50), dur(tp.Max)), "", nil, how)
	}
	wp := percentile(wait)
	r.add(r.current, kind+": CPU time of the new daemon to that ls", fmt.Sprintf("p50 %.2f s, max %.2f s (threads waited p50 %s for a CPU)", median(cpu), slices.Max(cpu), dur(wp.P50)), "", nil,
		"utime+stime of the restarted sessiond from /proc/<pid>/stat after its first complete ls")
	r.add(r.current, kind+": bytes read by the new daemon to that ls", fmt.Sprintf("rchar p50 %s (%s per session), max %s", Bytes(median(rchar)), Bytes(median(rchar)/float64(want)), Bytes(slices.Max(rchar))), "", nil,
		"/proc/<pid>/io rchar of the restarted sessiond after its first complete ls: what it read again (the store, transcripts, databases, /proc)")
	r.add(r.current, kind+": peak RSS of the new daemon", fmt.Sprintf("p50 %s, max %s", Bytes(median(rss)), Bytes(slices.Max(rss))), "", nil, "VmHWM after the first complete ls")
	if !crash {
		sp := percentile(stop)
		r.add(r.current, kind+": SIGTERM to exit", fmt.Sprintf("p50 %s, max %s", dur(sp.P50), dur(sp.Max)), "", nil, "the old daemon's shutdown, signal to reaped")
	}
	verdict := "the same as after the first start"
	if len(diffs) > 0 {
		verdict = fmt.Sprintf("%d of %d restarts differ: %s", len(diffs), len(ss), diffs[0])
	}
	r.add(r.current, kind+": statuses after each restart", verdict, "same", ptr(len(diffs) == 0),
		"sessions by status from GET /v1/sessions?all=true after the first complete ls, against those after the first start (no owner lives, nothing changed)")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// statusCounts counts the daemon's sessions by status.
func statusCounts(ctx context.Context, d *daemon) (map[string]int, error) {
	ss, err := d.Sessions(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]int{}
	for _, s := range ss {
		m[string(s.Status)]++
	}
	return m, nil
}

// countsDiff names the statuses whose counts differ, "" if none.
func countsDiff(want, got map[string]int) string {
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	for _, k := range keys {
		if want[k] != got[k] {
			out = append(out, fmt.Sprintf("%s %d (was %d)", k, got[k], want[k]))
		}
	}
	return strings.Join(out, ", ")
}
