package kit

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

// TestDriftSetAgainIsNoDouble: an input read again (Set with what it
// showed now) counts once, whatever the number of reads.
func TestDriftSetAgainIsNoDouble(t *testing.T) {
	var d Drift
	var s Seen
	s.Add(adapters.DriftLineType, "x")
	s.Add(adapters.DriftLineType, "y")
	for range 3 {
		d.Set("/a.jsonl", "transcript", "2.1.340", s)
	}
	var s2 Seen
	s2.Add(adapters.DriftLineType, "x")
	d.Set("/b.jsonl", "transcript", "2.1.340", s2)
	got := d.Report()
	want := []adapters.Drift{{Version: "2.1.340", Kind: adapters.DriftLineType, Input: "transcript", Inputs: 2,
		Values: []adapters.DriftValue{{Value: "x", Inputs: 2}, {Value: "y", Inputs: 1}}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("report %+v, want %+v", got, want)
	}
	d.Set("/a.jsonl", "transcript", "2.1.341", s) // resumed by a newer version
	d.Forget("/b.jsonl")
	want = []adapters.Drift{{Version: "2.1.341", Kind: adapters.DriftLineType, Input: "transcript", Inputs: 1,
		Values: []adapters.DriftValue{{Value: "x", Inputs: 1}, {Value: "y", Inputs: 1}}}}
	if got := d.Report(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a move and a forget: %+v, want %+v", got, want)
	}
	d.Set("/a.jsonl", "transcript", "2.1.341", Seen{})
	if got := d.Report(); len(got) != 0 || d.Len() != 0 || len(d.versions) != 0 {
		t.Fatalf("after every input went clean: %+v (%d inputs, %d versions)", got, d.Len(), len(d.versions))
	}
}

// TestDriftTallyEqualsRecount: any sequence of Set and Forget leaves the
// tally a fresh one gets from the inputs' last shares alone (within the
// bounds, where no value is cut).
func TestDriftTallyEqualsRecount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := []adapters.DriftKind{adapters.DriftLineType, adapters.DriftStatus, adapters.DriftFieldType}
	for round := range 300 {
		var d Drift
		type share struct {
			version string
			seen    Seen
		}
		last := map[string]share{}
		for range 1 + rng.IntN(60) {
			in := fmt.Sprintf("in%d", rng.IntN(8))
			if rng.IntN(5) == 0 {
				d.Forget(in)
				delete(last, in)
				continue
			}
			var s Seen
			for range rng.IntN(4) {
				s.Add(kinds[rng.IntN(len(kinds))], fmt.Sprintf("v%d", rng.IntN(5)))
			}
			v := fmt.Sprintf("1.%d", rng.IntN(3))
			d.Set(in, "transcript", v, s)
			if s.Empty() {
				delete(last, in)
			} else {
				last[in] = share{v, s}
			}
		}
		var fresh Drift
		for in, sh := range last {
			fresh.Set(in, "transcript", sh.version, sh.seen)
		}
		if got, want := d.Report(), fresh.Report(); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: tally %+v, recount %+v", round, got, want)
		}
	}
}

// TestDriftBounded: distinct values past the bounds are counted as others
// (per version) and versions past theirs under OtherVersions; taking
// every input out leaves nothing.
func TestDriftBounded(t *testing.T) {
	var d Drift
	for i := range 500 {
		var s Seen
		for j := range 40 {
			s.Add(adapters.DriftLineType, fmt.Sprintf("t%d-%d", i, j))
		}
		if !s.More || len(s.Items()) != MaxSeen {
			t.Fatalf("a Seen holds %d values (more %v)", len(s.Items()), s.More)
		}
		d.Set(fmt.Sprint(i), "transcript", fmt.Sprintf("v%d", i%40), s)
	}
	versions, values, others := map[string]bool{}, 0, 0
	for _, e := range d.Report() {
		versions[e.Version] = true
		values += len(e.Values)
		others += e.Others
	}
	if len(versions) > MaxDriftVersions+1 || !versions[OtherVersions] {
		t.Errorf("%d versions kept: %v", len(versions), versions)
	}
	if values > (MaxDriftVersions+1)*MaxDriftValues || others == 0 {
		t.Errorf("%d values kept, %d others", values, others)
	}
	for i := range 500 {
		d.Forget(fmt.Sprint(i))
	}
	if len(d.Report()) != 0 || len(d.versions) != 0 {
		t.Errorf("left after every input went: %+v", d.Report())
	}
}

func TestSeenRoundTripAndProblem(t *testing.T) {
	var s Seen
	s.Add(adapters.DriftStatus, "thinking")
	s.Add(adapters.DriftLineType, "x")
	s.Add(adapters.DriftLineType, "y\nz")
	w := wire.Writer{}
	s.Append(&w)
	r := wire.NewReader(w.B)
	if got := ReadSeen(&r); r.Err() != nil || !got.Equal(s) {
		t.Fatalf("round trip: %+v (%v), want %+v", got, r.Err(), s)
	}
	is, ok := s.Problem("claude", "2.1.340")
	if !ok || is.Key != "2.1.340" || !strings.Contains(is.Detail, "claude 2.1.340") ||
		!strings.Contains(is.Detail, "unknown line types x, y z") || !strings.Contains(is.Detail, "unknown status value thinking") ||
		!strings.Contains(is.Detail, "activity may be approximate") {
		t.Errorf("problem %+v", is)
	}
	if _, ok := (Seen{}).Problem("claude", "1"); ok {
		t.Error("an empty Seen makes a problem")
	}
}

// FuzzReadSeen: any bytes either fail the reader or give a Seen that
// writes back to the same bytes; never a panic.
func FuzzReadSeen(f *testing.F) {
	var s Seen
	s.Add(adapters.DriftLineType, "x")
	w := wire.Writer{}
	s.Append(&w)
	f.Add(w.B)
	f.Add([]byte{1, 200, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := wire.NewReader(b)
		got := ReadSeen(&r)
		if r.Err() != nil {
			return
		}
		if len(got.Items()) > MaxSeen {
			t.Fatalf("%d values", len(got.Items()))
		}
		w := wire.Writer{}
		got.Append(&w)
		r2 := wire.NewReader(w.B)
		if again := ReadSeen(&r2); !again.Equal(got) {
			t.Fatalf("read back %+v, was %+v", again, got)
		}
	})
}

// TestPlainShortIsCut: a value plainShort passes is one oneline.Cut
// leaves as it is.
func TestPlainShortIsCut(t *testing.T) {
	for _, v := range []string{"x", "a b", "a  b", " a", "a ", "a\tb", "a\nb", "é", strings.Repeat("x", 80), strings.Repeat("x", 81), "", "message.content: number"} {
		if plainShort(v) && oneline.Cut(v, maxDriftValueLen) != v {
			t.Errorf("%q passes, yet Cut makes it %q", v, oneline.Cut(v, maxDriftValueLen))
		}
	}
	if !plainShort("message.content: number") || plainShort("a  b") {
		t.Error("plainShort misjudges a plain value")
	}
}

// FuzzPlainShort: whatever plainShort passes, oneline.Cut leaves as it is.
func FuzzPlainShort(f *testing.F) {
	f.Add("message.content: number")
	f.Add("a  b")
	f.Fuzz(func(t *testing.T, v string) {
		if plainShort(v) && oneline.Cut(v, maxDriftValueLen) != v {
			t.Fatalf("%q passes, yet Cut makes it %q", v, oneline.Cut(v, maxDriftValueLen))
		}
	})
}
