package gemini

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/session"
)

// chatLines builds a chat file's lines as Gemini CLI writes them.
type chatLines struct {
	b   bytes.Buffer
	now time.Time
}

func (l *chatLines) line(v any) *chatLines {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	l.b.Write(b)
	l.b.WriteByte('\n')
	return l
}

func (l *chatLines) ts() string {
	l.now = l.now.Add(time.Second)
	return l.now.UTC().Format(time.RFC3339Nano)
}

func (l *chatLines) header(id, hash string) *chatLines {
	return l.line(map[string]any{"sessionId": id, "projectHash": hash, "startTime": l.ts(), "lastUpdated": l.ts(), "kind": "main"})
}

func (l *chatLines) user(id, text string) *chatLines {
	l.line(map[string]any{"id": id, "timestamp": l.ts(), "type": "user", "content": []any{map[string]any{"text": text}}})
	return l.line(map[string]any{"$set": map[string]any{"lastUpdated": l.ts()}})
}

func (l *chatLines) gemini(id, text string, calls ...map[string]any) *chatLines {
	m := map[string]any{"id": id, "timestamp": l.ts(), "type": "gemini", "content": text, "model": "gemini-2.5-flash"}
	if len(calls) > 0 {
		m["toolCalls"] = calls
	}
	return l.line(m)
}

// call is a tool call; a finished one has its result and display, as
// Gemini CLI writes them (what the fold prunes away).
func (l *chatLines) call(id, status, command string) map[string]any {
	c := map[string]any{"id": id, "name": "run_shell_command", "args": map[string]any{"command": command, "description": "x"},
		"status": status, "timestamp": l.ts()}
	if done(status) {
		out := "Output: " + strings.Repeat("ok\tpkg \"quoted\"\n", 20)
		c["result"] = []any{map[string]any{"functionResponse": map[string]any{"id": id, "name": "run_shell_command", "response": map[string]any{"output": out}}}}
		c["resultDisplay"] = out
	}
	return c
}

