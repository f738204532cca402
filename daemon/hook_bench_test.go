package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude"
	"github.com/sessiond/sessiond/session"
)

// BenchmarkHookRoute: POST /v1/hooks/claude over the real socket of an
// in-process daemon holding 2,000 sessions, each hook naming a session
// id no record has (any process of the user can post one). "serial" is
// one client; "flood" is 8 clients at once while one more lists every
// session back to back, and reports the list's p50 and p99 under the
// flood (50,000 forged ids took seconds each for the last
// ones, and must leave the list fast).
//
//	go test -run='^$' -bench=BenchmarkHookRoute -benchtime=50000x ./daemon/
func BenchmarkHookRoute(b *testing.B) {
	dir := shortDir(b)
	recs := make([]*session.Record, 2000)
	for i := range recs {
		recs[i] = realisticRecord(i)
	}
	seed(b, filepath.Join(dir, "state"), recs...)
	ad := claude.New(claude.Config{Roots: []string{filepath.Join(dir, "claude")}, NoLearnedRoots: true, Logger: zap.NewNop()})
	r := startConfig(b, Config{
		StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "run", "s.sock"),
		Interval: time.Second, Version: "bench", Logger: zap.NewNop(), Adapters: []adapters.Adapter{ad},
	})
	var seq atomic.Int64
	post := func(c *http.Client) {
		n := seq.Add(1)
		body := fmt.Sprintf(`{"session_id":"f0f0f0f0-0000-7000-8000-%012x","hook_event_name":"PermissionRequest","tool_name":"Bash","tool_input":{"command":"make"}}`, n)
		resp, err := c.Post("http://sessiond/v1/hooks/claude", "application/json", bytes.NewReader([]byte(body)))
		if err != nil {
			b.Error(err)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			b.Errorf("POST /v1/hooks/claude: %s", resp.Status)
		}
	}
	b.Run("serial", func(b *testing.B) {
		c := unixHTTP(r.cfg.Socket)
		defer c.CloseIdleConnections()
		for b.Loop() {
			post(c)
		}
	})
	b.Run("flood", func(b *testing.B) {
		ctx, cancel := context.WithCancel(context.Background())
		var lists []time.Duration
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := unixHTTP(r.cfg.Socket)
			defer c.CloseIdleConnections()
			for ctx.Err() == nil {
				t0 := time.Now()
				resp, err := c.Get("http://sessiond/v1/sessions?all=true")
				if err != nil {
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lists = append(lists, time.Since(t0))
			}
		}()
		var next atomic.Int64
		var senders sync.WaitGroup
		b.ResetTimer()
		for range 8 {
			senders.Add(1)
			go func() {
				defer senders.Done()
				c := unixHTTP(r.cfg.Socket)
				defer c.CloseIdleConnections()
				for next.Add(1) <= int64(b.N) {
					post(c)
				}
			}()
		}
		senders.Wait()
		b.StopTimer()
		cancel()
		wg.Wait()
		if len(lists) > 0 {
			p := quantiles(lists)
			b.ReportMetric(float64(p[0])/1e6, "list-p50-ms")
			b.ReportMetric(float64(p[1])/1e6, "list-p99-ms")
		}
	})
}

// quantiles is the nearest-rank median and 99th percentile of ds.
func quantiles(ds []time.Duration) [2]time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	return [2]time.Duration{at(0.5), at(0.99)}
}
