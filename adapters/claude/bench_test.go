package claude

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

const (
	benchFiles    = 10000
	benchProjects = 150
)

var (
	benchOnce  sync.Once
	benchDir   string
	benchPaths []string
	benchBytes int64
	benchErr   error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchRoot builds, once per test binary, a config root with 10,000
// transcripts of skewed sizes in 150 project folders: 60 % small (a few
// turns, 2-40 KB, written whole), 30 % medium (200 KB-5 MB), 9.9 % large
// (10-100 MB) and 10 huge (300-700 MB). Medium and bigger files are sparse:
// real lines at both ends, a hole between, which costs a listing the same
// as real data since a listing reads only the ends.
func benchRoot(b *testing.B) (string, []string) {
	b.Helper()
	benchOnce.Do(func() {
		benchDir, benchErr = os.MkdirTemp("", "claude-bench-")
		if benchErr != nil {
			return
		}
		root := claudetest.NewRoot(b, filepath.Join(benchDir, "claude"))
		// claudetest.WriteHistory with SkewedSize and seed 1 is this
		// benchmark's data, shared with cmd/sessiond-bench.
		var h claudetest.History
		h, benchErr = root.WriteHistory(claudetest.HistorySpec{
			Files: benchFiles, Projects: benchProjects, Seed: 1, Size: claudetest.SkewedSize,
		})
		benchPaths, benchBytes = h.Paths, h.Bytes
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return filepath.Join(benchDir, "claude"), benchPaths
}

// peakHeap samples the live heap until stop is called and returns the peak.
func peakHeap() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak.Load() }
}

func benchAdapter(dir string) *Adapter {
	return New(Config{Roots: []string{dir}, DefaultRoot: dir, NoLearnedRoots: true})
}

// BenchmarkColdDiscovery: a fresh adapter lists 10,000 transcripts.
func BenchmarkColdDiscovery(b *testing.B) {
	dir, _ := benchRoot(b)
	snap := snapshot(b)
	b.ReportAllocs()
	b.ResetTimer()
	var read int64
	var peak uint64
	var wall time.Duration
	for range b.N {
		b.StopTimer()
		runtime.GC()
		stop := peakHeap()
		b.StartTimer()
		t0 := time.Now()
		a := benchAdapter(dir)
		obs, err := a.Discover(context.Background(), snap)
		wall += time.Since(t0)
		b.StopTimer()
		if p := stop(); p > peak {
			peak = p
		}
		if err != nil || obs.Len() != benchFiles {
			b.Fatalf("discover: %d sessions, %v", obs.Len(), err)
		}
		read += a.counters().BytesRead
		b.StartTimer()
	}
	b.ReportMetric(float64(benchFiles*b.N)/wall.Seconds(), "files/s")
	b.ReportMetric(float64(read)/float64(benchFiles*b.N), "B-read/file")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
	b.ReportMetric(float64(benchBytes)/(1<<30), "GB-listed")
}

// BenchmarkSteadyState: a pass over 10,000 unchanged transcripts reads
// nothing (stat only).
func BenchmarkSteadyState(b *testing.B) {
	dir, _ := benchRoot(b)
	snap := snapshot(b)
	a := benchAdapter(dir)
	if _, err := a.Discover(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	time.Sleep(kit.RacyWindow) // let freshly written directories settle
	if _, err := a.Discover(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	before := a.counters().BytesRead
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := a.Discover(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	d := a.counters().BytesRead - before
	if d != 0 {
		b.Fatalf("steady-state passes read %d bytes", d)
	}
	b.ReportMetric(float64(d)/float64(b.N), "B-read/pass")
}

// BenchmarkFullRescanPass: the periodic full rescan (default every 60 s)
// lists every directory and stats every transcript; still nothing is read.
func BenchmarkFullRescanPass(b *testing.B) {
	dir, _ := benchRoot(b)
	snap := snapshot(b)
	a := benchAdapter(dir)
	if _, err := a.Discover(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	before := a.counters().BytesRead
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		a.RequestRescan()
		if _, err := a.Discover(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	d := a.counters().BytesRead - before
	if d != 0 {
		b.Fatalf("full rescans read %d bytes", d)
	}
	b.ReportMetric(float64(d)/float64(b.N), "B-read/pass")
}

// BenchmarkIncremental: one transcript of 10,000 grew by one turn; the pass
// reads only the appended bytes.
func BenchmarkIncremental(b *testing.B) {
	dir, paths := benchRoot(b)
	snap := snapshot(b)
	a := benchAdapter(dir)
	if _, err := a.Discover(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	// The file that grows is a live session's: a registry entry names it
	// (this process stands in for its owner), so it is stat'ed every pass.
	path := paths[len(paths)-1]
	root := &claudetest.Root{Dir: dir}
	id := filepath.Base(path[:len(path)-len(".jsonl")])
	reg := root.WriteRegistry(b, claudetest.LiveEntry(b, os.Getpid(), id, "/home/u/src/x", "busy"))
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(reg, old, old); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(reg)
	if _, err := a.Discover(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	var appended int64
	b.ReportAllocs()
	b.ResetTimer()
	before := a.counters().BytesRead
	for range b.N {
		b.StopTimer()
		tr := claudetest.NewTranscript(id, "/home/u/src/x", time.Now())
		tr.Turn("one more", "ls", "a b c", "ok")
		for _, l := range tr.Lines() {
			appended += int64(len(l) + 1)
		}
		claudetest.Append(b, path, tr.Lines()...)
		b.StartTimer()
		if _, err := a.Discover(context.Background(), snap); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	d := a.counters().BytesRead - before
	if d != appended {
		b.Fatalf("read %d bytes for %d appended", d, appended)
	}
	b.ReportMetric(float64(d)/float64(b.N), "B-read/pass")
}

// BenchmarkRestart: what a restart of the daemon costs the adapter over
// 10,000 unchanged transcripts: Restore of the saved state of each
// ("restore"), and that with the first pass, which then stats each
// transcript instead of reading it ("restore+pass").
func BenchmarkRestart(b *testing.B) {
	dir, _ := benchRoot(b)
	snap := snapshot(b)
	first := benchAdapter(dir)
	if _, err := first.Discover(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	saved := first.Checkpoint().Put
	if len(saved) != benchFiles {
		b.Fatalf("%d entries saved", len(saved))
	}
	b.Run("restore", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchAdapter(dir).Restore(saved)
		}
	})
	b.Run("restore+pass", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a := benchAdapter(dir)
			a.Restore(saved)
			obs, err := a.Discover(context.Background(), snap)
			if err != nil || obs.Len() != benchFiles {
				b.Fatalf("discover: %d sessions, %v", obs.Len(), err)
			}
			if n := a.counters().BytesRead; n != 0 {
				b.Fatalf("the pass after a restore read %d bytes", n)
			}
		}
	})
}

// BenchmarkAssemble: a first pass's assembly of 10,000 transcripts read
// (the observations, the quiet set, the indexes), after the reads: each
// round forgets the quiet cache and the per-file observations, as a first
// start has neither.
//
//	go test -run='^$' -bench=BenchmarkAssemble -count=5 ./adapters/claude/
func BenchmarkAssemble(b *testing.B) {
	dir, _ := benchRoot(b)
	snap := snapshot(b)
	a := benchAdapter(dir)
	if _, err := a.Discover(context.Background(), snap); err != nil {
		b.Fatal(err)
	}
	files := allFiles(a)
	view := newProcView(snap, a.host, a.cfg.DefaultRoot, a.cfg.Home)
	shape := a.shapePrint()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		a.quiet = quietCache{}
		for _, f := range files {
			f.obs = nil
		}
		b.StartTimer()
		out, set := a.assemble(view, shape)
		if n := (adapters.Observation{Sessions: out, Quiet: set}).Len(); n != benchFiles {
			b.Fatalf("%d sessions assembled, want %d", n, benchFiles)
		}
	}
}