func newLines() *chatLines {
	return &chatLines{now: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
}

func foldAll(t testing.TB, b []byte) chat {
	t.Helper()
	var c chat
	n, err := readLines(bytes.NewReader(b), 0, &c)
	if err != nil {
		t.Fatal(err)
	}
	if int(n) > len(b) {
		t.Fatalf("offset %d past %d bytes", n, len(b))
	}
	return c
}

func TestChatTurnStates(t *testing.T) {
	const id = "0b9c2d5e-1111-2222-3333-444455556666"
	cases := []struct {
		name     string
		build    func(l *chatLines)
		activity session.Activity
		waiting  session.WaitingKind
		inFlight []session.ProblemKind
	}{
		{"header only", func(l *chatLines) {}, session.ActivityIdle, "", nil},
		{"session context only", func(l *chatLines) {
			l.line(map[string]any{"$set": map[string]any{"messages": []any{map[string]any{"id": "ctx", "type": "user",
				"content": []any{map[string]any{"text": "<session_context>\nThis is the Gemini CLI."}}, "timestamp": l.ts()}}}})
		}, session.ActivityIdle, "", nil},
		{"calls made, not finished (as 0.61.0 writes them)", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "")
		}, session.ActivityBusy, "", []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{"tool results sent", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusSuccess, "ls"))
			l.line(map[string]any{"id": "u2", "type": "user", "timestamp": l.ts(), "content": []any{map[string]any{"functionResponse": map[string]any{"id": "c1", "name": "run_shell_command", "response": map[string]any{"output": "x"}}}}})
		}, session.ActivityBusy, "", []session.ProblemKind{session.ProblemIncompleteMessage}},
		{"prompt sent", func(l *chatLines) { l.user("u1", "hello") }, session.ActivityBusy, "", []session.ProblemKind{session.ProblemIncompleteMessage}},
		{"answered", func(l *chatLines) { l.user("u1", "hello").gemini("g1", "hi") }, session.ActivityIdle, "", nil},
		{"tool runs", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusExecuting, "sleep 30"))
		}, session.ActivityBusy, "", []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{"tool scheduled", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusScheduled, "ls"))
		}, session.ActivityBusy, "", []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{"awaits approval", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusApproval, "rm -rf x"))
		}, session.ActivityWaiting, session.WaitingPermission, []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{"tool done, answer pending", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusSuccess, "ls"))
		}, session.ActivityBusy, "", []session.ProblemKind{session.ProblemIncompleteMessage}},
		{"tool done, answered", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusSuccess, "ls")).gemini("g2", "done")
		}, session.ActivityIdle, "", nil},
		{"cancelled", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusCancelled, "sleep 30"))
		}, session.ActivityIdle, "", nil},
		{"status updated in place", func(l *chatLines) {
			l.user("u1", "run").gemini("g1", "", l.call("c1", statusExecuting, "sleep 1")).gemini("g1", "", l.call("c1", statusSuccess, "sleep 1")).gemini("g2", "ok")
		}, session.ActivityIdle, "", nil},
		{"error message ends the turn", func(l *chatLines) {
			l.user("u1", "run").line(map[string]any{"id": "e1", "timestamp": l.ts(), "type": "error", "content": "quota"})
		}, session.ActivityIdle, "", nil},
		{"rewound to before the answer", func(l *chatLines) {
			l.user("u1", "a").gemini("g1", "b").user("u2", "c").gemini("g2", "d").line(map[string]any{"$rewindTo": "u2"})
		}, session.ActivityIdle, "", nil},
		{"rewound to the answer", func(l *chatLines) {
			l.user("u1", "a").gemini("g1", "b").line(map[string]any{"$rewindTo": "g1"})
		}, session.ActivityBusy, "", []session.ProblemKind{session.ProblemIncompleteMessage}},
		{"rewound past the kept messages", func(l *chatLines) {
			l.user("u1", "a").gemini("g1", "b").user("u2", "c").gemini("g2", "d").user("u3", "e").gemini("g3", "f")
			l.line(map[string]any{"$rewindTo": "u2"})
		}, session.ActivityIdle, "", nil},
		{"a message no longer kept updated", func(l *chatLines) {
			l.user("u1", "a").gemini("g1", "b").user("u2", "c").gemini("g2", "d").user("u3", "e").gemini("g3", "f").user("u4", "g")
			l.gemini("g1", "", l.call("c1", statusExecuting, "x"))
		}, session.ActivityBusy, "", []session.ProblemKind{session.ProblemIncompleteMessage}},
		{"history replaced", func(l *chatLines) {
			l.user("u1", "a").gemini("g1", "", l.call("c1", statusExecuting, "x"))
			l.line(map[string]any{"$set": map[string]any{"messages": []any{
				map[string]any{"id": "u1", "type": "user", "content": "a", "timestamp": l.ts()},
				map[string]any{"id": "g9", "type": "gemini", "content": "summary", "timestamp": l.ts()},
			}}})
		}, session.ActivityIdle, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := newLines().header(id, "h")
			tc.build(l)
			c := foldAll(t, l.b.Bytes())
			if c.ID != id || c.ProjectHash != "h" || c.Kind != "main" {
				t.Fatalf("header: %+v", c)
			}
			ts := c.turn()
			if ts.Activity != tc.activity {
				t.Fatalf("activity %s (%s), want %s", ts.Activity, ts.Evidence, tc.activity)
			}
			var w session.WaitingKind
			if ts.WaitingFor != nil {
				w = ts.WaitingFor.Kind
			}
			if w != tc.waiting {
				t.Fatalf("waiting for %q, want %q", w, tc.waiting)
			}
			var kinds []session.ProblemKind
			for _, is := range ts.InFlight {
				kinds = append(kinds, is.Kind)
			}
			if !reflect.DeepEqual(kinds, tc.inFlight) {
				t.Fatalf("in flight %v, want %v", kinds, tc.inFlight)
			}
		})
	}
}

