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

func buildBenchDB(path string) ([]string, error) {
	db, err := opencodetest.Create(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	output := strings.Repeat("ok  github.com/example/pkg  0.123s\n", 12)
	base := time.Now().Add(-30 * 24 * time.Hour)
	turns := benchMessages / benchSessions / 2
	ids := make([]string, 0, benchSessions)
	messages, parts := 0, 0
	err = db.Tx(func(w *opencodetest.Writer) error {
		for s := 0; s < benchSessions; s++ {
			t0 := base.Add(time.Duration(s) * 10 * time.Minute)
			sid := opencodetest.NewID("ses")
			ids = append(ids, sid)
			dir := "/home/dev/project" + strconv.Itoa(s%50)
			if err := w.Session(opencodetest.Session{ID: sid, Directory: dir, Title: "session " + strconv.Itoa(s), Created: t0, Updated: t0.Add(time.Duration(turns) * time.Minute)}); err != nil {
				return err
			}
			for k := 0; k < turns; k++ {
				at := t0.Add(time.Duration(k) * time.Minute)
				last := k == turns-1
				flying := last && s < benchInFlight
				um := opencodetest.Message{SessionID: sid, Role: "user", Created: at}
				um.ID = opencodetest.NewID("msg")
				am := opencodetest.Message{SessionID: sid, ParentID: um.ID, Cwd: dir, Created: at.Add(time.Second)}
				am.ID = opencodetest.NewID("msg")
				if !flying {
					am.Completed = at.Add(30 * time.Second)
				}
				for _, m := range []opencodetest.Message{um, am} {
					if err := w.Message(m); err != nil {
						return err
					}
					messages++
				}
				status := "completed"
				if flying {
					status = "running"
				}
				ps := []opencodetest.Part{
					{MessageID: um.ID, SessionID: sid, Type: "text", Text: "please run the tests in ./pkg and fix what fails", Start: at},
					{MessageID: um.ID, SessionID: sid, Type: "text", Text: "<system-reminder>context</system-reminder>", Start: at},
					{MessageID: am.ID, SessionID: sid, Type: "step-start", Start: at.Add(time.Second)},
					{MessageID: am.ID, SessionID: sid, Tool: "bash", Status: status, Input: map[string]any{"command": "go test ./...", "description": "run tests"}, Output: output, Start: at.Add(2 * time.Second), End: at.Add(20 * time.Second)},
					{MessageID: am.ID, SessionID: sid, Type: "text", Text: "All tests pass now; I changed pkg/foo.go to handle the empty case.", Start: at.Add(21 * time.Second), End: at.Add(29 * time.Second)},
					{MessageID: am.ID, SessionID: sid, Type: "step-finish", Start: at.Add(30 * time.Second)},
				}
				for _, p := range ps {
					if err := w.Part(p); err != nil {
						return err
					}
					parts++
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if messages != benchMessages || parts != benchParts {
		return nil, fmt.Errorf("built %d messages and %d parts", messages, parts)
	}
	if _, err := db.SQL().Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return nil, err
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
		if err != nil || len(obs.Sessions) != benchSessions {
			b.Fatalf("%d sessions, %v", len(obs.Sessions), err)
		}
	}
	b.StopTimer()
	m.report(b)
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
		if err != nil || len(obs.Sessions) != benchSessions {
			b.Fatalf("%d sessions, %v", len(obs.Sessions), err)
		}
	}
	b.StopTimer()
	m.report(b)
}
