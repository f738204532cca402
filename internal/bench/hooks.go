package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// hooks: a flood of hooks naming sessions nobody has (any process of the
// user can post one, and each used to walk every hook kept, under the
// lock every pass takes: 10k/20k/40k ids took 1.9/5.3/60.5 s) while a
// client lists the sessions back to back. The target: 50,000
// distinct forged ids leave the list's p99 under 50 ms while they arrive.
func (r *runner) hooks(ctx context.Context) error {
	d, err := r.tenK(ctx)
	if err != nil {
		return err
	}
	// What `sessionctl ls` asks (the sessions not stopped), and what
	// `ls --all` asks, one after the other.
	list := func(c *http.Client, stop func() bool) (ls, all []time.Duration, err error) {
		for !stop() {
			for _, q := range []struct {
				path string
				into *[]time.Duration
			}{{"/v1/sessions", &ls}, {"/v1/sessions?all=true", &all}} {
				t0 := time.Now()
				if _, err := get(ctx, c, q.path); err != nil {
					return ls, all, err
				}
				*q.into = append(*q.into, time.Since(t0))
			}
		}
		return ls, all, nil
	}
	lc := unixClient(d.Socket, true)
	defer lc.CloseIdleConnections()
	n := 0
	quiet, quietAll, err := list(lc, func() bool { n++; return n > max(r.opt.ListRequests, 20) })
	if err != nil {
		return err
	}
	qp, qap := percentile(quiet[1:]), percentile(quietAll[1:])

	var sent, refused atomic.Int64
	var firstErr atomic.Value
	var done atomic.Bool
	var wg sync.WaitGroup
	per := r.opt.HookIDs / r.opt.HookSenders
	start := time.Now()
	for s := range r.opt.HookSenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := unixClient(d.Socket, true)
			defer c.CloseIdleConnections()
			for i := range per {
				body := fmt.Sprintf(`{"session_id":"f0f0f0f0-%04x-7000-8000-%012x","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"rm -rf /"}}`, s, i)
				req, _ := http.NewRequestWithContext(ctx, "POST", "http://sessiond/v1/hooks/claude", bytes.NewReader([]byte(body)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					firstErr.CompareAndSwap(nil, err.Error())
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusAccepted {
					refused.Add(1)
					firstErr.CompareAndSwap(nil, "POST /v1/hooks/claude: "+resp.Status)
				}
				sent.Add(1)
			}
		}()
	}
	// The passes go on too: the longest one seen while the hooks arrive
	// (the box of hooks is locked by every pass).
	var longest time.Duration
	var passes int
	hw := make(chan struct{})
	go func() {
		defer close(hw)
		hc := unixClient(d.Socket, true)
		defer hc.CloseIdleConnections()
		seen := time.Time{}
		for !done.Load() {
			time.Sleep(20 * time.Millisecond)
			var h struct {
				LastReconcile time.Time `json:"last_reconcile"`
				ReconcileTook string    `json:"reconcile_took"`
			}
			b, err := get(ctx, hc, "/v1/health")
			if err != nil || json.Unmarshal(b, &h) != nil || !h.LastReconcile.After(seen) {
				continue
			}
			seen = h.LastReconcile
			passes++
			if took, err := time.ParseDuration(h.ReconcileTook); err == nil && took > longest {
				longest = took
			}
		}
	}()
	var during, duringAll []time.Duration
	var listErr error
	lw := make(chan struct{})
	go func() {
		defer close(lw)
		during, duringAll, listErr = list(lc, done.Load)
	}()
	wg.Wait()
	took := time.Since(start)
	done.Store(true)
	<-lw
	<-hw
	if listErr != nil {
		return listErr
	}
	if e := firstErr.Load(); e != nil {
		return fmt.Errorf("hooks: %v (%d sent)", e, sent.Load())
	}
	after, afterAll, err := list(lc, func() bool { n++; return n > 2*max(r.opt.ListRequests, 20)+1 })
	if err != nil {
		return err
	}
	how := fmt.Sprintf("%d senders on their own connections post PermissionRequest hooks for %d distinct session ids no record has, back to back; meanwhile one client asks, back to back on a kept-alive connection, what `sessionctl ls` asks (the sessions not stopped) and what `ls --all` asks (all %d)", r.opt.HookSenders, sent.Load(), r.tenkN)
	r.add("hooks", fmt.Sprintf("%d forged hook ids: how fast they arrive", sent.Load()), fmt.Sprintf("%s, %.0f hooks/s", dur(took), float64(sent.Load())/took.Seconds()), "", nil, how)
	row := func(what string, during, after []time.Duration, before Percentiles, target bool) {
		dp, ap := percentile(during), percentile(after)
		t, ok := "", (*bool)(nil)
		if target {
			t, ok = "p99 < 50 ms", ptr(dp.N > 0 && dp.P99 < 50*time.Millisecond)
		}
		r.add("hooks", what+" while they arrive", fmt.Sprintf("p50 %s, p99 %s, max %s over %d lists (before: p50 %s, p99 %s; after: p50 %s, p99 %s)",
			dur(dp.P50), dur(dp.P99), dur(dp.Max), dp.N, dur(before.P50), dur(before.P99), dur(ap.P50), dur(ap.P99)), t, ok, how)
	}
	row("`sessionctl ls` (GET /v1/sessions)", during, after, qp, true)
	r.add("hooks", "the longest reconcile pass while they arrive", fmt.Sprintf("%s (%d passes seen)", dur(longest), passes), "", nil, "GET /v1/health every 20 ms: reconcile_took of each new pass")
	row(fmt.Sprintf("`ls --all` (GET /v1/sessions?all=true, %d sessions)", r.tenkN), duringAll, afterAll, qap, false)
	st, err := procStats(d)
	if err != nil {
		return err
	}
	r.add("hooks", "RSS after the flood", fmt.Sprintf("%s (peak %s)", Bytes(st.RSS), Bytes(st.PeakRSS)), "", nil, "VmRSS, VmHWM: the hooks kept are bounded (256 ids no record has)")
	return nil
}