func TestChatTitleAndWaitingDetail(t *testing.T) {
	l := newLines().header("s", "h").user("u1", "fix the build\nplease").gemini("g1", "")
	l.gemini("g1", "", l.call("c1", statusApproval, "make all"))
	c := foldAll(t, l.b.Bytes())
	if c.Title != "fix the build please" {
		t.Fatalf("title %q", c.Title)
	}
	// g1 written twice is one message, replaced where it stands.
	if len(c.Msgs) != 2 || c.Msgs[1].ID != "g1" || len(c.Msgs[1].Calls) != 1 {
		t.Fatalf("messages %+v", c.Msgs)
	}
	w := c.turn().WaitingFor
	if w == nil || w.Tool != "run_shell_command" || w.Input != "make all" {
		t.Fatalf("waiting for %+v", w)
	}
}

// TestChatBadLines: corrupt, truncated and foreign lines are counted and
// skipped; the lines around them are read; an unfinished last line is
// left for the next read.
func TestChatBadLines(t *testing.T) {
	l := newLines().header("s", "h").user("u1", "a")
	l.b.WriteString("not json\n{\"truncated\": \n[1,2]\n{\"unknown\": true}\n")
	l.gemini("g1", "answer")
	whole := l.b.Len()
	l.b.WriteString(`{"id": "u2", "type": "user", "content": "half`)
	var c chat
	n, err := readLines(bytes.NewReader(l.b.Bytes()), 0, &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bad != 4 || len(c.Msgs) != 2 || int(n) != whole || c.turn().Activity != session.ActivityIdle {
		t.Fatalf("bad %d, msgs %d, offset %d (want %d), %s", c.Bad, len(c.Msgs), n, whole, c.turn().Activity)
	}
}

// TestChatLongLine: a line past maxLine is skipped as bad, without
// stopping the read.
func TestChatLongLine(t *testing.T) {
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 200 << 10 // past the reader's buffer
	l := newLines().header("s", "h")
	l.b.WriteString(`{"id": "x", "type": "user", "content": "`)
	l.b.WriteString(strings.Repeat("a", maxLine))
	l.b.WriteString("\"}\n")
	l.gemini("g1", "after")
	c := foldAll(t, l.b.Bytes())
	if c.Bad != 1 || len(c.Msgs) != 1 || c.Msgs[0].ID != "g1" {
		t.Fatalf("bad %d, msgs %+v", c.Bad, c.Msgs)
	}
}

// genChat writes a random but well-formed chat: prompts, answers, tool
// calls updated in place, header updates, history replacements, rewinds
// (some past the kept window), and some bad lines.
func genChat(rng *rand.Rand, n int) []byte {
	l := newLines().header("sess", "hash")
	var ids []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("m%d", i)
		switch k := rng.IntN(20); {
		case k < 6:
			l.user(id, fmt.Sprintf("prompt %d", i))
			ids = append(ids, id)
		case k < 10:
			l.gemini(id, "answer")
			ids = append(ids, id)
		case k < 14:
			c := fmt.Sprintf("c%d", i)
			l.gemini(id, "", l.call(c, statusExecuting, "sleep 1"))
			if rng.IntN(2) == 0 {
				l.gemini(id, "", l.call(c, []string{statusSuccess, statusError, statusCancelled, statusApproval, "deferred"}[rng.IntN(5)], "sleep 1"))
			}
			ids = append(ids, id)
		case k < 15 && len(ids) > 0:
			// An update of an earlier message (maybe no longer kept).
			l.gemini(ids[rng.IntN(len(ids))], "edited")
		case k < 16 && len(ids) > 0:
			j := rng.IntN(len(ids))
			l.line(map[string]any{"$rewindTo": ids[j]})
			ids = ids[:j]
		case k < 17:
			var msgs []any
			ids = ids[:0]
			for j := 0; j < rng.IntN(maxKept*2); j++ {
				mid := fmt.Sprintf("r%d-%d", i, j)
				msgs = append(msgs, map[string]any{"id": mid, "type": []string{"user", "gemini"}[j%2], "content": "x", "timestamp": l.ts()})
				ids = append(ids, mid)
			}
			l.line(map[string]any{"$set": map[string]any{"messages": msgs, "lastUpdated": l.ts()}})
		case k < 18:
			l.line(map[string]any{"$set": map[string]any{"summary": fmt.Sprintf("summary %d", i), "lastUpdated": l.ts()}})
		case k < 19:
			switch rng.IntN(4) {
			case 0:
				l.line(map[string]any{"id": id, "timestamp": l.ts(), "type": "thought", "content": "x"}) // drift
				ids = append(ids, id)
			case 1:
				l.line(map[string]any{"$truncate": 3}) // drift
			case 2:
				l.line(map[string]any{"id": id, "timestamp": 7, "type": "user", "content": "q"}) // a field of another type
				ids = append(ids, id)
			default:
				l.b.WriteString("{garbage\n")
			}
		default:
			l.line(map[string]any{"$rewindTo": "nowhere"})
			ids = ids[:0]
		}
	}
	return l.b.Bytes()
}

