package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// LoadConfig is a load run against one daemon's socket.
type LoadConfig struct {
	Socket string
	// Clients make requests back to back for Duration: the session list,
	// one session by id and by upstream id, health, a replay of recent
	// events and, now and then, /metrics. Even-numbered clients keep their
	// connection; odd-numbered ones dial a new one for every request, so
	// a leak per connection shows.
	Clients  int
	Duration time.Duration
	// Subscribers follow the event stream for the whole run; each must get
	// every event recorded meanwhile, once and in order.
	Subscribers int
	// Sessions are the sessions to ask for by id.
	Sessions []api.Session
	// Churn, if set, starts owner processes (with registry entries and
	// transcripts in Cwd) and kills them while the load runs, so there are
	// events for the subscribers and exits for the daemon to notice.
	Churn      *Owners
	Cwd        string
	ChurnEvery time.Duration
	// Log, if set, receives progress lines.
	Log func(format string, args ...any)
}

// LoadReport is what a load run saw.
type LoadReport struct {
	Requests     int64
	Errors       int64
	ErrorSamples []string
	Latency      Percentiles
	Throughput   float64 // requests per second

	Subscribers      int
	SubscriberErrors int64
	EventsRecorded   int // events in the store's log during the run
	EventsDelivered  int64
	EventsMissed     int64 // recorded but not delivered, summed over subscribers
	EventsDuplicated int64 // delivered twice or out of order
	OwnersChurned    int
}

func (r *LoadReport) addError(mu *sync.Mutex, err error) {
	atomic.AddInt64(&r.Errors, 1)
	mu.Lock()
	if len(r.ErrorSamples) < 10 {
		r.ErrorSamples = append(r.ErrorSamples, err.Error())
	}
	mu.Unlock()
}

