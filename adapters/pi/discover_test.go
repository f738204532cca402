package pi

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/session"
)

// Each state a session file can end in says its activity and the work in
// flight: a finished turn is idle waiting for input, a tool call without
// its result is a tool running, a prompt or tool results without a reply
// wait for the model.
func TestDiscoverTurnStates(t *testing.T) {
	root := t.TempDir()
	cwd := "/home/u/proj"
	writeSession(t, root, cwd, id1, modelChange(0), user(1, "Say hi"), say(2, "Hi.", "stop"))
	writeSession(t, root, cwd, id2, user(1, "Run the job"), callBash(2, "call_1", "python3 long.py"))
	writeSession(t, root, cwd, id3, user(1, "Run the job"), callBash(2, "call_1", "ls"), result(3, "call_1", "a b"))
	writeSession(t, root, "/other", id4, user(1, "first"), say(2, "", "error"))
	obs, _ := discover(t, newAdapter(root), nil)
	if len(obs) != 4 {
		t.Fatalf("%d sessions, want 4: %+v", len(obs), obs)
	}
	o := obs[id1]
	if o.Activity != session.ActivityIdle || o.WaitingFor == nil || o.WaitingFor.Kind != session.WaitingInput || len(o.InFlight) != 0 {
		t.Errorf("finished turn: %+v", o)
	}
	if o.Cwd != cwd || o.Title != "Say hi" || o.Root != root || o.Source != sessionPath(root, cwd, id1) || o.ActivitySource != session.SourceTranscript {
		t.Errorf("finished turn: cwd %q title %q root %q source %q", o.Cwd, o.Title, o.Root, o.Source)
	}
	o = obs[id2]
	if o.Activity != session.ActivityBusy || len(o.InFlight) != 1 || o.InFlight[0].Kind != session.ProblemOrphanedToolCall || o.InFlight[0].Key != "call_1" ||
		!strings.Contains(o.InFlight[0].Detail, "python3 long.py") {
		t.Errorf("tool running: %+v", o)
	}
	o = obs[id3]
	if o.Activity != session.ActivityBusy || len(o.InFlight) != 1 || o.InFlight[0].Kind != session.ProblemIncompleteMessage {
		t.Errorf("tool results without a reply: %+v", o)
	}
	o = obs[id4]
	if o.Activity != session.ActivityIdle || o.WaitingFor == nil || !strings.Contains(o.WaitingFor.Detail, "error") || o.Cwd != "/other" {
		t.Errorf("error end: %+v", o)
	}
}

// A session named by the user (session_info) takes that name as its title.
func TestTitleIsTheNameGiven(t *testing.T) {
	root := t.TempDir()
	p := writeSession(t, root, "/p", id1, user(1, "first prompt"), say(2, "ok", "stop"))
	a := newAdapter(root)
	if obs, _ := discover(t, a, nil); obs[id1].Title != "first prompt" {
		t.Fatalf("title %q", obs[id1].Title)
	}
	appendTo(t, p, entry(3, "session_info", map[string]any{"name": "My work"}), user(4, "second prompt"))
	if obs, _ := discover(t, a, nil); obs[id1].Title != "My work" || obs[id1].Activity != session.ActivityBusy {
		t.Fatalf("after naming: %+v", obs[id1])
	}
	if obs, _ := discover(t, newAdapter(root), nil); obs[id1].Title != "My work" {
		t.Fatalf("read whole: title %q", obs[id1].Title)
	}
}

