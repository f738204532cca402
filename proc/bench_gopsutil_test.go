package proc

import (
	"testing"

	"github.com/shirou/gopsutil/v4/process"
)

// BenchmarkSnapshotGopsutil builds the same table as BenchmarkSnapshot
// through gopsutil (Processes + Ppid + CmdlineSlice + Cwd), to measure what
// the own /proc reader saves. It needs the gopsutil build tag until
// gopsutil's own dependencies (tklauser/go-sysconf, tklauser/numcpus,
// ebitengine/purego) are in go.sum:
//
//	go test -tags gopsutil -run x -bench Snapshot -benchmem ./proc/
func BenchmarkSnapshotGopsutil(b *testing.B) {
	b.ReportAllocs()
	var n int
	for b.Loop() {
		ps, err := process.Processes()
		if err != nil {
			b.Fatal(err)
		}
		table := make(map[int]*Process, len(ps))
		for _, p := range ps {
			ppid, err := p.Ppid()
			if err != nil {
				continue // vanished
			}
			argv, _ := p.CmdlineSlice()
			cwd, _ := p.Cwd()
			table[int(p.Pid)] = &Process{Identity: Identity{PID: int(p.Pid)}, PPID: int(ppid), Argv: argv, Cwd: cwd}
		}
		n = len(table)
	}
	b.ReportMetric(float64(n), "procs")
}
