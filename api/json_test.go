package api

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/jsonenctest"
	"github.com/sessiond/sessiond/session"
)

// TestSessionAppendJSONIsMarshal holds Session.AppendJSON to json.Marshal
// over random values of every field, times json.Marshal refuses included,
// and over sessions made from random records by FromRecord.
func TestSessionAppendJSONIsMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range 20000 {
		var s Session
		if i%2 == 0 {
			jsonenctest.Fill(rng, &s, true)
		} else {
			var r session.Record
			jsonenctest.Fill(rng, &r, true)
			s = FromRecord(&r)
		}
		want, wantErr := json.Marshal(&s)
		got, err := s.AppendJSON([]byte("x"))
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("session %d: AppendJSON error %v, json.Marshal error %v", i, err, wantErr)
		}
		if err != nil {
			continue
		}
		if !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("session %d:\nAppendJSON   %s\njson.Marshal %s", i, got, want)
		}
	}
}