// The differential test: a file read incrementally, pass after pass, as
// it grows by random lines (some torn mid-line between passes, some
// corrupt), is seen exactly as a fresh adapter reading it whole sees it,
// after every pass; and so after it is replaced by a shorter file.
func TestIncrementalReadEqualsWholeRead(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			root := t.TempDir()
			cwd := "/w/p"
			path := writeSession(t, root, cwd, id1)
			inc := New(Config{Roots: []string{root}, Host: &fakeHost{}, MaxTail: 1 << 30})
			var body strings.Builder
			body.WriteString(hdr(id1, cwd))
			pending := ""
			call := 0
			for step := 0; step < 40; step++ {
				var next string
				sec := 10 + step
				switch k := rng.IntN(11); k {
				case 0, 1:
					next = user(sec, fmt.Sprintf("prompt %d", step))
				case 2:
					call++
					next = callBash(sec, fmt.Sprintf("call_%d", call), "cmd")
				case 3:
					next = result(sec, fmt.Sprintf("call_%d", 1+rng.IntN(max(call, 1))), "out")
				case 4:
					next = say(sec, "done", []string{"stop", "error", "aborted"}[rng.IntN(3)])
				case 5:
					next = modelChange(sec)
				case 6:
					next = "{not json\n"
				case 7:
					next = entry(sec, "session_info", map[string]any{"name": fmt.Sprintf("name %d", step)})
				case 8:
					next = entry(sec, "checkpoint", nil) // drift
				case 9:
					next = say(sec, "hm", "paused") // drift, and a boundary
				default:
					next = entry(sec, "thinking_level_change", map[string]any{"thinkingLevel": "off"})
				}
				// Write the line, perhaps only its first part now.
				text := pending + next
				cut := len(text)
				if rng.IntN(4) == 0 {
					cut = rng.IntN(len(text))
				}
				appendTo(t, path, text[:cut])
				body.WriteString(text[:cut])
				pending = text[cut:] // the rest comes with the next step
				got, gotObs := discover(t, inc, nil)
				whole, wholeObs := discover(t, New(Config{Roots: []string{root}, Host: &fakeHost{}, MaxTail: 1 << 30}), nil)
				if !reflect.DeepEqual(got[id1], whole[id1]) || !reflect.DeepEqual(gotObs.Drift, wholeObs.Drift) {
					t.Fatalf("step %d: incremental\n%+v\nwhole\n%+v\nfile:\n%s", step, got[id1], whole[id1], body.String())
				}
			}
			// Replaced by a shorter file: read from its start.
			writeSession(t, root, cwd, id1, user(99, "again"))
			got, _ := discover(t, inc, nil)
			if o := got[id1]; o.Activity != session.ActivityBusy || o.Title != "again" {
				t.Fatalf("after replacing: %+v", o)
			}
		})
	}
}

// Corrupt lines are skipped with a warning naming the file, and the rest
// still says the state; a line cut off at the end is not read until it
// ends; an unreadable project folder is an error for that folder only,
// and its sessions keep what was known.
func TestBadInputWarnsAndLosesNothing(t *testing.T) {
	root := t.TempDir()
	p := writeSession(t, root, "/p", id1, "early garbage\n", user(1, "go"), "garbage line\n", callBash(2, "c1", "make"), `{"type":"message","message":{"ro`)
	writeSession(t, root, "/q", id2, user(1, "hi"), say(2, "hello", "stop"))
	a := newAdapter(root)
	obs, all := discover(t, a, nil)
	if o := obs[id1]; o.Activity != session.ActivityBusy || len(o.InFlight) != 1 || o.InFlight[0].Key != "c1" {
		t.Fatalf("around the corrupt line: %+v", o)
	}
	if len(all.Warnings) != 1 || all.Warnings[0].Input != p || !strings.Contains(all.Warnings[0].Err.Error(), "2 lines skipped: not JSON") {
		t.Fatalf("warnings %v", all.Warnings)
	}
	// The torn line ends: it is read.
	appendTo(t, p, `le":"toolResult","toolCallId":"c1"}}`+"\n")
	if obs, _ := discover(t, a, nil); obs[id1].InFlight[0].Kind != session.ProblemIncompleteMessage {
		t.Fatalf("after the torn line ended: %+v", obs[id1])
	}

	// The sessions folder cannot be read (a symlink loop stands in its
	// place: unreadable for root too): every session keeps what was known,
	// and the folder is an error.
	sessions := filepath.Join(root, "sessions")
	if err := os.Rename(sessions, sessions+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sessions", sessions); err != nil {
		t.Fatal(err)
	}
	a.RequestRescan()
	obs, all = discover(t, a, nil)
	if len(all.Errors) == 0 || all.Errors[0].Input != sessions {
		t.Fatalf("errors %v, want one for %s", all.Errors, sessions)
	}
	if o, ok := obs[id2]; !ok || o.Activity != session.ActivityIdle {
		t.Fatalf("a session of the unreadable folder: %+v", o)
	}
	if o, ok := obs[id1]; !ok || o.Activity != session.ActivityBusy {
		t.Fatalf("a session of the unreadable folder: %+v", o)
	}
	os.Remove(sessions)
	if err := os.Rename(sessions+".moved", sessions); err != nil {
		t.Fatal(err)
	}
	obs, all = discover(t, a, nil)
	if len(all.Errors) != 0 || len(obs) != 2 {
		t.Fatalf("readable again: errors %v, %d sessions", all.Errors, len(obs))
	}
}