// TestIncrementalEqualsWhole is the differential test: a chat read by the
// adapter as it grows, in random steps cutting lines anywhere, folds to
// the same state as the whole file read once by a fresh adapter.
func TestIncrementalEqualsWhole(t *testing.T) {
	drifted := 0
	defer func() {
		if drifted == 0 {
			t.Error("no generated chat showed drift")
		}
	}()
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, seed*7))
		b := genChat(rng, 20+rng.IntN(150))
		dir := t.TempDir()
		path := filepath.Join(dir, "tmp", "p", "chats", "session-2026-11-27T10-00-sess0000.jsonl")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		a := New(Config{Roots: []string{dir}})
		f := &fileState{path: path}
		fh, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(b); {
			step := 1 + rng.IntN(400)
			end := min(len(b), off+step)
			fh.Write(b[off:end])
			off = end
			if err := a.refresh(f, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		fh.Close()
		if err := a.refresh(f, time.Now()); err != nil {
			t.Fatal(err)
		}
		g := &fileState{path: path}
		if err := New(Config{Roots: []string{dir}}).refresh(g, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(f.c, g.c) || f.offset != g.offset {
			t.Fatalf("seed %d: incremental\n%+v (offset %d)\nwhole\n%+v (offset %d)", seed, f.c, f.offset, g.c, g.offset)
		}
		if !f.c.Drift.Empty() {
			drifted++
		}
		if f.c.turn().Activity != g.c.turn().Activity {
			t.Fatalf("seed %d: activity differs", seed)
		}
	}
}

// FuzzChatAppend: any bytes, read whole or as a first read of a prefix
// and then what was appended, fold to the same chat, and neither read
// panics.
func FuzzChatAppend(f *testing.F) {
	f.Add(genChat(rand.New(rand.NewPCG(1, 2)), 15), uint16(300))
	f.Add(genChat(rand.New(rand.NewPCG(3, 4)), 30), uint16(1500))
	f.Add([]byte("{\"sessionId\":\"s\",\"projectHash\":\"h\"}\n{\"$rewindTo\":\"x\"}\nnot json\n{\"id\":\"a\",\"type\":\"user\"}\n"), uint16(20))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		c := min(int(cut), len(b))
		var whole chat
		wn, werr := readLines(bytes.NewReader(b), 0, &whole)
		var parts chat
		pn, err := readLines(bytes.NewReader(b[:c]), 0, &parts)
		if err == nil {
			pn, err = readLines(bytes.NewReader(b[pn:]), pn, &parts)
		}
		if werr != nil || err != nil {
			t.Fatalf("errors %v, %v", werr, err)
		}
		if !reflect.DeepEqual(whole, parts) || wn != pn {
			t.Fatalf("cut at %d: parts %+v (%d), whole %+v (%d)", c, parts, pn, whole, wn)
		}
		whole.turn()
		readWhole(b)
	})
}

// refresh is a pass's read of one chat, counted.
func (a *Adapter) refresh(f *fileState, now time.Time) error {
	read, err := a.read(f, now)
	if read {
		a.noteRead(f)
	}
	return err
}

