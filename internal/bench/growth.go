package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// growth: the same figures at 1k, 10k and 100k sessions of small dense
// transcripts: the steady pass, the list, idle CPU and RSS, and the pass
// after 10 transcripts change. The point to show: the cost grows with what
// changed, not with what exists.
func (r *runner) growth(ctx context.Context) error {
	var got []growthFigures
	for _, n := range r.opt.GrowthScales {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		g, err := r.growthScale(ctx, n)
		if err != nil {
			return fmt.Errorf("%d sessions: %w", n, err)
		}
		got = append(got, g)
	}
	if len(got) >= 2 {
		a, b := got[0], got[len(got)-1]
		ratio := func(x, y float64) string {
			if x <= 0 {
				return "?"
			}
			return fmt.Sprintf("×%.1f", y/x)
		}
		r.add("growth", fmt.Sprintf("from %d to %d sessions (×%d)", a.n, b.n, b.n/max(a.n, 1)),
			fmt.Sprintf("steady pass %s, pass after %d transcripts grow %s, list %s, idle CPU %s, RSS %s",
				ratio(a.pass.Seconds(), b.pass.Seconds()), r.opt.GrowthTouch, ratio(a.touchPass.Seconds(), b.touchPass.Seconds()),
				ratio(a.list.Seconds(), b.list.Seconds()), ratio(a.cpu, b.cpu), ratio(float64(a.rss), float64(b.rss))),
			"", nil, "the rows above, largest scale against smallest: a cost that grows with what changed, not with what exists, stays near ×1 for the steady pass, the pass after a change and idle CPU (the list and RSS grow with the sessions by nature)")
	}
	return nil
}

type growthFigures struct {
	n         int
	pass      time.Duration // mean steady pass
	touchPass time.Duration // the pass after the touch
	list      time.Duration
	cpu       float64
	rss       uint64
}

