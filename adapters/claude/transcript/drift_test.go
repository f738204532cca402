package transcript

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
)

// driftLines draws a transcript: prompts, replies, tool calls and results,
// lines of types no version sessiond knows writes, messages with a field
// of another type, sidechains and glued lines.
func driftLines(rng *rand.Rand, n int) []byte {
	var b bytes.Buffer
	head := `"sessionId":"s1","cwd":"/w","version":"2.1.340","timestamp":"2026-11-25T00:00:%02d.000Z"`
	for i := range n {
		h := fmt.Sprintf(head, i%60)
		switch rng.IntN(9) {
		case 0:
			fmt.Fprintf(&b, `{"type":"user",%s,"uuid":"u%d","message":{"role":"user","content":"prompt %d"}}`, h, i, i)
		case 1:
			fmt.Fprintf(&b, `{"type":"assistant",%s,"uuid":"a%d","message":{"role":"assistant","content":[{"type":"tool_use","id":"t%d","name":"Bash","input":{"command":"ls"}}]}}`, h, i, i)
		case 2:
			fmt.Fprintf(&b, `{"type":"user",%s,"message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t%d"}]}}`, h, i-1)
		case 3:
			fmt.Fprintf(&b, `{"type":"new-kind-%d",%s}`, rng.IntN(4), h)
		case 4:
			fmt.Fprintf(&b, `{"type":"assistant",%s,"message":{"role":"assistant","content":%d}}`, h, i)
		case 5:
			fmt.Fprintf(&b, `{"type":"user",%s,"isSidechain":true,"message":{"role":"user","content":"side %d"}}`, h, i)
		case 6:
			fmt.Fprintf(&b, `{"type":"queue-operation",%s}{"type":"glued-kind",%s}`, h, h)
		case 7:
			fmt.Fprintf(&b, `{"type":"assistant",%s,"message":{"role":7,"content":"x"}}`, h)
		default:
			fmt.Fprintf(&b, `{"type":"system",%s}`, h)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// driftInParts is the drift after a listing of data's first cuts[0] bytes
// and append reads up to each next cut, as the adapter reads a growing
// file.
func driftInParts(t *testing.T, data []byte, cuts []int, window int) kit.Seen {
	t.Helper()
	var s Summary
	res, err := List(bytes.NewReader(data[:cuts[0]]), int64(cuts[0]), window, &s)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cuts[1:] {
		if res, err = ReadAppended(bytes.NewReader(data[:c]), res.Offset, int64(c), res.SkipPartial, len(data)+1, &s); err != nil {
			t.Fatal(err)
		}
	}
	return s.Drift()
}

// TestDriftInPartsIsTheWholeRead: a transcript read as it grew (a listing,
// then appends cut anywhere, inside lines too) shows the drift a listing
// of the whole file shows, with and without tiny read chunks: what a
// line not understood is counted for does not depend on how it was read.
func TestDriftInPartsIsTheWholeRead(t *testing.T) {
	defer func(h, tc int64) { headChunk, tailChunk = h, tc }(headChunk, tailChunk)
	rng := rand.New(rand.NewPCG(7, 8))
	for _, chunks := range [][2]int64{{4 << 10, 8 << 10}, {64, 128}} {
		headChunk, tailChunk = chunks[0], chunks[1]
		for round := range 400 {
			data := driftLines(rng, 1+rng.IntN(30))
			var whole Summary
			if _, err := List(bytes.NewReader(data), int64(len(data)), DefaultWindow, &whole); err != nil {
				t.Fatal(err)
			}
			var cuts []int
			for range 1 + rng.IntN(5) {
				cuts = append(cuts, rng.IntN(len(data)+1))
			}
			slices.Sort(cuts)
			cuts = append(cuts, len(data))
			if got, want := driftInParts(t, data, cuts, DefaultWindow), whole.Drift(); !got.Equal(want) {
				t.Fatalf("round %d, cuts %v:\n%s\nin parts %+v\nwhole    %+v", round, cuts, data, got.Items(), want.Items())
			}
		}
	}
}

// TestDriftNamesWhatIsNotUnderstood: a line of a type no version writes,
// and a message field of another type, are named; known lines are not.
func TestDriftNamesWhatIsNotUnderstood(t *testing.T) {
	data := []byte(`{"type":"user","sessionId":"s","cwd":"/w","version":"9","timestamp":"2026-11-25T00:00:00Z","message":{"role":"user","content":"go"}}
{"type":"queue-operation","sessionId":"s"}
{"type":"brand-new","sessionId":"s"}
{"type":"assistant","sessionId":"s","message":{"role":"assistant","stop_reason":3,"content":"x"}}
`)
	var s Summary
	if _, err := List(bytes.NewReader(data), int64(len(data)), DefaultWindow, &s); err != nil {
		t.Fatal(err)
	}
	want := []kit.DriftItem{{Kind: adapters.DriftFieldType, Value: "message.stop_reason: number"}, {Kind: adapters.DriftLineType, Value: "brand-new"}}
	if got := s.Drift().Items(); !slices.Equal(got, want) {
		t.Fatalf("drift %+v, want %+v", got, want)
	}
	// A new turn starts the turn's drift over: it no longer holds them.
	more := append(data, `{"type":"user","sessionId":"s","message":{"role":"user","content":"again"}}`+"\n"...)
	if _, err := ReadAppended(bytes.NewReader(more), int64(len(data)), int64(len(more)), false, 1<<20, &s); err != nil {
		t.Fatal(err)
	}
	if !s.Drift().Empty() {
		t.Fatalf("after a new prompt: %+v", s.Drift().Items())
	}
}

// FuzzDriftAppend: any bytes read as a listing of a prefix and an append
// of the rest show the drift of a listing of the whole (within the
// windows, lines within the line cap), and no read panics.
func FuzzDriftAppend(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 1))
	for range 8 {
		d := driftLines(rng, 12)
		f.Add(d, uint16(len(d)/3))
	}
	f.Add([]byte("{\"type\":\"x\"}\n{\"type\":\"user\",\"message\":{\"content\":\"p\"}}\n{\"type\":\"y\"}{\"type\":\"z\"}\n"), uint16(13))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		if len(data) > 2*DefaultWindow {
			return
		}
		var whole Summary
		if _, err := List(bytes.NewReader(data), int64(len(data)), DefaultWindow, &whole); err != nil {
			t.Fatal(err)
		}
		c := min(int(cut), len(data))
		if got, want := driftInParts(t, data, []int{c, len(data)}, DefaultWindow), whole.Drift(); !got.Equal(want) {
			t.Fatalf("cut at %d: in parts %+v, whole %+v", c, got.Items(), want.Items())
		}
	})
}