// A huge file is read from its tail only, and a line longer than maxLine
// is skipped with a warning, not held.
func TestHugeFile(t *testing.T) {
	root := t.TempDir()
	var lines []string
	for i := 0; i < 2000; i++ {
		lines = append(lines, user(i, strings.Repeat("x", 2000)), say(i, "ok", "stop"))
	}
	lines = append(lines, user(3000, "last"), callBash(3001, "cz", "sleep"))
	writeSession(t, root, "/p", id1, lines...)
	a := New(Config{Roots: []string{root}, Host: &fakeHost{}, MaxTail: 1 << 20})
	obs, _ := discover(t, a, nil)
	if o := obs[id1]; o.Activity != session.ActivityBusy || len(o.InFlight) != 1 || o.Title != strings.Repeat("x", maxTitle-1)+"…" {
		t.Fatalf("huge file: %+v", o)
	}
}

// A restart with the saved state reads no file that did not change and
// says the same of every session; a grown one is read from its saved
// offset, a garbage entry's file afresh, a gone one's entry deleted.
func TestCheckpointRestore(t *testing.T) {
	root := t.TempDir()
	p1 := writeSession(t, root, "/p", id1, user(1, "a"), say(2, "b", "stop"))
	p2 := writeSession(t, root, "/p", id2, user(1, "a"), callBash(2, "c", "x"))
	p3 := writeSession(t, root, "/q", id3, user(1, "a"))
	// Settle the files' mtimes, so a stat is trusted.
	old := time.Now().Add(-time.Minute)
	for _, p := range []string{p1, p2, p3} {
		os.Chtimes(p, old, old)
	}
	a := newAdapter(root)
	before, _ := discover(t, a, nil)
	cp := a.Checkpoint()
	cp.Commit()
	if len(cp.Put) != 3 || len(cp.Del) != 0 {
		t.Fatalf("first checkpoint: %d entries, %d deletions", len(cp.Put), len(cp.Del))
	}
	if cp := a.Checkpoint(); len(cp.Put) != 0 || len(cp.Del) != 0 {
		t.Fatalf("nothing changed, yet %d entries, %d deletions", len(cp.Put), len(cp.Del))
	}

	b := newAdapter(root)
	b.Restore(cp.Put)
	after, _ := discover(t, b, nil)
	if !reflect.DeepEqual(after, before) {
		t.Fatalf("restored:\n%+v\nwant\n%+v", after, before)
	}
	if cp := b.Checkpoint(); len(cp.Put) != 0 {
		t.Errorf("a restart read %d unchanged files again", len(cp.Put))
	}

	appendTo(t, p1, user(3, "more"))
	if err := os.Remove(p3); err != nil {
		t.Fatal(err)
	}
	saved := map[string][]byte{}
	for k, v := range cp.Put {
		saved[k] = v
	}
	saved[p2] = []byte{checkpointFormat, 0xff}
	c := newAdapter(root)
	c.Restore(saved)
	obs, _ := discover(t, c, nil)
	if o := obs[id1]; o.Activity != session.ActivityBusy {
		t.Errorf("the grown file: %+v", o)
	}
	if o := obs[id2]; o.Activity != session.ActivityBusy || len(o.InFlight) != 1 {
		t.Errorf("the file with a garbage entry: %+v", o)
	}
	cp = c.Checkpoint()
	if len(cp.Put) != 2 || cp.Put[p1] == nil || cp.Put[p2] == nil || !reflect.DeepEqual(cp.Del, []string{p3}) {
		t.Errorf("saved %d entries, deleted %v", len(cp.Put), cp.Del)
	}
}

