package transcript

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

type readCount struct {
	r *bytes.Reader
	n int64
}

func (c *readCount) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n += int64(n)
	return n, err
}

// compareReads holds List and Tail (chunked) to listWhole and tailWhole
// (the whole windows) on one file: the same summary, counts, offset and
// skipPartial, never more bytes read. It returns the bytes each read.
func compareReads(t *testing.T, data []byte, window int) (got, want int64) {
	t.Helper()
	size := int64(len(data))
	var s1, s2 Summary
	r1, r2 := &readCount{r: bytes.NewReader(data)}, &readCount{r: bytes.NewReader(data)}
	// listChunked, not List: a fallback to listWhole must not hide a
	// difference (a bytes.Reader never comes back short).
	res1, ok, err1 := listChunked(r1, size, window, &s1)
	res2, err2 := listWhole(r2, size, window, &s2)
	if err1 != nil || err2 != nil || !ok {
		t.Fatalf("listChunked: %v %v, listWhole: %v", ok, err1, err2)
	}
	if !reflect.DeepEqual(res1, res2) || !reflect.DeepEqual(s1, s2) {
		t.Fatalf("window %d, %d bytes: list\n%+v\n%+v\nlistWhole\n%+v\n%+v", window, size, res1, s1, res2, s2)
	}
	if r1.n > r2.n {
		t.Fatalf("list read %d bytes, listWhole %d", r1.n, r2.n)
	}
	// A retail: the turn state again from the tail alone.
	t1, t2 := s1, s2
	t1.ResetTurn()
	t2.ResetTurn()
	var tr1, tr2 Result
	q1, q2 := &readCount{r: bytes.NewReader(data)}, &readCount{r: bytes.NewReader(data)}
	if ok, err := tailChunked(q1, size, window, &t1, &tr1); err != nil || !ok {
		t.Fatal(ok, err)
	}
	if err := tailWhole(q2, size, window, &t2, &tr2); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(tr1, tr2) || !reflect.DeepEqual(t1, t2) {
		t.Fatalf("window %d, %d bytes: tail\n%+v\n%+v\ntailWhole\n%+v\n%+v", window, size, tr1, t1, tr2, t2)
	}
	if q1.n > q2.n {
		t.Fatalf("tail read %d bytes, tailWhole %d", q1.n, q2.n)
	}
	return r1.n, r2.n
}

// withChunks runs f with the head and tail reads starting at the given
// sizes.
func withChunks(head, tail int64, f func()) {
	h, tl := headChunk, tailChunk
	headChunk, tailChunk = head, tail
	defer func() { headChunk, tailChunk = h, tl }()
	f()
}

// The chunked first reading of a transcript (List, Tail) gives exactly
// what reading the whole head and tail windows gives — summary, line
// counts, offset, skipPartial — on many generated dense transcripts, with
// the default chunks and with tiny ones (so that every line boundary falls
// on a chunk boundary somewhere), and it never reads more.
func TestChunkedReadMatchesWholeWindows(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 2026))
	n := 300
	if testing.Short() {
		n = 60
	}
	var got, want int64
	for i := range n {
		// Sizes from a few bytes to 2 MB, log-uniform.
		target := int(10 * math.Pow(2, rng.Float64()*18))
		data := claudetest.GenDense(rng, target)
		for _, window := range []int{DefaultWindow, 4 << 10, 1000, 97} {
			g, w := compareReads(t, data, window)
			if window == DefaultWindow {
				got += g
				want += w
			}
		}
		chunks := [][2]int64{{1, 1}, {7, 13}, {100, 64}, {1 << 10, 3 << 10}}
		c := chunks[i%len(chunks)]
		withChunks(c[0], c[1], func() {
			for _, window := range []int{DefaultWindow, 16 << 10, 333} {
				compareReads(t, data, window)
			}
		})
	}
	t.Logf("%d files, default window: chunked reads %d B/file, whole windows %d B/file", n, got/int64(n), want/int64(n))
}

// FuzzChunkedRead: on any content, window and chunk sizes, List and Tail
// read in chunks agree with the whole-window reads.
func FuzzChunkedRead(f *testing.F) {
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/home/u/proj", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	tr.Turn("hello", "ls", "a b", "two files")
	tr.Add(claudetest.Sidechain(tr.UserLine("side")))
	tr.CrashMidTool("run the tests", "go test ./...")
	good := tr.Bytes()
	f.Add(good, uint16(300), uint8(5), uint8(9))
	f.Add(good, uint16(0), uint8(0), uint8(0))
	f.Add(good[:len(good)-7], uint16(1000), uint8(64), uint8(1))
	f.Add([]byte("\n\n\n\x00\xff\xfe\n{\n}\n"), uint16(3), uint8(1), uint8(2))
	f.Add([]byte(strings.Repeat("x", 600)), uint16(40), uint8(3), uint8(3))
	f.Fuzz(func(t *testing.T, data []byte, window uint16, hc, tc uint8) {
		withChunks(int64(hc)+1, int64(tc)+1, func() {
			compareReads(t, data, int(window)+1)
		})
	})
}
