package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// tree is a Gemini CLI data folder made for a test, laid out as 0.61.0
// lays it out (docs/agents/gemini.md).
type tree struct {
	t    testing.TB
	root string // <home>/.gemini
}

func newTree(t testing.TB) *tree {
	root := filepath.Join(t.TempDir(), ".gemini")
	if err := os.MkdirAll(filepath.Join(root, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	return &tree{t: t, root: root}
}

// project registers folder under name in projects.json and makes its
// tmp/<name>/ with .project_root.
func (tr *tree) project(name, folder string) string {
	p := filepath.Join(tr.root, "projects.json")
	doc := map[string]map[string]string{"projects": {}}
	if b, err := os.ReadFile(p); err == nil {
		json.Unmarshal(b, &doc)
	}
	doc["projects"][folder] = name
	b, _ := json.Marshal(doc)
	tr.write(p, b)
	dir := filepath.Join(tr.root, "tmp", name)
	tr.write(filepath.Join(dir, ".project_root"), []byte(folder))
	return filepath.Join(dir, "chats")
}

func (tr *tree) write(path string, b []byte) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *tree) appendTo(path string, b []byte) {
	tr.t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tr.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		tr.t.Fatal(err)
	}
}

func byID(obs []adapters.Observed) map[string]adapters.Observed {
	out := map[string]adapters.Observed{}
	for _, o := range obs {
		out[o.UpstreamID] = o
	}
	return out
}

func names(errs []adapters.InputError) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Error())
	}
	return strings.Join(out, "\n")
}

