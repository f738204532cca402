package proc

import (
	"os"
	"testing"
)

// BenchmarkProbe measures one probe of a live identity (this process):
// boot id (cached), kill(pid, 0), one stat read and parse.
func BenchmarkProbe(b *testing.B) {
	h := NewHost()
	id, err := h.Identify(os.Getpid())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := h.Probe(id); r.Liveness != Alive {
			b.Fatalf("Probe = %+v", r)
		}
	}
}

// BenchmarkSnapshot measures one read of the whole process table with the
// package's own reader (identity, ppid, state, uid, argv, cwd, markers).
func BenchmarkSnapshot(b *testing.B) {
	h := NewHost()
	b.ReportAllocs()
	var n int
	for b.Loop() {
		s, err := h.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		n = len(s.Procs)
	}
	b.ReportMetric(float64(n), "procs")
}