// runLoad runs the load and checks the event streams. It returns an error
// only when the run itself could not be made; errors of the daemon are
// counted in the report.
func runLoad(ctx context.Context, cfg LoadConfig) (*LoadReport, error) {
	logf := cfg.Log
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if cfg.ChurnEvery <= 0 {
		cfg.ChurnEvery = 100 * time.Millisecond
	}
	rep := &LoadReport{Subscribers: cfg.Subscribers}
	var errMu sync.Mutex
	ctl := unixClient(cfg.Socket, false)
	defer ctl.CloseIdleConnections()
	health := func() (*api.Health, error) {
		b, err := get(ctx, ctl, "/v1/health")
		if err != nil {
			return nil, err
		}
		var h api.Health
		return &h, json.Unmarshal(b, &h)
	}
	h0, err := health()
	if err != nil {
		return nil, fmt.Errorf("health before the load: %w", err)
	}
	since := h0.LastEventSeq
	running0 := h0.Sessions[string(session.StatusRunning)]

	// Subscribers first, all connected before the load starts.
	type sub struct {
		seqs []uint64 // read only after the subscriber ended
		last atomic.Uint64
		err  error
	}
	subs := make([]*sub, cfg.Subscribers)
	subCtx, stopSubs := context.WithCancel(ctx)
	defer stopSubs()
	var subWG sync.WaitGroup
	for i := range subs {
		s := &sub{}
		subs[i] = s
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			c := api.NewClient(cfg.Socket)
			err := c.Events(subCtx, api.EventsOptions{Since: since, Follow: true}, func(ev api.Event) error {
				s.seqs = append(s.seqs, ev.Seq)
				s.last.Store(ev.Seq)
				return nil
			})
			if subCtx.Err() == nil {
				if err == nil {
					err = fmt.Errorf("event stream ended")
				}
				s.err = err
			}
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, err := metrics(ctx, cfg.Socket)
		if err == nil && int(m["sessiond_event_subscribers"]) >= cfg.Subscribers {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d subscribers not connected after 10s (metrics: %v)", cfg.Subscribers, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var churnWG sync.WaitGroup
	if cfg.Churn != nil {
		churnWG.Add(1)
		go func() {
			defer churnWG.Done()
			t := time.NewTicker(cfg.ChurnEvery)
			defer t.Stop()
			var live []*Owner
			for {
				select {
				case <-loadCtx.Done():
					return
				case <-t.C:
				}
				o, err := cfg.Churn.Start(cfg.Cwd)
				if err != nil {
					rep.addError(&errMu, fmt.Errorf("churn: %w", err))
					continue
				}
				rep.OwnersChurned++
				live = append(live, o)
				// Keep about three alive: each lives a few ticks.
				if len(live) > 3 {
					live[0].kill()
					live = live[1:]
				}
			}
		}()
	}

	lat := make([][]time.Duration, cfg.Clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := unixClient(cfg.Socket, i%2 == 0)
			defer c.CloseIdleConnections()
			for n := i; loadCtx.Err() == nil; n++ {
				var path string
				switch n % 8 {
				case 0, 4:
					path = "/v1/sessions"
				case 1, 5:
					if len(cfg.Sessions) > 0 {
						path = "/v1/sessions/" + cfg.Sessions[n%len(cfg.Sessions)].ID
					} else {
						path = "/v1/health"
					}
				case 2:
					if len(cfg.Sessions) > 0 {
						path = "/v1/sessions/" + url.PathEscape(cfg.Sessions[n%len(cfg.Sessions)].UpstreamID)
					} else {
						path = "/v1/health"
					}
				case 3, 6:
					path = "/v1/health"
				case 7:
					if n%40 == 7 {
						path = "/metrics"
					} else {
						path = "/v1/events?follow=false&since=" + strconv.FormatUint(max(since, 20)-20, 10)
					}
				}
				t0 := time.Now()
				req, _ := http.NewRequestWithContext(ctx, "GET", "http://sessiond"+path, nil)
				resp, err := c.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("GET %s: %s", path, resp.Status)
					}
				}
				atomic.AddInt64(&rep.Requests, 1)
				if err != nil {
					rep.addError(&errMu, err)
					continue
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	churnWG.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	rep.Latency = percentile(all)
	rep.Throughput = float64(rep.Requests) / elapsed.Seconds()
	logf("load: %d requests in %s, %d errors", rep.Requests, elapsed.Round(time.Millisecond), rep.Errors)

	// Let the churned owners' deaths be recorded, then wait for every
	// subscriber to have caught up with the log.
	if cfg.Churn != nil {
		cfg.Churn.KillAll()
		// Two whole passes after the last kill: every churned session is
		// then recorded, and its owner's death too.
		passes := func() float64 {
			m, err := metrics(ctx, cfg.Socket)
			if err != nil {
				return -1
			}
			return sumSuffix(m, "sessiond_reconcile_duration_seconds_count")
		}
		p0 := passes()
		deadline := time.Now().Add(30 * time.Second)
		for passes() < p0+2 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		// Then every running session must have a live owner, and there
		// must be no more running sessions than before the load.
		host := proc.NewHost()
		var bad []string
		for {
			bad = bad[:0]
			var l api.SessionList
			b, err := get(ctx, ctl, "/v1/sessions?status=running,starting,unknown")
			if err == nil {
				err = json.Unmarshal(b, &l)
			}
			if err != nil {
				bad = append(bad, err.Error())
			}
			for _, s := range l.Sessions {
				id := proc.Identity{BootID: s.BootID, PID: s.PID, StartTicks: s.PIDStart}
				if s.Status != session.StatusRunning {
					bad = append(bad, fmt.Sprintf("session %s is %s (%s)", s.ID, s.Status, s.StatusReason))
				} else if r := host.Probe(id); r.Liveness != proc.Alive {
					bad = append(bad, fmt.Sprintf("session %s is running but its owner pid %d is %s (%s)", s.ID, s.PID, r.Liveness, r.Reason))
				}
			}
			if len(l.Sessions) > running0 {
				bad = append(bad, fmt.Sprintf("%d sessions run, %d did before the load", len(l.Sessions), running0))
			}
			if len(bad) == 0 {
				break
			}
			if time.Now().After(deadline) {
				rep.addError(&errMu, fmt.Errorf("30s after the churned owners died: %s", strings.Join(bad, "; ")))
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	h1, err := health()
	if err != nil {
		return rep, fmt.Errorf("health after the load: %w", err)
	}
	b, err := get(ctx, ctl, "/v1/events?follow=false&since="+strconv.FormatUint(since, 10))
	if err != nil {
		return rep, fmt.Errorf("read the event log: %w", err)
	}
	var recorded []uint64
	if err := api.ReadSSE(bytes.NewReader(b), func(id, data string) error {
		n, err := strconv.ParseUint(id, 10, 64)
		if err == nil && n <= h1.LastEventSeq {
			recorded = append(recorded, n)
		}
		return nil
	}); err != nil {
		return rep, fmt.Errorf("read the event log: %w", err)
	}
	rep.EventsRecorded = len(recorded)
	deadline = time.Now().Add(10 * time.Second)
	for _, s := range subs {
		for s.last.Load() < h1.LastEventSeq && len(recorded) > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	stopSubs()
	subWG.Wait()
	for _, s := range subs {
		if s.err != nil {
			atomic.AddInt64(&rep.SubscriberErrors, 1)
			rep.addError(&errMu, fmt.Errorf("subscriber: %w", s.err))
		}
		got := map[uint64]bool{}
		var prev uint64
		for _, q := range s.seqs {
			if q <= prev || got[q] {
				rep.EventsDuplicated++
			}
			got[q] = true
			prev = q
			rep.EventsDelivered++
		}
		for _, q := range recorded {
			if !got[q] {
				rep.EventsMissed++
			}
		}
	}
	return rep, nil
}

// Footprint is what a daemon holds: goroutines and open descriptors.
type Footprint struct{ Goroutines, FDs int }

// measureFootprint takes the daemon's goroutines (go_goroutines, over a
// fresh connection) and open descriptors (/proc/<pid>/fd).
func measureFootprint(ctx context.Context, pid int, socket string) (Footprint, error) {
	g, err := goroutines(ctx, socket)
	if err != nil {
		return Footprint{}, err
	}
	fds, err := openFDs(ctx, pid, socket)
	if err != nil {
		return Footprint{}, err
	}
	return Footprint{Goroutines: g, FDs: fds}, nil
}

// Growth compares the footprint before and after a load.
type Growth struct{ Before, After Footprint }

// Goroutines is the goroutine growth.
func (g Growth) Goroutines() int { return g.After.Goroutines - g.Before.Goroutines }

// FDs is the descriptor growth.
func (g Growth) FDs() int { return g.After.FDs - g.Before.FDs }

// GoroutinesString says before, after and growth.
func (g Growth) GoroutinesString() string {
	return fmt.Sprintf("%+d (before %d, after %d)", g.Goroutines(), g.Before.Goroutines, g.After.Goroutines)
}

// FDsString says before, after and growth.
func (g Growth) FDsString() string {
	return fmt.Sprintf("%+d (before %d, after %d)", g.FDs(), g.Before.FDs, g.After.FDs)
}

// LoadWithFootprint measures the daemon's footprint, runs the load, and
// measures it again once the load's connections are closed: for up to
// 10 s, until both are back within tol of where they were (connections
// closed by clients end their server goroutines a little later).
func LoadWithFootprint(ctx context.Context, cfg LoadConfig, pid, tol int) (*LoadReport, Growth, error) {
	var g Growth
	// Twice, so anything the first scrape starts lazily is in the baseline.
	if _, err := measureFootprint(ctx, pid, cfg.Socket); err != nil {
		return nil, g, err
	}
	time.Sleep(200 * time.Millisecond)
	before, err := measureFootprint(ctx, pid, cfg.Socket)
	if err != nil {
		return nil, g, err
	}
	g.Before = before
	rep, err := runLoad(ctx, cfg)
	if err != nil {
		return rep, g, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		after, err := measureFootprint(ctx, pid, cfg.Socket)
		if err != nil {
			return rep, g, err
		}
		g.After = after
		if g.Goroutines() <= tol && g.FDs() <= tol || time.Now().After(deadline) {
			return rep, g, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}
