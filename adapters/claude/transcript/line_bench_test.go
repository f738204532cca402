package transcript

import (
	"bytes"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// BenchmarkParseLine compares the one-pass scanner (impl=scan, ParseLine)
// with the encoding/json parser it replaced (impl=json, refParseLine) on
// dense 2.1.328 lines, one sub-benchmark per line shape and one for a whole
// turn. Run:
//
//	go test -run='^$' -bench=BenchmarkParseLine -benchmem -count=5 ./adapters/claude/transcript/
func BenchmarkParseLine(b *testing.B) {
	lines := claudetest.DenseLines()
	impls := []struct {
		name  string
		parse func([]byte) ([]Line, error)
	}{{"scan", parseLine}, {"json", refParseLine}}
	cases := append([]claudetest.DenseLine(nil), lines...)
	var turn []byte
	for _, l := range lines {
		turn = append(append(turn, l.Line...), '\n')
	}
	cases = append(cases, claudetest.DenseLine{Name: "turn", Line: turn})
	for _, c := range cases {
		for _, im := range impls {
			b.Run("line="+c.Name+"/impl="+im.name, func(b *testing.B) {
				var raws [][]byte
				if c.Name == "turn" {
					raws, _ = splitLines(c.Line)
				} else {
					raws = [][]byte{c.Line}
				}
				b.SetBytes(int64(len(c.Line)))
				b.ReportAllocs()
				for b.Loop() {
					for _, r := range raws {
						if ls, err := im.parse(r); err != nil || len(ls) != 1 {
							b.Fatalf("%s: %v %v", c.Name, ls, err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkListDense: the first read of a transcript (list: the head and
// tail windows, every line in them parsed) of about 2 MB made of dense
// turns, so both 64 KiB windows are full of real lines. Run:
//
//	go test -run='^$' -bench=BenchmarkListDense -benchmem -count=5 ./adapters/claude/transcript/
func BenchmarkListDense(b *testing.B) {
	var file []byte
	for _, l := range claudetest.DenseLines() {
		file = append(append(file, l.Line...), '\n')
	}
	turn := file
	for len(file) < 2<<20 {
		file = append(file, turn...)
	}
	r := bytes.NewReader(file)
	b.ReportAllocs()
	var read int64
	for b.Loop() {
		var s Summary
		res, err := List(countingReaderAt{r, &read}, int64(len(file)), DefaultWindow, &s)
		if err != nil || res.Counts.Corrupt != 0 || s.SessionID == "" {
			b.Fatalf("list: %+v %v", res, err)
		}
	}
	b.ReportMetric(float64(read)/float64(b.N), "B-read/file")
}

type countingReaderAt struct {
	r *bytes.Reader
	n *int64
}

func (c countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	*c.n += int64(n)
	return n, err
}
