package wire

import (
	"math"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	for name, newReader := range map[string]func([]byte) Reader{"copying": NewReader, "shared": NewSharedReader} {
		t.Run(name, func(t *testing.T) { testRoundTrip(t, newReader) })
	}
}

func testRoundTrip(t *testing.T, NewReader func([]byte) Reader) {
	var w Writer
	w.Byte(7)
	w.Uvarint(math.MaxUint64)
	w.Varint(math.MinInt64)
	w.Str("é\x00x")
	w.Bool(true)
	w.Bool(false)
	at := time.Date(2026, 11, 25, 1, 2, 3, 456789012, time.FixedZone("x", 3600))
	w.Time(at)
	w.Time(time.Time{})
	r := NewReader(w.B)
	if r.Byte() != 7 || r.Uvarint() != math.MaxUint64 || r.Varint() != math.MinInt64 || r.Str() != "é\x00x" || !r.Bool() || r.Bool() ||
		!r.Time().Equal(at) || !r.Time().IsZero() {
		t.Fatalf("round trip differs: %v", r.Err())
	}
	r.End()
	if r.Err() != nil {
		t.Fatal(r.Err())
	}
	// Every cut of it fails, and the first error sticks.
	for n := range len(w.B) {
		r := NewReader(w.B[:n])
		r.Byte()
		r.Uvarint()
		r.Varint()
		r.Str()
		r.Bool()
		r.Bool()
		r.Time()
		r.Time()
		r.End()
		if r.Err() == nil {
			t.Fatalf("a cut to %d of %d bytes read whole", n, len(w.B))
		}
	}
	bad := NewReader([]byte{5, 'a'})
	if bad.Str() != "" || bad.Err() == nil {
		t.Fatal("a string past the end was read")
	}
	if b := NewReader([]byte{2}); b.Bool() || b.Err() == nil {
		t.Fatal("a bool of 2 was read")
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The shared reader reads what the copying one does.
		r, sr := NewReader(b), NewSharedReader(b)
		for r.Err() == nil && r.remaining() > 0 {
			op := r.Byte()
			if sr.Byte() != op {
				t.Fatal("the readers disagree on a byte")
			}
			var got, want any
			switch op % 5 {
			case 0:
				got, want = sr.Uvarint(), r.Uvarint()
			case 1:
				got, want = sr.Varint(), r.Varint()
			case 2:
				got, want = sr.Str(), r.Str()
			case 3:
				got, want = sr.Bool(), r.Bool()
			}
			if got != want || (r.Err() == nil) != (sr.Err() == nil) {
				t.Fatalf("op %d: shared read %v (%v), copying %v (%v)", op%5, got, sr.Err(), want, r.Err())
			}
		}
	})
}

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want string // the error, "" for none
	}{
		{[]byte{2, 9}, ""},
		{[]byte{1, 9}, "format 1, this build reads 2"},
		{[]byte{3}, "format 3, this build reads 2"},
		{nil, "empty entry"},
	} {
		r := NewReader(tc.b)
		r.Format(2)
		got := ""
		if r.Err() != nil {
			got = r.Err().Error()
		}
		if got != tc.want {
			t.Errorf("Format(2) of %v: error %q, want %q", tc.b, got, tc.want)
		}
	}
	// An error before it sticks.
	r := NewReader([]byte{2})
	r.Fail("earlier")
	if r.Format(2); r.Err().Error() != "earlier" || r.remaining() != 1 {
		t.Errorf("Format after an error: %v, %d bytes left", r.Err(), r.remaining())
	}
}
