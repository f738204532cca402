package claudetest

import (
	"bufio"
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// A dense history is real 2.1.328 lines from end to end: each line one JSON
// object, the conversation chained parentUuid -> uuid from a null first
// parent, every tool_result answering an earlier tool_use of the same file,
// timestamps going forward, and the end as asked: a closing reply, or (one
// in MidTool) a tool_use that never gets its result.
func TestDenseHistory(t *testing.T) {
	root := &Root{Dir: t.TempDir()}
	sizes := []int64{0, 3 << 10, 10 << 10, 200 << 10, 1 << 20, 3 << 20}
	h, err := root.WriteHistory(HistorySpec{
		Files: 24, Projects: 3, Seed: 4, Dense: true, MidTool: 5,
		Size: func(i int, _ *rand.Rand) int64 { return sizes[i%len(sizes)] },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Paths) != 24 || len(h.MidTool) != 4 || h.Sparse != 0 {
		t.Fatalf("%d paths, %d mid tool, %d sparse", len(h.Paths), len(h.MidTool), h.Sparse)
	}
	mid := map[string]bool{}
	for _, id := range h.MidTool {
		mid[id] = true
	}
	var total int64
	for i, p := range h.Paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		total += fi.Size()
		if want := sizes[i%len(sizes)]; want > 0 && (fi.Size() < want || fi.Size() > want+64<<10) {
			t.Errorf("%s: %d bytes, want about %d", p, fi.Size(), want)
		}
		checkDense(t, p, h.IDs[i], mid[h.IDs[i]])
	}
	if total != h.Bytes {
		t.Errorf("History.Bytes %d, files total %d", h.Bytes, total)
	}
	// A reply appended keeps the file whole: chained, same session.
	if err := AppendReply(h.Paths[0], time.Now(), "Done."); err != nil {
		t.Fatal(err)
	}
	checkDense(t, h.Paths[0], h.IDs[0], false)
}

// However many transcripts a history has, the last starts an hour ago at
// the latest: none is in the future.
func TestHistoryGap(t *testing.T) {
	start := time.Now().Add(-30 * 24 * time.Hour)
	for _, n := range []int{10, 10000, 100000, 1000000} {
		spec := HistorySpec{Files: n, Start: start}
		last := start.Add(time.Duration(n-1) * spec.gap())
		if last.After(time.Now().Add(-time.Hour)) || (n <= 10000 && spec.gap() != time.Minute) {
			t.Errorf("%d files: gap %s, the last starts %s", n, spec.gap(), last)
		}
	}
}

func checkDense(t *testing.T, path, sid string, midTool bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	type block struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		ToolUseID string `json:"tool_use_id"`
	}
	type line struct {
		Type       string  `json:"type"`
		ParentUUID *string `json:"parentUuid"`
		UUID       string  `json:"uuid"`
		SessionID  string  `json:"sessionId"`
		Cwd        string  `json:"cwd"`
		Timestamp  string  `json:"timestamp"`
		Message    struct {
			Content    json.RawMessage `json:"content"`
			StopReason *string         `json:"stop_reason"`
		} `json:"message"`
	}
	var (
		parent   string
		seen     = map[string]bool{}
		open     = map[string]bool{}
		lastTS   time.Time
		lastConv line
		n        int
		results  int
	)
	for sc.Scan() {
		n++
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s:%d: %v", path, n, err)
		}
		if l.SessionID != sid {
			t.Fatalf("%s:%d: sessionId %q", path, n, l.SessionID)
		}
		ts, err := time.Parse("2006-01-02T15:04:05.000Z", l.Timestamp)
		if err != nil || ts.Before(lastTS) {
			t.Fatalf("%s:%d: timestamp %q after %s (%v)", path, n, l.Timestamp, lastTS, err)
		}
		lastTS = ts
		if l.Type != "user" && l.Type != "assistant" {
			continue
		}
		if l.Cwd != "/home/u/src/project-"+l.Cwd[len(l.Cwd)-3:] {
			t.Fatalf("%s:%d: cwd %q", path, n, l.Cwd)
		}
		switch {
		case parent == "" && l.ParentUUID != nil:
			t.Fatalf("%s:%d: first parentUuid %q, want null", path, n, *l.ParentUUID)
		case parent != "" && (l.ParentUUID == nil || *l.ParentUUID != parent):
			t.Fatalf("%s:%d: parentUuid %v, want %s", path, n, l.ParentUUID, parent)
		case seen[l.UUID]:
			t.Fatalf("%s:%d: uuid %s again", path, n, l.UUID)
		}
		seen[l.UUID] = true
		parent = l.UUID
		var blocks []block
		if len(l.Message.Content) > 0 && l.Message.Content[0] == '[' {
			if err := json.Unmarshal(l.Message.Content, &blocks); err != nil {
				t.Fatalf("%s:%d: content: %v", path, n, err)
			}
		}
		if l.Type == "assistant" && len(blocks) != 1 {
			t.Fatalf("%s:%d: %d content blocks, want one a line", path, n, len(blocks))
		}
		for _, b := range blocks {
			switch b.Type {
			case "tool_use":
				open[b.ID] = true
			case "tool_result":
				if !open[b.ToolUseID] {
					t.Fatalf("%s:%d: tool_result for %s, not an open tool_use", path, n, b.ToolUseID)
				}
				delete(open, b.ToolUseID)
				results++
			}
		}
		lastConv = l
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	stop := ""
	if lastConv.Message.StopReason != nil {
		stop = *lastConv.Message.StopReason
	}
	if midTool {
		if len(open) != 1 || lastConv.Type != "assistant" || stop != "tool_use" {
			t.Errorf("%s: ends with %s (%s) and %d open tool calls, want one tool_use without result", path, lastConv.Type, stop, len(open))
		}
	} else if len(open) != 0 || lastConv.Type != "assistant" || stop != "end_turn" {
		t.Errorf("%s: ends with %s (%s) and %d open tool calls, want a closing reply", path, lastConv.Type, stop, len(open))
	}
}

func BenchmarkDenseHistory(b *testing.B) {
	root := &Root{Dir: b.TempDir()}
	for b.Loop() {
		h, err := root.WriteHistory(HistorySpec{Files: 20, Projects: 2, Seed: 1, Dense: true,
			Size: func(int, *rand.Rand) int64 { return 5 << 20 }})
		if err != nil {
			b.Fatal(err)
		}
		b.SetBytes(h.Bytes)
	}
}
