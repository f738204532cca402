package state

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// randomRecord fills every field of a record, some left empty or nil, as
// the reconciler and launch write them.
func randomRecord(rng *rand.Rand) *session.Record {
	t := func() time.Time {
		return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.Int64N(int64(300 * 24 * time.Hour))))
	}
	tp := func() *time.Time {
		if rng.IntN(3) == 0 {
			return nil
		}
		v := t()
		return &v
	}
	str := func() string {
		return []string{"", "x", "/home/u/src/projet-é", "a \"quoted\" \\ line\nnext", "\u2028\u00e9\U0001F600", strings.Repeat("long ", 40)}[rng.IntN(6)]
	}
	id := func() proc.Identity {
		return proc.Identity{BootID: str(), PID: rng.IntN(1 << 22), StartTicks: rng.Uint64N(1 << 40)}
	}
	r := &session.Record{
		V: 1, ID: "aaaaaaaaaaaa", Agent: []string{"claude", "opencode"}[rng.IntN(2)], UpstreamID: str(),
		Status: session.Status(str()), Activity: session.Activity(str()), StatusReason: str(),
		OwnerInferred: rng.IntN(2) == 0, OwnerEvidence: str(), Cwd: str(), Title: str(), Launched: rng.IntN(2) == 0,
		LaunchedAt: tp(), Mode: str(), Tmux: str(), LogPath: str(), Source: str(),
		CreatedAt: t(), UpdatedAt: t(), StoppedAt: tp(), LastActivityAt: tp(), LastSeenAt: tp(),
		ActivitySince: tp(), PromptAt: tp(),
	}
	if rng.IntN(2) == 0 {
		o := id()
		r.Owner = &o
	}
	for range rng.IntN(3) {
		r.Candidates = append(r.Candidates, id())
	}
	if rng.IntN(2) == 0 {
		r.Exit = &session.ExitStatus{PID: rng.IntN(1 << 22), Code: rng.IntN(256) - 1, Signal: str(), At: t(), LogTail: str()}
	}
	r.Problems = []session.Problem{}
	for range rng.IntN(4) {
		r.Problems = append(r.Problems, session.Problem{Kind: session.ProblemKind(str()), Detail: str(), Since: t(), Key: str()})
	}
	if rng.IntN(3) > 0 {
		r.Resume = &session.ResumeCursor{SchemaVersion: 1, Agent: r.Agent, UpstreamID: str(), Cwd: str(), Root: str()}
	}
	return r
}

// Records are written with encoding/json; decodeRecord must read them as
// encoding/json does, field for field.
func TestDecodeRecordMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		b, err := json.Marshal(randomRecord(rng))
		if err != nil {
			t.Fatal(err)
		}
		var want session.Record
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		var fast session.Record
		if err := jsonv2.Unmarshal(b, &fast, recordDecodeOptions); err != nil {
			t.Fatalf("record %d: the fast decoder refused what encoding/json wrote: %v\n%s", i, err, b)
		}
		got, err := decodeRecord("x", b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(&fast, &want) || !reflect.DeepEqual(got, &want) {
			t.Fatalf("record %d decodes differently\n got %+v\nwant %+v\n%s", i, got, &want, b)
		}
	}
}

// What only encoding/json accepts is still read.
func TestDecodeRecordFallsBack(t *testing.T) {
	for _, b := range []string{
		`{"id":"a","agent":"claude","agent":"opencode"}`, // a duplicate name
		"{\"id\":\"a\",\"title\":\"\xff\"}",              // invalid UTF-8
		`{"ID":"a","Agent":"claude"}`,                    // names in another case
	} {
		var want session.Record
		if err := json.Unmarshal([]byte(b), &want); err != nil {
			t.Fatal(err)
		}
		got, err := decodeRecord("a", []byte(b))
		if err != nil || !reflect.DeepEqual(got, &want) {
			t.Errorf("%s: got %+v, %v; want %+v", b, got, err, &want)
		}
	}
	if _, err := decodeRecord("a", []byte(`{"id":`)); err == nil || !strings.Contains(err.Error(), "decode session a") {
		t.Errorf("a truncated record: %v", err)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 5 {
		b, _ := json.Marshal(randomRecord(rng))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want session.Record
		werr := json.Unmarshal(b, &want)
		got, err := decodeRecord("x", b)
		if (werr == nil) != (err == nil) {
			t.Fatalf("encoding/json: %v, decodeRecord: %v", werr, err)
		}
		if err == nil && !reflect.DeepEqual(got, &want) {
			t.Fatalf("decodes differently\n got %+v\nwant %+v", got, &want)
		}
	})
}

// BenchmarkDecodeRecord: one standard-home record (~850 bytes), with
// encoding/json and with the decoder decodeRecord uses.
//
//	go test -run='^$' -bench=BenchmarkDecodeRecord -benchmem ./state/
func BenchmarkDecodeRecord(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	r := randomRecord(rng)
	data, _ := json.Marshal(r)
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r session.Record
			if err := json.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
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