// FuzzFoldIsApply: folding a line pruned (fold) ends in the same chat as
// folding it whole with encoding/json (apply), line after line, whatever
// the bytes: the pruner drops nothing a fold reads, and checks JSON as
// encoding/json does.
func FuzzFoldIsApply(f *testing.F) {
	f.Add(genChat(rand.New(rand.NewPCG(1, 2)), 15))
	f.Add(genChat(rand.New(rand.NewPCG(5, 6)), 40))
	for _, name := range []string{"headless-text-and-call.jsonl", "tui-approved-shell.jsonl", "hooks.jsonl"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"id":"g","type":"gemini","toolCalls":[{"id":"c","status":"success","result":[1e999],"args":{"n":1e999}}],"content":[{"result":1,"text":"t"}]}` + "\n" +
		`{"$set":{"messages":[{"id":"a","type":"user","content":"q","toolCalls":[{"Result":1,"res\u0075lt":{"x":1}}]}]},"result":{}}` + "\n" +
		`{"ID":"x","TYPE":"user","Content":"c","toolcalls":[{"ARGS":{"command":"ls","result":1}}],"result":"r"}` + "\n" +
		`{"id":"q1","type":"gemini","content":null,"toolCalls":[{"id":"c","args":{"comm\u0061nd":"esc","path":"p","path":7}}]}` + "\n" +
		`{"id":"q2","type":"gemini","toolCalls":[{"id":"c","args":{"command":"ls","timeout":1e999}},{"id":"d","args":{"command":"","file_path":"f"}}]}` + "\n" +
		`{"id":"q3","type":"gemini","toolCalls":null,"content":[{"text":"a"},{"functionResponse":{"response":{"output":"o"}}}]}` + "\n" +
		`{"id":"q4","id":"q5","type":"user","content":"dup"}` + "\n" + `{"id":"q6","kind":"main","content":"header field"}` + "\n" +
		`{"id":"q7","type":"gemini","toolCalls":[{"id":"c","status":"executing","args":"not a map"}]}`))
	// A content nested to encoding/json's limit, and one past it.
	for _, n := range []int{9998, 9999} {
		f.Add([]byte(`{"id":"deep","type":"user","content":` + strings.Repeat("[", n) + `{"text":"t"}` + strings.Repeat("]", n) + "}\n"))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var pruned, whole chat
		for _, line := range bytes.Split(b, []byte("\n")) {
			pruned.fold(line)
			whole.apply(line)
			if !reflect.DeepEqual(pruned, whole) {
				t.Fatalf("after %q:\npruned %+v\n whole %+v", line, pruned, whole)
			}
		}
	})
}

// contentOfAny is the text of a content decoded into an interface, as
// the fold read it before partText.
func contentOfAny(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case map[string]any:
		s, _ := c["text"].(string)
		return s
	case []any:
		var b strings.Builder
		for _, p := range c {
			b.WriteString(contentOfAny(p))
		}
		return b.String()
	}
	return ""
}

// FuzzPartText: a content's text read straight from its JSON is the text
// of the same JSON decoded into an interface, for any JSON that decodes.
func FuzzPartText(f *testing.F) {
	for _, s := range []string{`"a"`, `null`, `[{"text":"a"},"b",[{"text":"c"}],1,{"text":2},{"x":{"text":"no"}}]`,
		`{"text":"a","text":"b"}`, `{"text":"a","text":null}`, `{"te\u0078t":"\u00e9\n"}`, "{\"text\":\"\xff\"}", `[]`, `{}`, `[[[]]]`,
		` [ { "text" : "a" } , { "functionResponse" : { "response" : { "output" : "o" } } } ] `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v any
		if json.Unmarshal(b, &v) != nil {
			return
		}
		var got partText
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if want := contentOfAny(v); string(got) != want {
			t.Fatalf("%q: %q, decoded into an interface %q", b, got, want)
		}
	})
}

// TestHashIDIsFNV1a: saved chats hold their message ids hashed, so the
// hash must stay hash/fnv's 64-bit FNV-1a, whatever computes it.
func TestHashIDIsFNV1a(t *testing.T) {
	for _, id := range []string{"", "a", "c5ad9a5b-2f41-4b0e-9d7a-0c1d2e3f4a5b", "msg_01XYZ", "é\x00\xff"} {
		h := fnv.New64a()
		io.WriteString(h, id)
		if got, want := hashID(id), h.Sum64(); got != want {
			t.Errorf("hashID(%q) = %#x, want %#x", id, got, want)
		}
	}
}