func (r *runner) growthScale(ctx context.Context, n int) (growthFigures, error) {
	g := growthFigures{n: n}
	dir, err := r.dir("growth")
	if err != nil {
		return g, err
	}
	defer r.cleanup(dir)
	root := &claudetest.Root{Dir: filepath.Join(dir, "claude")}
	t0 := time.Now()
	hist, err := root.WriteHistory(claudetest.HistorySpec{
		Files: n, Projects: r.opt.HomeProjects, Seed: 11, Dense: true, MidTool: 20,
		Size: func(_ int, rng *rand.Rand) int64 { return 3<<10 + rng.Int64N(3<<10) },
	})
	if err != nil {
		return g, err
	}
	r.opt.Log("growth: wrote %d transcripts, %s, in %s", n, Bytes(hist.Bytes), time.Since(t0).Round(time.Millisecond))
	label := fmt.Sprintf("%d sessions", n)
	r.add("growth", label+": data", fmt.Sprintf("%d transcripts of 3-6 KiB (one or two small turns; %s in all, every byte real lines) in %d project folders; %d end mid tool call",
		n, Bytes(hist.Bytes), r.opt.HomeProjects, len(hist.MidTool)), "", nil, "claudetest.WriteHistory with Dense, the standard home's line shapes")
	r.dropCaches()
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{root.Dir}})
	if err != nil {
		return g, err
	}
	defer d.Stop()
	first, err := d.WaitComplete(ctx, n, 10*time.Minute)
	if err != nil {
		return g, err
	}
	st, err := procStats(d)
	if err != nil {
		return g, err
	}
	r.add("growth", label+": first start, empty store", fmt.Sprintf("%s (%.2f s CPU)", dur(first), st.CPUSeconds), "", nil, "exec to the first complete ls")
	if err := sleepCtx(ctx, r.opt.GrowthSettle); err != nil {
		return g, err
	}

	// The idle window: metrics scraped outside the CPU figures (a scrape
	// lists the store).
	m0, err := metrics(ctx, d.Socket)
	if err != nil {
		return g, err
	}
	s0, err := procStats(d)
	if err != nil {
		return g, err
	}
	w0 := time.Now()
	if err := sleepCtx(ctx, r.opt.GrowthIdle); err != nil {
		return g, err
	}
	s1, err := procStats(d)
	el := time.Since(w0)
	if err != nil {
		return g, err
	}
	m1, err := metrics(ctx, d.Socket)
	if err != nil {
		return g, err
	}
	passes, mean, slowest := passFigures(m0, m1)
	g.pass = mean
	g.cpu = (s1.CPUSeconds - s0.CPUSeconds) / el.Seconds() * 100
	r.add("growth", label+": steady pass", fmt.Sprintf("mean %s over %d pass(es) (slowest ≤ %s)", dur(mean), passes, slowest), "", nil,
		fmt.Sprintf("sessiond_reconcile_duration_seconds from /metrics over a %s idle window after %s settling (default 5 s tick; the Claude adapter's 60 s full rescan falls in some windows)", r.opt.GrowthIdle, r.opt.GrowthSettle))
	r.add("growth", label+": idle CPU", fmt.Sprintf("%.2f %% of one core", g.cpu), "", nil, "utime+stime from /proc/<pid>/stat over the same window")

	c := unixClient(d.Socket, true)
	defer c.CloseIdleConnections()
	var ds []time.Duration
	size := 0
	for i := 0; i <= r.opt.GrowthLists; i++ {
		t := time.Now()
		b, err := get(ctx, c, "/v1/sessions?all=true")
		if err != nil {
			return g, err
		}
		if i > 0 {
			ds = append(ds, time.Since(t))
		}
		size = len(b)
	}
	lp := percentile(ds)
	g.list = lp.P50
	r.add("growth", label+": GET /v1/sessions?all=true", fmt.Sprintf("p50 %s, max %s (%s of JSON)", dur(lp.P50), dur(lp.Max), Bytes(size)), "", nil,
		fmt.Sprintf("%d sequential requests on one kept-alive connection after a warm-up, request to last body byte", lp.N))
	st, err = procStats(d)
	if err != nil {
		return g, err
	}
	g.rss = st.RSS
	r.add("growth", label+": RSS", fmt.Sprintf("%s (peak %s)", Bytes(st.RSS), Bytes(st.PeakRSS)), "", nil, "VmRSS after the idle window and the lists; VmHWM")

	tf, err := r.touch(ctx, d, root, hist)
	if err != nil {
		return g, err
	}
	g.touchPass = tf.appendPass
	r.add("growth", fmt.Sprintf("%s: the pass after %d sessions resume", label, r.opt.GrowthTouch), fmt.Sprintf("%s; shown running after %s", dur(tf.resumePass), tf.resumeShown), "", nil,
		fmt.Sprintf("%d old answered sessions get a live owner (a sleep) and its true registry entry, as a resume makes them; the first reconcile pass that starts after the last entry is written, its duration from /v1/health reconcile_took polled every 20 ms; shown = GET /v1/sessions/{id} of each says running", r.opt.GrowthTouch))
	r.add("growth", fmt.Sprintf("%s: the pass after %d transcripts grow", label, r.opt.GrowthTouch), fmt.Sprintf("%s; shown after %s", dur(tf.appendPass), tf.appendShown), "", nil,
		"then one assistant reply line appended to each of their transcripts (claudetest.AppendReply); the first pass that starts after the appends, as above; shown = GET /v1/sessions/{id} of each differs from before the appends")
	return g, nil
}

// passFigures are the reconcile passes between two scrapes: how many, the
// mean duration, and the histogram bucket bounding the slowest.
func passFigures(m0, m1 map[string]float64) (int, time.Duration, string) {
	const name = "sessiond_reconcile_duration_seconds"
	count := sumSuffix(m1, name+"_count") - sumSuffix(m0, name+"_count")
	sum := sumSuffix(m1, name+"_sum") - sumSuffix(m0, name+"_sum")
	if count <= 0 {
		return 0, 0, "-"
	}
	// Buckets by le, summed over triggers.
	les := map[float64]float64{}
	for k, v := range m1 {
		if le, ok := bucketLE(k, name); ok {
			les[le] += v - m0[k]
		}
	}
	best := math.Inf(1)
	for le, c := range les {
		if c >= count && le < best {
			best = le
		}
	}
	slowest := "?"
	if !math.IsInf(best, 1) {
		slowest = dur(time.Duration(best * float64(time.Second)))
	}
	return int(count), time.Duration(sum / count * float64(time.Second)), slowest
}

// bucketLE parses name_bucket{...,le="x"} and returns x.
func bucketLE(key, name string) (float64, bool) {
	if !strings.HasPrefix(key, name+"_bucket{") {
		return 0, false
	}
	i := strings.Index(key, `le="`)
	if i < 0 {
		return 0, false
	}
	v := key[i+4:]
	j := strings.IndexByte(v, '"')
	if j < 0 {
		return 0, false
	}
	if v[:j] == "+Inf" {
		return math.Inf(1), true
	}
	f, err := strconv.ParseFloat(v[:j], 64)
	return f, err == nil
}

