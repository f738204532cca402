package codex

import (
	"bytes"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// FuzzRolloutAppend: any bytes, read whole or as a first read of a prefix
// and then what was appended, say the same turn state and the same drift
// (item types not understood, scoped to the turn), and neither read
// panics. Seeded with the real rollouts.
func FuzzRolloutAppend(f *testing.F) {
	for _, name := range codextest.Fixtures() {
		b := codextest.Fixture(name)
		f.Add(b, uint16(len(b)/2))
	}
	f.Add([]byte("{\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\",\"turn_id\":\"t\"}}\nnot json\n"), uint16(20))
	f.Add([]byte("{\"timestamp\":\"2026-11-25T00:00:00Z\",\"type\":\"id_block\",\"payload\":{}}\n{\"type\":\"event_msg\",\"payload\":{\"type\":\"task_started\",\"turn_id\":\"t\"}}\n{\"type\":\"new_item\",\"payload\":{\"type\":\"x\"}}\n"), uint16(60))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		c := min(int(cut), len(b))
		var whole, parts readResult
		if err := readTail(bytes.NewReader(b), int64(len(b)), defaultTail, &whole); err != nil {
			t.Fatal(err)
		}
		if err := readTail(bytes.NewReader(b[:c]), int64(c), defaultTail, &parts); err != nil {
			t.Fatal(err)
		}
		if err := readAppended(bytes.NewReader(b), parts.offset, int64(len(b)), &parts); err != nil {
			t.Fatal(err)
		}
		ids := func(r readResult) []string {
			var out []string
			for _, c := range r.turn.Pending {
				out = append(out, c.ID)
			}
			return out
		}
		w, p := whole.turn, parts.turn
		if w.Busy != p.Busy || w.Known != p.Known || w.TurnID != p.TurnID || w.Aborted != p.Aborted ||
			!slices.Equal(ids(whole), ids(parts)) || whole.offset != parts.offset || !w.Drift.Equal(p.Drift) {
			t.Fatalf("cut at %d: parts %+v (offset %d), whole %+v (offset %d)", c, p, parts.offset, w, whole.offset)
		}
		readHead(bytes.NewReader(b), int64(len(b)))
	})
}
