package bench

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p := percentile(ds)
	if p.N != 100 || p.P50 != 50*time.Millisecond || p.P99 != 99*time.Millisecond || p.Max != 100*time.Millisecond {
		t.Errorf("got %+v", p)
	}
	if p := percentile([]time.Duration{7}); p.P50 != 7 || p.P99 != 7 {
		t.Errorf("one sample: %+v", p)
	}
	if p := percentile(nil); p.N != 0 {
		t.Errorf("no samples: %+v", p)
	}
}

func TestHomeSizes(t *testing.T) {
	const total = 2 << 30
	var s int64
	for _, x := range claudetest.HomeSizes(2000, 3, total, 9) {
		s += x
	}
	if s < total*9/10 || s > total*11/10 {
		t.Errorf("2,000 transcripts total %d bytes, want about %d", s, total)
	}
}

// The access watch sees reads of files in a watched folder, and not the
// folder's own listing: it is what says a steady pass read no transcript.
func TestAccessWatch(t *testing.T) {
	if !Supported {
		t.Skip("inotify")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "a.jsonl")
	if err := os.WriteFile(f, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := watchAccess([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(f); err != nil {
		t.Fatal(err)
	}
	reads, opens := w.Stop()
	if reads["a.jsonl"] == 0 || opens["a.jsonl"] == 0 {
		t.Errorf("reads %v, opens %v: the read of a.jsonl was not seen", reads, opens)
	}
	if len(reads) != 1 {
		t.Errorf("reads of other names: %v", reads)
	}
}

func TestReadProcStats(t *testing.T) {
	if !Supported {
		t.Skip("/proc")
	}
	s, err := readProcessStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS == 0 || s.PeakRSS < s.RSS || s.FDs == 0 || !s.HaveIO || s.Threads == 0 {
		t.Errorf("implausible: %+v", s)
	}
}