// Garbage never decodes into a state, and never panics.
func FuzzDecodeFileState(f *testing.F) {
	fs := &fileState{id: id1, size: 10, offset: 5, turn: turn{Pending: []call{{ID: "a"}}}}
	f.Add(encodeFileState(fs, defaultTail))
	f.Add([]byte{checkpointFormat})
	f.Fuzz(func(t *testing.T, b []byte) {
		p := "/r/sessions/--p--/2026-11-28T01-00-00-000Z_" + id1 + ".jsonl"
		if st, err := decodeFileState(p, b, defaultTail); err == nil && (st.offset > st.size || st.id != id1) {
			t.Fatalf("decoded an impossible state %+v", st)
		}
	})
}

// A file rewritten in place (as Pi does when it migrates a session it
// opens: same inode, longer) is read from its start, not continued from
// where the last read ended.
func TestRewrittenInPlaceIsReadAgain(t *testing.T) {
	root := t.TempDir()
	p := writeSession(t, root, "/p", id1, user(1, "old title"), say(2, "ok", "stop"))
	a := newAdapter(root)
	if obs, _ := discover(t, a, nil); obs[id1].Title != "old title" {
		t.Fatalf("title %q", obs[id1].Title)
	}
	fi, _ := os.Stat(p)
	body := hdr(id1, "/p") + user(1, "new title, written again in place") + say(2, "ok", "stop") + user(3, "more") + callBash(4, "c9", "x")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi2, _ := os.Stat(p); !os.SameFile(fi, fi2) || fi2.Size() <= fi.Size() {
		t.Fatal("not rewritten in place, longer")
	}
	obs, _ := discover(t, a, nil)
	if o := obs[id1]; o.Title != "new title, written again in place" || o.Activity != session.ActivityBusy || len(o.InFlight) != 1 {
		t.Fatalf("after the rewrite: %+v", o)
	}
}

// The files the real Pi 0.73.1 wrote (testdata/README.md) say what each
// ended in.
func TestRealFiles(t *testing.T) {
	root := t.TempDir()
	want := map[string]struct {
		act      session.Activity
		inFlight session.ProblemKind
		detail   string
		title    string
	}{
		"done.jsonl":      {session.ActivityIdle, "", "the turn ended", "Say hi"},
		"tool-done.jsonl": {session.ActivityIdle, "", "the turn ended", `RUN: python3 -c "import time; time.sleep(45)"; echo done`},
		"aborted.jsonl":   {session.ActivityIdle, "", "the turn was aborted", `RUN: python3 -c "import time; time.sleep(30)"; echo done`},
		"killed.jsonl":    {session.ActivityBusy, session.ProblemOrphanedToolCall, "", `RUN: python3 -c "import time; time.sleep(100)" KILLME; echo done`},
	}
	ids := map[string]string{}
	for name := range want {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		h, err := parseHeader(b[:strings.IndexByte(string(b), '\n')])
		if err != nil || h.Version != 3 {
			t.Fatalf("%s: header %+v %v", name, h, err)
		}
		ids[name] = h.ID
		p := sessionPath(root, h.Cwd, h.ID)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	obs, all := discover(t, newAdapter(root), nil)
	if len(all.Warnings) != 0 || len(all.Drift) != 0 {
		t.Errorf("warnings %v, drift %+v", all.Warnings, all.Drift)
	}
	for name, w := range want {
		o := obs[ids[name]]
		if o.Activity != w.act || o.Title != w.title {
			t.Errorf("%s: %s %q, want %s %q", name, o.Activity, o.Title, w.act, w.title)
		}
		if w.inFlight != "" && (len(o.InFlight) != 1 || o.InFlight[0].Kind != w.inFlight) {
			t.Errorf("%s: in flight %+v", name, o.InFlight)
		}
		if w.detail != "" && (o.WaitingFor == nil || o.WaitingFor.Detail != w.detail) {
			t.Errorf("%s: waiting for %+v", name, o.WaitingFor)
		}
	}
}

// The watch list holds the root, sessions/ and the project folders, the
// one changed last first.
func TestWatchPaths(t *testing.T) {
	root := t.TempDir()
	writeSession(t, root, "/a", id1)
	writeSession(t, root, "/b", id2)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Dir(sessionPath(root, "/a", id1)), old, old)
	a := newAdapter(root)
	if w := a.WatchPaths(); len(w) != 2 {
		t.Fatalf("before a pass: %v", w)
	}
	discover(t, a, nil)
	want := []string{root, filepath.Join(root, "sessions"), filepath.Dir(sessionPath(root, "/b", id2)), filepath.Dir(sessionPath(root, "/a", id1))}
	if w := a.WatchPaths(); !reflect.DeepEqual(w, want) {
		t.Fatalf("watch %v, want %v", w, want)
	}
}