// TestDiscoverLayout: every kind of chat on disk is found, each named once,
// with its folder, title and turn state; bad input is a warning or an
// input error, and loses nothing else.
func TestDiscoverLayout(t *testing.T) {
	tr := newTree(t)
	folder := "/work/some project"
	chats := tr.project("some-project", folder)
	hash := hashOf(folder)

	busy := newLines().header("11111111-aaaa-bbbb-cccc-000000000001", hash).user("u1", "run the tests").gemini("g1", "")
	tr.write(filepath.Join(chats, "session-2026-11-27T10-00-11111111.jsonl"), busy.b.Bytes())

	idle := newLines().header("22222222-aaaa-bbbb-cccc-000000000002", hash).user("u1", "hello").gemini("g1", "hi")
	tr.write(filepath.Join(chats, "session-2026-11-27T10-05-22222222.jsonl"), idle.b.Bytes())
	// A resume of it wrote a second chat of that id, holding only the
	// session context, started later: the session is the first one.
	stray := newLines()
	stray.now = stray.now.Add(time.Hour)
	stray.header("22222222-aaaa-bbbb-cccc-000000000002", hash).line(map[string]any{"$set": map[string]any{"messages": []any{
		map[string]any{"id": "ctx", "type": "user", "content": []any{map[string]any{"text": "<session_context>x"}}}}}})
	tr.write(filepath.Join(chats, "session-2026-11-27T11-05-22222222.jsonl"), stray.b.Bytes())

	// An older whole-file chat.
	legacy, _ := json.Marshal(map[string]any{"sessionId": "33333333-aaaa-bbbb-cccc-000000000003", "projectHash": hash,
		"startTime": "2025-08-01T10:00:00Z", "lastUpdated": "2025-08-01T10:01:00Z",
		"messages": []any{map[string]any{"id": "m1", "type": "user", "content": "old question", "timestamp": "2025-08-01T10:00:00Z"},
			map[string]any{"id": "m2", "type": "gemini", "content": "old answer", "timestamp": "2025-08-01T10:01:00Z"}}})
	tr.write(filepath.Join(chats, "session-2025-08-01T10-00-33333333.json"), legacy)

	// A subagent's chat under its parent's id.
	sub := newLines().header("44444444-aaaa-bbbb-cccc-000000000004", hash).user("s1", "investigate")
	sub.b.Reset()
	sub.line(map[string]any{"sessionId": "44444444-aaaa-bbbb-cccc-000000000004", "projectHash": hash, "kind": "subagent", "startTime": sub.ts()}).user("s1", "investigate")
	tr.write(filepath.Join(chats, "11111111-aaaa-bbbb-cccc-000000000001", "44444444-aaaa-bbbb-cccc-000000000004.jsonl"), sub.b.Bytes())

	// Bad input: corrupt lines inside a good chat, a chat with no header,
	// a whole-file chat that is not JSON, and a chats/ that is a file.
	bad := newLines().header("55555555-aaaa-bbbb-cccc-000000000005", hash).user("u1", "a")
	bad.b.WriteString("{\"id\": \"x\", \"trunc\n\x00\x01garbage\n")
	bad.gemini("g1", "b")
	tr.write(filepath.Join(chats, "session-2026-11-27T12-00-55555555.jsonl"), bad.b.Bytes())
	tr.write(filepath.Join(chats, "session-2026-11-27T12-01-66666666.jsonl"), []byte("[1,2,3]\n"))
	tr.write(filepath.Join(chats, "session-2026-11-27T12-02-77777777.json"), []byte("{not json"))
	tr.write(filepath.Join(tr.root, "tmp", "broken", "chats"), []byte("a file"))

	a := New(Config{Roots: []string{tr.root}})
	obs, err := a.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := byID(obs.All())
	if len(got) != 5 {
		t.Fatalf("%d sessions, want 5: %+v", len(got), obs.All())
	}
	b := got["11111111-aaaa-bbbb-cccc-000000000001"]
	if b.Cwd != folder || b.Title != "run the tests" || b.Activity != session.ActivityBusy || len(b.InFlight) != 1 || b.Root != tr.root {
		t.Fatalf("busy session: %+v", b)
	}
	if i := got["22222222-aaaa-bbbb-cccc-000000000002"]; i.Activity != session.ActivityIdle || !strings.HasSuffix(i.Source, "T10-05-22222222.jsonl") || i.Title != "hello" {
		t.Fatalf("idle session: %+v", i)
	}
	if l := got["33333333-aaaa-bbbb-cccc-000000000003"]; l.Activity != session.ActivityIdle || l.Title != "old question" || l.Cwd != folder {
		t.Fatalf("legacy session: %+v", l)
	}
	if s := got["44444444-aaaa-bbbb-cccc-000000000004"]; s.Activity != session.ActivityBusy {
		t.Fatalf("subagent session: %+v", s)
	}
	if s := got["55555555-aaaa-bbbb-cccc-000000000005"]; s.Activity != session.ActivityIdle {
		t.Fatalf("session with bad lines: %+v", s)
	}
	w := names(obs.Warnings)
	for _, want := range []string{"55555555.jsonl: 2 lines skipped", "66666666.jsonl: no session header", "77777777.json: not a chat"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if e := names(obs.Errors); !strings.Contains(e, filepath.Join("broken", "chats")) || len(obs.Errors) != 1 {
		t.Errorf("errors: %s", e)
	}
}

// TestDiscoverAppendedAndReplaced: a chat that grew is read from where the
// last read ended; one replaced at its path is read from its start.
func TestDiscoverAppendedAndReplaced(t *testing.T) {
	tr := newTree(t)
	chats := tr.project("p", "/p")
	path := filepath.Join(chats, "session-2026-11-27T10-00-aaaaaaaa.jsonl")
	l := newLines().header("aaaaaaaa-0000-0000-0000-000000000000", hashOf("/p")).user("u1", "first")
	tr.write(path, l.b.Bytes())
	a := New(Config{Roots: []string{tr.root}})
	look := func() adapters.Observed {
		t.Helper()
		obs, err := a.Discover(context.Background(), nil)
		if err != nil || len(obs.All()) != 1 {
			t.Fatalf("%v %+v", err, obs)
		}
		return obs.All()[0]
	}
	if o := look(); o.Activity != session.ActivityBusy {
		t.Fatalf("%+v", o)
	}
	off := a.fileOf(path).offset
	more := newLines()
	more.gemini("g1", "answer")
	tr.appendTo(path, more.b.Bytes())
	if o := look(); o.Activity != session.ActivityIdle {
		t.Fatalf("after append: %+v", o)
	}
	if f := a.fileOf(path); f.offset != off+int64(more.b.Len()) {
		t.Fatalf("offset %d, want %d", f.offset, off+int64(more.b.Len()))
	}
	// Replaced by another file (a new inode), shorter: read from the start.
	r := newLines().header("aaaaaaaa-0000-0000-0000-000000000000", hashOf("/p")).user("u9", "replaced")
	tmp := path + ".new"
	tr.write(tmp, r.b.Bytes())
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if o := look(); o.Activity != session.ActivityBusy || o.Title != "replaced" {
		t.Fatalf("after replace: %+v", o)
	}
}

// TestCheckpointRestore: a restart restores what was folded and reads no
// chat that did not change; one that grew meanwhile is read from the
// saved offset, and the observations are those of a fresh read.
func TestCheckpointRestore(t *testing.T) {
	tr := newTree(t)
	chats := tr.project("p", "/p")
	var paths []string
	for i, id := range []string{"aaaaaaaa-0000-0000-0000-000000000001", "bbbbbbbb-0000-0000-0000-000000000002"} {
		l := newLines().header(id, hashOf("/p")).user("u1", "q")
		if i == 0 {
			l.gemini("g1", "answer")
		} else {
			l.gemini("g1", "", l.call("c1", statusExecuting, "make"))
		}
		p := filepath.Join(chats, "session-2026-11-27T10-0"+string(rune('0'+i))+"-"+id[:8]+".jsonl")
		tr.write(p, l.b.Bytes())
		paths = append(paths, p)
	}
	a := New(Config{Roots: []string{tr.root}})
	first, err := a.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	cp := a.Checkpoint()
	if len(cp.Put) != 2 || len(cp.Del) != 0 {
		t.Fatalf("checkpoint %d puts, %d dels", len(cp.Put), len(cp.Del))
	}
	cp.Commit()
	if again := a.Checkpoint(); len(again.Put) != 0 || len(again.Del) != 0 {
		t.Fatalf("an unchanged state checkpoints again: %+v", again)
	}

	b := New(Config{Roots: []string{tr.root}})
	b.Restore(cp.Put)
	gen := b.gen
	second, err := b.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.gen != gen {
		t.Fatalf("a restart read %d unchanged chats again", b.gen-gen)
	}
	if !sameObs(first.All(), second.All()) {
		t.Fatalf("restored\n%+v\nfresh\n%+v", second.All(), first.All())
	}

	// One grows while sessiond is down: read from the saved offset.
	c := New(Config{Roots: []string{tr.root}})
	c.Restore(cp.Put)
	more := newLines()
	more.gemini("g2", "done")
	tr.appendTo(paths[0], more.b.Bytes())
	gen = c.gen
	third, err := c.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.gen != gen+1 {
		t.Fatalf("%d reads, want 1", c.gen-gen)
	}
	fresh, _ := New(Config{Roots: []string{tr.root}}).Discover(context.Background(), nil)
	if !sameObs(third.All(), fresh.All()) {
		t.Fatalf("restored and grown\n%+v\nfresh\n%+v", third.All(), fresh.All())
	}
	// Garbage entries are ignored (their chats read again), never a panic.
	d := New(Config{Roots: []string{tr.root}})
	d.Restore(map[string][]byte{paths[0]: []byte("garbage"), paths[1]: {checkpointFormat, 0xff}, "/x/y": cp.Put[paths[0]]})
	if obs, err := d.Discover(context.Background(), nil); err != nil || len(obs.All()) != 2 {
		t.Fatalf("%v %+v", err, obs)
	}
	if del := d.Checkpoint().Del; len(del) != 1 || del[0] != "/x/y" {
		t.Fatalf("del %v", del)
	}
}

func sameObs(x, y []adapters.Observed) bool {
	a, _ := json.Marshal(x)
	b, _ := json.Marshal(y)
	return string(a) == string(b)
}

// FuzzCheckpointDecode: no saved entry makes Restore panic or keep an
// entry out of range.
func FuzzCheckpointDecode(f *testing.F) {
	st := &fileState{c: chat{ID: "s", Msgs: []message{{ID: "m", Type: "gemini", Calls: []call{{ID: "c"}}}}, Seen: idSet{1}}, size: 10, offset: 5}
	f.Add(encodeFileState(st, defaultMaxWhole))
	f.Add([]byte{checkpointFormat})
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, err := decodeFileState("/h/.gemini/tmp/p/chats/session-x.jsonl", b, defaultMaxWhole)
		if err == nil && (fs.offset > fs.size || len(fs.c.Msgs) > maxKept) {
			t.Fatalf("out of range: %+v", fs)
		}
	})
}

