package session

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/jsonenctest"
)

// TestAppendJSONIsMarshal holds the generated appenders to json.Marshal
// over random values of every field, times json.Marshal refuses included.
func TestAppendJSONIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		var r Record
		jsonenctest.Fill(rng, &r, true)
		same(t, i, &r, func() ([]byte, error) { return r.AppendJSON([]byte("x")) })

		var e Event
		jsonenctest.Fill(rng, &e, true)
		same(t, i, &e, func() ([]byte, error) { return e.AppendJSON([]byte("x")) })
	}
	// The zero values, and the empty slice beside the nil one.
	same(t, -1, &Record{}, func() ([]byte, error) { return (&Record{}).AppendJSON([]byte("x")) })
	r := Record{Problems: []Problem{}, Candidates: nil}
	same(t, -2, &r, func() ([]byte, error) { return r.AppendJSON([]byte("x")) })
	same(t, -3, &Event{}, func() ([]byte, error) { return (&Event{}).AppendJSON([]byte("x")) })
}

func same(t *testing.T, i int, v any, appendJSON func() ([]byte, error)) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := appendJSON()
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("value %d (%T): AppendJSON error %v, json.Marshal error %v", i, v, err, wantErr)
	}
	if err != nil {
		return
	}
	if !bytes.HasPrefix(got, []byte("x")) {
		t.Fatalf("value %d (%T): AppendJSON did not append to the buffer: %q", i, v, got)
	}
	if got := got[1:]; !bytes.Equal(got, want) {
		t.Fatalf("value %d (%T):\nAppendJSON  %s\njson.Marshal %s", i, v, got, want)
	}
}

func BenchmarkRecordJSON(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	var r Record
	jsonenctest.Fill(rng, &r, false)
	b.Run("encoding/json", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		buf := make([]byte, 0, 4096)
		for b.Loop() {
			var err error
			if buf, err = r.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