// An appended line longer than maxLine is skipped whole, counted in a
// warning, and the lines after it still read.
func TestLongLineSkipped(t *testing.T) {
	defer func(n int) { maxLine = n }(maxLine)
	maxLine = 1 << 10
	root := t.TempDir()
	p := writeSession(t, root, "/p", id1, user(1, "go"), callBash(2, "c1", "x"))
	a := newAdapter(root)
	discover(t, a, nil)
	appendTo(t, p, result(3, "c1", strings.Repeat("y", 5000)), callBash(4, "c2", "z"))
	obs, all := discover(t, a, nil)
	if o := obs[id1]; o.Activity != session.ActivityBusy || len(o.InFlight) != 2 || o.InFlight[1].Key != "c2" {
		t.Fatalf("after the long line: %+v", o)
	}
	if len(all.Warnings) != 1 || !strings.Contains(all.Warnings[0].Err.Error(), "1 lines skipped: longer than 1024 bytes") {
		t.Fatalf("warnings %v", all.Warnings)
	}
}

// An idle pass hands out the last quiet set without building anything,
// and only while nothing it was built from changed: after every change
// below the sessions are a fresh adapter's, and a pass with no change
// after it returns the very same set and no list.
func TestIdlePassIsTheLastOne(t *testing.T) {
	root := t.TempDir()
	cwd := "/home/u/proj"
	p1 := writeSession(t, root, cwd, id1, user(1, "Say hi"), say(2, "Hi.", "stop"))
	writeSession(t, root, cwd, id2, user(1, "Run the job"), callBash(2, "call_1", "python3 long.py"))
	a := newAdapter(root)
	for _, step := range []struct {
		what   string
		change func()
	}{
		{"the first pass", func() {}},
		{"a session grew", func() { appendTo(t, p1, user(3, "And again"), say(4, "Again.", "stop")) }},
		{"a new session", func() { writeSession(t, root, "/other", id3, user(1, "first"), say(2, "", "error")) }},
		{"a session gone", func() { os.Remove(p1) }},
		{"every session gone", func() { os.RemoveAll(filepath.Join(root, "sessions")) }},
	} {
		step.change()
		inc, obs := discover(t, a, nil)
		if fresh, _ := discover(t, newAdapter(root), nil); !reflect.DeepEqual(inc, fresh) {
			t.Fatalf("%s: the pass saw\n%+v\na fresh adapter\n%+v", step.what, inc, fresh)
		}
		_, again := discover(t, a, nil)
		if again.Quiet != obs.Quiet || len(again.Sessions) != 0 {
			t.Fatalf("%s, then nothing: a new set (%v) or a list of %d", step.what, again.Quiet != obs.Quiet, len(again.Sessions))
		}
	}
}