// touch makes GrowthTouch of the old, answered sessions live again, as a
// resume does: a live owner process and its true registry entry each
// (claude would write them), then, once they show running, one line
// appended to each transcript. It returns the figures of both changes.
// (A line appended to an old transcript that no live process may write is
// seen only at the Claude adapter's full rescan, every 60 s, by design.)
func (r *runner) touch(ctx context.Context, d *daemon, root *claudetest.Root, hist claudetest.History) (touchFigures, error) {
	var f touchFigures
	mid := map[string]bool{}
	for _, id := range hist.MidTool {
		mid[id] = true
	}
	ss, err := d.Sessions(ctx)
	if err != nil {
		return f, err
	}
	byUp := map[string]api.Session{}
	for _, s := range ss {
		byUp[s.UpstreamID] = s
	}
	type target struct {
		path string
		s    api.Session
	}
	var ts []target
	step := max(1, len(hist.Paths)/r.opt.GrowthTouch)
	for i := 0; i < len(hist.Paths) && len(ts) < r.opt.GrowthTouch; i += step {
		for i < len(hist.Paths)-1 && mid[hist.IDs[i]] {
			i++
		}
		s, ok := byUp[hist.IDs[i]]
		if !ok {
			return f, fmt.Errorf("session %s not listed", hist.IDs[i])
		}
		ts = append(ts, target{hist.Paths[i], s})
	}
	ids := make([]string, len(ts))
	for i, t := range ts {
		ids[i] = t.s.ID
	}

	// The owners come back.
	ow := &Owners{Root: root, host: proc.NewHost()}
	defer ow.KillAll()
	for _, t := range ts {
		if _, err := ow.adopt(t.s.UpstreamID, t.s.Cwd, "busy"); err != nil {
			return f, err
		}
	}
	done := time.Now()
	if f.resumePass, err = firstPassAfter(ctx, d, done); err != nil {
		return f, err
	}
	f.resumeShown, err = waitShown(ctx, d, ids, done, func(_ string, now []byte) bool {
		var s api.Session
		return json.Unmarshal(now, &s) == nil && s.Status == session.StatusRunning
	})
	if err != nil {
		return f, err
	}
	if err := sleepCtx(ctx, time.Second); err != nil {
		return f, err
	}

	// Their transcripts grow by one line each.
	before := map[string][]byte{}
	for _, id := range ids {
		b, err := d.Get(ctx, "/v1/sessions/"+id)
		if err != nil {
			return f, err
		}
		before[id] = canon(b)
	}
	t0 := time.Now()
	for _, t := range ts {
		if err := claudetest.AppendReply(t.path, time.Now(), "Done: the tests pass."); err != nil {
			return f, err
		}
	}
	done = time.Now()
	if f.appendPass, err = firstPassAfter(ctx, d, done); err != nil {
		return f, err
	}
	f.appendShown, err = waitShown(ctx, d, ids, t0, func(id string, now []byte) bool { return string(canon(now)) != string(before[id]) })
	return f, err
}

type touchFigures struct {
	resumePass, appendPass   time.Duration
	resumeShown, appendShown string
}

// firstPassAfter returns the duration of the first reconcile pass that
// starts after t, from /v1/health polled every 20 ms.
func firstPassAfter(ctx context.Context, d *daemon, t time.Time) (time.Duration, error) {
	deadline := time.Now().Add(90 * time.Second)
	for {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("no reconcile pass within 90 s\n%s", d.Stderr())
		}
		if err := sleepCtx(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
		h, err := d.Client().Health(ctx)
		if err != nil {
			return 0, err
		}
		took, err := time.ParseDuration(h.ReconcileTook)
		if err == nil && !h.LastReconcile.Add(-took).Before(t) {
			return took, nil
		}
	}
}

// waitShown polls GET /v1/sessions/{id} of every id every 50 ms until ok
// holds for each, and returns the time since t0, or "not within 90 s".
func waitShown(ctx context.Context, d *daemon, ids []string, t0 time.Time, ok func(id string, body []byte) bool) (string, error) {
	deadline := time.Now().Add(90 * time.Second)
	for {
		seen := 0
		for _, id := range ids {
			b, err := d.Get(ctx, "/v1/sessions/"+id)
			if err != nil {
				return "", err
			}
			if ok(id, b) {
				seen++
			}
		}
		if seen == len(ids) {
			return dur(time.Since(t0)), nil
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("not within 90 s (%d of %d)", seen, len(ids)), nil
		}
		if err := sleepCtx(ctx, 50*time.Millisecond); err != nil {
			return "", err
		}
	}
}

// canon re-encodes a JSON answer so that formatting never counts as a change.
func canon(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
