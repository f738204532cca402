package state

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sessiond/sessiond/internal/testkit/jsonenctest"
	"github.com/sessiond/sessiond/session"
)

// TestScanRecordMatchesDecoder: every record as AppendJSON writes it, over
// random values of every field, is read by scanRecord (not left to the
// general decoder) and read as encoding/json reads it.
func TestScanRecordMatchesDecoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 20000 {
		var r *session.Record
		if i%2 == 0 {
			r = randomRecord(rng)
		} else {
			r = new(session.Record)
			jsonenctest.Fill(rng, r, false)
		}
		if i%3 == 0 { // the values strOf hands out as constants
			r.Agent, r.Status, r.Activity = knownAgents[(i/3)%3], session.Status(knownStatuses[(i/3)%5]), session.Activity(knownActivities[(i/3)%4])
			r.ActivitySource = session.ActivitySource(knownSources[(i/3)%4])
			for k := range r.Problems {
				r.Problems[k].Kind = session.ProblemKind(knownProblems[(i+k)%len(knownProblems)])
			}
		}
		b, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		var want session.Record
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := scanRecord(b)
		if !ok {
			t.Fatalf("record %d: scanRecord refused what AppendJSON wrote:\n%s", i, b)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("record %d decodes differently\n got %+v\nwant %+v\n%s", i, got, &want, b)
		}
	}
}

// What AppendJSON does not write is left to the general decoder, which
// reads it.
func TestScanRecordLeavesTheRest(t *testing.T) {
	canon := `{"v":1,"id":"a","agent":"claude","upstream_id":"u","status":"running","activity":"busy","cwd":"/w","launched":false,"problems":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","stopped_at":null,"last_activity_at":null,"resume":null}`
	if _, ok := scanRecord([]byte(canon)); !ok {
		t.Fatalf("the canonical record was refused: %s", canon)
	}
	for _, b := range []string{
		canon[:len(canon)-1] + `,"extra":1}`,               // an unknown member
		`{"id":"a","v":1` + canon[len(`{"v":1,"id":"a"`):], // another order
		`{ "v":1` + canon[len(`{"v":1`):],                  // whitespace
		`{"v":1.0` + canon[len(`{"v":1`):],                 // a float
		`{"v":01` + canon[len(`{"v":1`):],                  // a leading zero
		`{"v":1,"id":"a","agent":"claude","upstream_id":"u","status":"running","activity":"busy","owner_inferred":false,"cwd":"/w"` + canon[len(`{"v":1,"id":"a","agent":"claude","upstream_id":"u","status":"running","activity":"busy","cwd":"/w"`):], // an omitempty false written
		`{"v":1,"id":"\ud83d\ude00"` + canon[len(`{"v":1,"id":"a"`):], // a surrogate pair
		`{"v":1,"id":"a","agent":"claude","upstream_id":"u","status":"running","activity":"busy","status_reason":""` + canon[len(`{"v":1,"id":"a","agent":"claude","upstream_id":"u","status":"running","activity":"busy"`):], // an empty omitempty string
		canon + " ",
		canon[:len(canon)-1],
	} {
		if _, ok := scanRecord([]byte(b)); ok {
			t.Errorf("scanRecord read a record AppendJSON does not write: %s", b)
		}
		var want session.Record
		if err := json.Unmarshal([]byte(b), &want); err != nil {
			continue // not a record at all: decodeRecord's error is tested elsewhere
		}
		got, err := decodeRecord("a", []byte(b))
		if err != nil || !reflect.DeepEqual(got, &want) {
			t.Errorf("%s: got %+v, %v; want %+v", b, got, err, &want)
		}
	}
}

// TestScanRecordEscapes: the escapes scanRecord reads (through
// jsonenc.Unquote) decode as encoding/json decodes them; a surrogate's
// \uXXXX, in either case, and an invalid escape are left to the general
// decoder.
func TestScanRecordEscapes(t *testing.T) {
	canon := `{"v":1,"id":"a","agent":"claude","upstream_id":"u","status":"running","activity":"busy","cwd":"/w","launched":false,"problems":null,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","stopped_at":null,"last_activity_at":null,"resume":null}`
	withID := func(id string) []byte { return []byte(`{"v":1,"id":"` + id + canon[len(`{"v":1,"id":"a`):]) }
	for _, id := range []string{`\"\\\/\b\f\n\r\t`, `\u0000\u001F\u00e9\u2028\uFFFF\uE000\uD7FF`, `é\u003c日本`} {
		var want session.Record
		if err := json.Unmarshal(withID(id), &want); err != nil {
			t.Fatal(err)
		}
		got, ok := scanRecord(withID(id))
		if !ok {
			t.Fatalf("%s: refused", id)
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("%s: got id %q, want %q", id, got.ID, want.ID)
		}
	}
	for _, id := range []string{`\uD83D\uDE00`, `\ud800`, `\uDFFF`, `\udbff\udfff`, `\q`, `\u12`, `\u00zz`, "\\\x01"} {
		if _, ok := scanRecord(withID(id)); ok {
			t.Errorf("%s: scanRecord read it", id)
		}
	}
}

func BenchmarkScanRecord(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	data, _ := randomRecord(rng).AppendJSON(nil)
	b.Run("scanRecord", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := scanRecord(data); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("go-json-experiment", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r session.Record
			if err := jsonv2.Unmarshal(data, &r, recordDecodeOptions); err != nil {
				b.Fatal(err)
			}
		}
	})
}