// An idle pass hands out the last quiet set without building anything,
// and only while nothing it was built from changed: after every change
// below the sessions are a fresh adapter's, and a pass with no change
// after it returns the very same set and no list.
func TestIdlePassIsTheLastOne(t *testing.T) {
	tr := newTree(t)
	chats := tr.project("p", "/p")
	chat := func(i int) string {
		return filepath.Join(chats, fmt.Sprintf("session-2026-11-27T10-0%d-%08d.jsonl", i, i))
	}
	id := func(i int) string { return fmt.Sprintf("%08d-0000-0000-0000-000000000000", i) }
	for i := range 3 {
		tr.write(chat(i), newLines().header(id(i), hashOf("/p")).user("u1", "q").gemini("g1", "a").b.Bytes())
	}
	a := New(Config{Roots: []string{tr.root}})
	ctx := context.Background()
	for _, step := range []struct {
		what   string
		change func()
	}{
		{"the first pass", func() {}},
		{"a chat grew", func() { tr.appendTo(chat(1), newLines().user("u2", "more").b.Bytes()) }},
		{"a new chat", func() {
			tr.write(chat(3), newLines().header(id(3), hashOf("/p")).user("u1", "new").b.Bytes())
		}},
		{"a chat gone", func() { os.Remove(chat(0)) }},
		{"projects.json names another folder", func() {
			tr.write(filepath.Join(tr.root, "projects.json"), []byte(`{"projects":{"/q":"p"}}`))
		}},
		{"projects.json gone", func() { os.Remove(filepath.Join(tr.root, "projects.json")) }},
	} {
		step.change()
		obs, err := a.Discover(ctx, nil)
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		fresh, err := New(Config{Roots: []string{tr.root}}).Discover(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !sameObs(obs.All(), fresh.All()) {
			t.Fatalf("%s: the pass saw\n%+v\na fresh adapter\n%+v", step.what, obs.All(), fresh.All())
		}
		// Nothing changes: the same set, nothing built.
		again, err := a.Discover(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if again.Quiet != obs.Quiet || len(again.Sessions) != 0 {
			t.Fatalf("%s, then nothing: a new set (%v) or a list of %d", step.what, again.Quiet != obs.Quiet, len(again.Sessions))
		}
	}
}
