package opencode

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
)

// The benchmark database: 2,000 sessions, 100,000 messages, 300,000 parts
// (a user message with 2 parts and an assistant message with 4 per turn),
// 20 sessions with their last turn in flight. Built once, in one
// transaction.
const (
	benchSessions = 2000
	benchMessages = 100000
	benchParts    = 300000
	benchInFlight = 20
)

var (
	benchOnce sync.Once
	benchDir  string
	benchIDs  []string
	benchErr  error
)

func benchData(b *testing.B) (string, []string) {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "opencode-bench")
		if benchErr != nil {
			return
		}
		start := time.Now()
		benchIDs, benchErr = buildBenchDB(filepath.Join(benchDir, "opencode.db"))
		fmt.Fprintf(os.Stderr, "built benchmark database in %s\n", time.Since(start).Round(time.Millisecond))
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchDir, benchIDs
}

// buildBenchDB writes the benchmark database with the generator
// sessiond-bench uses too, and checks it holds the advertised rows.
func buildBenchDB(path string) ([]string, error) {
	ids, err := opencodetest.WriteHistory(path, opencodetest.HistorySpec{
		Sessions: benchSessions, Turns: benchMessages / benchSessions / 2, InFlight: benchInFlight})
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var messages, parts int
	if err := db.QueryRow("SELECT (SELECT count(*) FROM message), (SELECT count(*) FROM part)").Scan(&messages, &parts); err != nil {
		return nil, err
	}
	if messages != benchMessages || parts != benchParts {
		return nil, fmt.Errorf("built %d messages and %d parts", messages, parts)
	}
	return ids, nil
}

func openWriter(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// peakMeter samples the Go heap and the process RSS (which includes
// SQLite's own allocations, made outside the Go heap) while a pass runs.
type peakMeter struct {
	stop     chan struct{}
	done     chan struct{}
	heapPeak atomic.Uint64
	rssPeak  atomic.Uint64
	rssBase  uint64
}

func startPeakMeter() *peakMeter {
	runtime.GC()
	debug.FreeOSMemory()
	m := &peakMeter{stop: make(chan struct{}), done: make(chan struct{}), rssBase: rss()}
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > m.heapPeak.Load() {
				m.heapPeak.Store(v)
			}
			if v := rss(); v > m.rssPeak.Load() {
				m.rssPeak.Store(v)
			}
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *peakMeter) report(b *testing.B) {
	close(m.stop)
	<-m.done
	b.ReportMetric(float64(m.heapPeak.Load())/(1<<20), "peak-heap-MB")
	if m.rssPeak.Load() > m.rssBase {
		b.ReportMetric(float64(m.rssPeak.Load()-m.rssBase)/(1<<20), "peak-rss-growth-MB")
	}
}

// rss is the resident set size from /proc/self/statm (0 elsewhere).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// BenchmarkColdPass: a fresh adapter reads the whole database.
func BenchmarkColdPass(b *testing.B) {
	dir, _ := benchData(b)
	m := startPeakMeter()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := New(Config{DataDir: dir})
		obs, err := a.Discover(context.Background(), nil)
		if err != nil || obs.Len() != benchSessions {
			b.Fatalf("%d sessions, %v", obs.Len(), err)
		}
	}
	b.StopTimer()
	m.report(b)
}

// BenchmarkRestart: what a restart of sessiond costs the adapter. A new
// adapter is handed what the previous one's Checkpoint saved (the tracker
// reads it from the store and calls Restore before the first pass), then
// runs its first Discover. An adapter that is no Checkpointer gets
// nothing, and its first pass is a cold one. read-MiB/op is what the
// process passed to read(2) per restart (rchar): the database pages read
// again.
func BenchmarkRestart(b *testing.B) {
	dir, _ := benchData(b)
	prev := New(Config{DataDir: dir})
	if _, err := prev.Discover(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	saved := map[string][]byte{}
	if c, ok := any(prev).(adapters.Checkpointer); ok {
		cp := c.Checkpoint()
		for k, v := range cp.Put {
			saved[k] = v
		}
		cp.Commit()
	}
	m := startPeakMeter()
	read := rchar()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := New(Config{DataDir: dir})
		if c, ok := any(a).(adapters.Checkpointer); ok {
			c.Restore(saved)
		}
		obs, err := a.Discover(context.Background(), nil)
		if err != nil || obs.Len() != benchSessions {
			b.Fatalf("%d sessions, %v", obs.Len(), err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(rchar()-read)/float64(b.N)/(1<<20), "read-MiB/op")
	b.ReportMetric(float64(len(saved)), "saved-entries")
	m.report(b)
}

// rchar is the bytes this process passed to read(2) and friends, from
// /proc/self/io (0 elsewhere).
func rchar() uint64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// BenchmarkIncrementalPass: one session got a new message since the last
// pass; the 20 in-flight sessions are read again as always.
func BenchmarkIncrementalPass(b *testing.B) {
	dir, ids := benchData(b)
	a := New(Config{DataDir: dir, FullEvery: -1})
	if _, err := a.Discover(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	// OpenCode writes through its own connection meanwhile.
	db, err := openWriter(filepath.Join(dir, "opencode.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	m := startPeakMeter()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		sid := ids[benchInFlight+i%(len(ids)-benchInFlight)]
		now := time.Now()
		msg := opencodetest.Message{ID: opencodetest.NewID("msg"), SessionID: sid, Role: "user", Created: now}
		if _, err := db.Exec(`INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)`,
			msg.ID, sid, now.UnixMilli(), now.UnixMilli(), msg.DataJSON()); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		obs, err := a.Discover(context.Background(), nil)
		if err != nil || obs.Len() != benchSessions {
			b.Fatalf("%d sessions, %v", obs.Len(), err)
		}
	}
	b.StopTimer()
	m.report(b)
}

// BenchmarkIdlePass: nothing changed since the last pass; the 20
// in-flight sessions are read again as always. What an idle daemon pays
// for OpenCode every reconcile interval.
func BenchmarkIdlePass(b *testing.B) {
	dir, _ := benchData(b)
	a := New(Config{DataDir: dir, FullEvery: -1})
	if _, err := a.Discover(context.Background(), nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		obs, err := a.Discover(context.Background(), nil)
		if err != nil || obs.Len() != benchSessions {
			b.Fatalf("%d sessions, %v", obs.Len(), err)
		}
	}
}
