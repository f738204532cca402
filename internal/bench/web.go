package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// webOwners is how many owners the web scenario kills, one at a time.
const webOwners = 10

// web: `sessionctl web` over one daemon with WebSessions sessions (and
// webOwners live ones), in a real headless Chromium: the first page (all
// sessions shown) from the navigation's start to DOMContentLoaded and to
// the rows on screen; each kill's status change from its arrival on a
// /v1/events stream of the bench's to the row's change in the page; and
// sessionctl web's CPU while the page is open and nothing changes.
func (r *runner) web(ctx context.Context) error {
	browserBin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			browserBin = p
			break
		}
	}
	if browserBin == "" {
		r.add("web", "skipped", "no chromium on PATH", "", nil, "apt-get install -y chromium")
		return nil
	}
	n := r.opt.WebSessions
	dir, owners, done, err := r.ownersWorld("web")
	if err != nil {
		return err
	}
	defer done()
	hist, err := owners.Root.WriteHistory(claudetest.HistorySpec{
		Files: n, Projects: r.opt.HomeProjects, Seed: 13, Dense: true, MidTool: 20,
		Size: func(_ int, rng *rand.Rand) int64 { return 3<<10 + rng.Int64N(3<<10) },
	})
	if err != nil {
		return err
	}
	var live []*Owner
	for i := range webOwners {
		o, err := owners.Start(fmt.Sprintf("/home/u/src/live-%02d", i))
		if err != nil {
			return err
		}
		live = append(live, o)
	}
	total := n + webOwners
	r.add("web", "data", fmt.Sprintf("%d sessions: %d transcripts of 3-6 KiB (%d end mid tool call) and %d live owners", total, n, len(hist.MidTool), webOwners),
		"", nil, "claudetest.WriteHistory with Dense; sleep owners with registry entries")
	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{owners.Root.Dir}})
	if err != nil {
		return err
	}
	defer d.Stop()
	if _, err := d.WaitComplete(ctx, total, 5*time.Minute); err != nil {
		return err
	}
	ss, err := d.Sessions(ctx)
	if err != nil {
		return err
	}
	idOf := map[string]string{}
	for _, s := range ss {
		idOf[s.UpstreamID] = s.ID
	}

	// sessionctl web, its URL read from its first line.
	web := exec.Command(r.opt.Bins.Sessionctl, "web", "--listen", "127.0.0.1:0", "--host", "unix://"+d.Socket)
	web.Env = testenv.Isolated(d.Home, d.Socket, d.StateDir)
	dieWithParent(web)
	out, err := web.StdoutPipe()
	if err != nil {
		return err
	}
	if err := web.Start(); err != nil {
		return fmt.Errorf("start sessionctl web: %w", err)
	}
	defer func() { web.Process.Kill(); web.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("sessionctl web printed no URL: %w", err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "sessionctl web: open "))
	url = strings.Replace(url, "/?token=", "/?all=1&token=", 1)

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browserBin), chromedp.NoSandbox,
		chromedp.WindowSize(1600, 1000), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancel := chromedp.NewExecAllocator(ctx, opts...)
	defer cancel()
	bctx, cancel2 := chromedp.NewContext(actx)
	defer cancel2()
	all := fmt.Sprintf(`performance.getEntriesByName('sessiond:list').length > 0 && document.querySelectorAll('.row').length >= %d`, total)
	wait := func(what, expr string, within time.Duration) error {
		wctx, cancel := context.WithTimeout(bctx, within)
		defer cancel()
		for {
			ok, err := chromedp.Run(wctx, chromedp.Poll[bool](expr, chromedp.WithPollingInterval(5*time.Millisecond)))
			if err == nil && ok {
				return nil
			}
			if wctx.Err() != nil {
				return fmt.Errorf("%s: not within %s: %v", what, within, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The first visit sets the cookie and warms the browser and the
	// server's hub; the figures are the loads after it.
	if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
		return fmt.Errorf("open the page: %w", err)
	}
	if err := wait("the first page", all, time.Minute); err != nil {
		return err
	}
	var dcl, rows, whole, first, last []time.Duration
	for range 5 {
		if err := chromedp.Do(bctx, chromedp.Reload()); err != nil {
			return fmt.Errorf("reload: %w", err)
		}
		if err := wait("the page reloaded", all, time.Minute); err != nil {
			return err
		}
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](`(() => { const n = performance.getEntriesByType('navigation')[0];
			return [n.domContentLoadedEventEnd, performance.getEntriesByName('sessiond:rows')[0].startTime, n.responseStart, n.responseEnd,
				performance.getEntriesByName('sessiond:list')[0].startTime]; })()`))
		if err != nil || len(v) != 5 {
			return fmt.Errorf("read the page's timings: %v", err)
		}
		dcl = append(dcl, time.Duration(v[0]*float64(time.Millisecond)))
		rows = append(rows, time.Duration(v[1]*float64(time.Millisecond)))
		first = append(first, time.Duration(v[2]*float64(time.Millisecond)))
		last = append(last, time.Duration(v[3]*float64(time.Millisecond)))
		whole = append(whole, time.Duration(v[4]*float64(time.Millisecond)))
	}
	pd, pr := percentile(dcl), percentile(rows)
	how := fmt.Sprintf("%d reloads of /?all=1 after a first visit, desktop 1600 px, headless %s; from the navigation's start (Navigation Timing)", len(dcl), filepath.Base(browserBin))
	r.add("web", fmt.Sprintf("first page of %d sessions: DOMContentLoaded, p50", total), fmt.Sprintf("%s (max %s)", dur(pd.P50), dur(pd.Max)), "≤ 300 ms", ptr(pd.Max <= 300*time.Millisecond), how)
	pf, pl0 := percentile(first), percentile(last)
	r.add("web", fmt.Sprintf("first page of %d sessions: its HTML's first and last byte, p50", total), fmt.Sprintf("%s and %s", dur(pf.P50), dur(pl0.P50)), "", nil,
		how+"; responseStart and responseEnd: the rest to DOMContentLoaded is the browser's")
	pw := percentile(whole)
	r.add("web", fmt.Sprintf("first page of %d sessions: its first rows on screen, p50", total), fmt.Sprintf("%s (max %s)", dur(pr.P50), dur(pr.Max)), "", nil,
		how+"; the server writes the first 150 rows into the HTML: the page's performance mark when its script starts")
	r.add("web", fmt.Sprintf("first page of %d sessions: all %d rows in the page, p50", total, total), fmt.Sprintf("%s (max %s)", dur(pw.P50), dur(pw.Max)), "", nil,
		how+"; the page's performance mark after it made the list whole from the live snapshot (server-sent events)")

	// Updates: each owner killed, one at a time; the status change's
	// arrival on the bench's own event stream, and the row's change in
	// the page (a MutationObserver, the page's clock: the same machine's).
	h, err := d.Client().Health(ctx)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	sctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	go d.Client().Events(sctx, api.EventsOptions{Since: h.LastEventSeq, Follow: true}, func(ev api.Event) error {
		if ev.To == session.StatusStopped || ev.To == session.StatusInterrupted {
			mu.Lock()
			if _, ok := arrived[ev.SessionID]; !ok {
				arrived[ev.SessionID] = time.Now()
			}
			mu.Unlock()
		}
		return nil
	})
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`window.__seen = {}; window.__watch = [];
		new MutationObserver(() => { for (const id of __watch) if (!__seen[id]) { const r = document.querySelector('.row[data-id="' + id + '"]');
			if (r && (r.dataset.state === 'stopped' || r.dataset.state === 'interrupted')) __seen[id] = performance.timeOrigin + performance.now(); } })
			.observe(document.getElementById('list'), { childList: true }); true`)); err != nil {
		return fmt.Errorf("watch the page: %w", err)
	}
	var lat, total2 []time.Duration
	for _, o := range live {
		id := idOf[o.SessionID]
		if id == "" {
			return fmt.Errorf("owner %s not listed", o.SessionID)
		}
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](fmt.Sprintf(`__watch.push(%q); true`, id))); err != nil {
			return err
		}
		if err := sleepCtx(ctx, time.Duration(rand.IntN(50))*time.Millisecond); err != nil {
			return err
		}
		killed := time.Now()
		if err := o.kill(); err != nil {
			return err
		}
		o.wait()
		if err := wait("the killed owner's row", fmt.Sprintf(`!!__seen[%q]`, id), 30*time.Second); err != nil {
			return err
		}
		ms, err := chromedp.Run(bctx, chromedp.Evaluate[float64](fmt.Sprintf(`__seen[%q]`, id)))
		if err != nil {
			return err
		}
		shown := time.UnixMicro(int64(ms * 1000))
		var at time.Time
		testenv.Poll(5*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			at = arrived[id]
			return !at.IsZero()
		})
		if at.IsZero() {
			return errors.New("no status event on the bench's stream for " + id)
		}
		lat = append(lat, shown.Sub(at))
		total2 = append(total2, shown.Sub(killed))
	}
	pl, pt := percentile(lat), percentile(total2)
	how = fmt.Sprintf("%d owners killed -9 one at a time; the status change's arrival on a /v1/events stream of the bench to the row's change in the page (a MutationObserver; the clocks are one machine's)", len(lat))
	r.add("web", "update: event to the page, p50", fmt.Sprintf("%s (max %s)", dur(pl.P50), dur(pl.Max)), "≤ 100 ms", ptr(pl.Max <= 100*time.Millisecond), how)
	r.add("web", "update: kill(2) to the page, p50", fmt.Sprintf("%s (max %s)", dur(pt.P50), dur(pt.Max)), "", nil, how)

	// Idle: the page open, nothing changing.
	if err := sleepCtx(ctx, time.Second); err != nil {
		return err
	}
	s0, err := readProcessStats(web.Process.Pid)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := sleepCtx(ctx, r.opt.SteadyFor); err != nil {
		return err
	}
	s1, err := readProcessStats(web.Process.Pid)
	if err != nil {
		return err
	}
	el := time.Since(t0)
	cpu := (s1.CPUSeconds - s0.CPUSeconds) / el.Seconds() * 100
	r.add("web", "sessionctl web idle CPU", fmt.Sprintf("%.2f %% (RSS %s)", cpu, Bytes(s1.RSS)), "< 0.5 %", ptr(cpu < 0.5),
		fmt.Sprintf("utime+stime from /proc over %s with the page open and connected, %d sessions, nothing changing", el.Round(time.Second), total))
	return nil
}
