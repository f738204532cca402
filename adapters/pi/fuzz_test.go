package pi

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// FuzzSessionAppend: any bytes, read whole or as a first read of a prefix
// and then what was appended, say the same turn state, and no read
// panics. Seeded with the real files of testdata/.
func FuzzSessionAppend(f *testing.F) {
	real, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, p := range real {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, uint16(len(b)/2))
		}
	}
	f.Add([]byte(hdr(id1, "/p")+user(1, "go")+callBash(2, "c1", "x")+result(3, "c1", "ok")+say(4, "done", "stop")), uint16(300))
	f.Add([]byte(hdr(id1, "/p")+user(1, "go")+"not json\n"+callBash(2, "c1", "x")), uint16(200))
	f.Add([]byte(`{"type":"message","message":{"role":"assistant","stopReason":"toolUse","content":[{"type":"toolCall","id":"a"}]}}`+"\n"), uint16(20))
	f.Add([]byte(`{"type":"message","message":{"role":"user","content":"a string"}}`+"\n"+`{"type":"session_info","name":"n"}`+"\n"), uint16(30))
	f.Add([]byte(hdr(id1, "/p")+user(1, "go")+entry(2, "checkpoint", nil)+say(3, "hm", "paused")+entry(4, "bookmark", nil)), uint16(150))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		c := min(int(cut), len(b))
		var whole, parts readResult
		if err := readTail(bytes.NewReader(b), int64(len(b)), defaultTail, &whole); err != nil {
			t.Fatal(err)
		}
		if err := readTail(bytes.NewReader(b[:c]), int64(c), defaultTail, &parts); err != nil {
			t.Fatal(err)
		}
		parts.offset = max(parts.offset, 0)
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
		if w.Busy != p.Busy || w.Known != p.Known || w.Stop != p.Stop || !w.Since.Equal(p.Since) || !w.Waiting.Equal(p.Waiting) ||
			!w.Last.Equal(p.Last) || !slices.Equal(ids(whole), ids(parts)) || whole.offset != parts.offset || !w.Drift.Equal(p.Drift) {
			t.Fatalf("cut at %d: parts %+v (offset %d), whole %+v (offset %d)", c, p, parts.offset, w, whole.offset)
		}
		readHead(bytes.NewReader(b), int64(len(b)))
		readTitle(bytes.NewReader(b), int64(len(b)))
	})
}

// titleBySplit is titleOf as it was written first: every line of the
// head looked at.
func titleBySplit(head []byte) string {
	var t turn
	for _, l := range splitLines(head) {
		if (t.Title == "" && bytes.Contains(l, []byte(`"user"`))) || bytes.Contains(l, []byte(`"session_info"`)) {
			t.apply(l)
		}
	}
	return t.Title
}

// FuzzTitleOf: going from one "session_info" to the next once a title is
// known finds the title looking at every line does.
func FuzzTitleOf(f *testing.F) {
	f.Add([]byte(`{"type":"session","id":"s"}` + "\n" + `{"type":"message","message":{"role":"user","content":"first"}}` + "\n" +
		`{"type":"message","message":{"role":"user","content":"second"}}` + "\n" + `{"type":"session_info","name":"named"}` + "\n" +
		`{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"\"session_info\""}]}}` + "\n" +
		`{"type":"session_info","name":"  "}` + "\n" + `  {"type":"session_info","name":"last"}  ` + "\n"))
	f.Add([]byte(`{"type":"session_info","name":"n"}`))
	f.Fuzz(func(t *testing.T, head []byte) {
		if got, want := titleOf(head), titleBySplit(head); got != want {
			t.Fatalf("titleOf = %q, every line looked at: %q", got, want)
		}
	})
}
