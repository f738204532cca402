package qwen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// The fixtures' session ids.
const (
	idDone   = "7c6e4170-0912-4eb6-8b9e-78e819a60800"
	idKilled = "29653b58-54a3-4a1e-8a81-f1c81a3eba94"
	idTUI    = "ff708198-4cf6-4f41-aec0-ef07533e50ee"
)

var fixtureIDs = map[string]string{
	"headless-done.jsonl":             idDone,
	"headless-killed-mid-tool.jsonl":  idKilled,
	"tui-cancelled-then-killed.jsonl": idTUI,
}

// home makes a Qwen home with the fixtures as chats of one project, and
// returns it.
func home(t *testing.T, files ...string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), ".qwen")
	chats := filepath.Join(root, "projects", "-tmp-proj", "chats")
	if err := os.MkdirAll(chats, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(chats, fixtureIDs[f]+".jsonl"), fixture(t, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func chatPath(root, id string) string {
	return filepath.Join(root, "projects", "-tmp-proj", "chats", id+".jsonl")
}

// discover runs a pass with snap and returns the sessions by id.
func discoverSnap(t *testing.T, a *Adapter, snap *proc.Snapshot) (map[string]adapters.Observed, adapters.Observation) {
	t.Helper()
	obs, err := a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]adapters.Observed{}
	for _, o := range obs.All() {
		out[o.UpstreamID] = o
	}
	return out, obs
}

func discover(t *testing.T, a *Adapter) map[string]adapters.Observed {
	t.Helper()
	m, _ := discoverSnap(t, a, nil)
	return m
}

func checkpoint(a *Adapter) (put map[string][]byte, del []string) {
	cp := a.Checkpoint()
	cp.Commit()
	sort.Strings(cp.Del)
	return cp.Put, cp.Del
}

func TestDiscoverFixtures(t *testing.T) {
	root := home(t, "headless-done.jsonl", "headless-killed-mid-tool.jsonl", "tui-cancelled-then-killed.jsonl")
	a := New(Config{Roots: []string{root}})
	got := discover(t, a)
	if len(got) != 3 {
		t.Fatalf("%d sessions: %+v", len(got), got)
	}
	done := got[idDone]
	if done.Activity != session.ActivityIdle || len(done.InFlight) != 0 || done.Title != "Say hello" || done.Cwd != "/tmp/qx/home1/proj" ||
		done.Root != root || done.Source != chatPath(root, idDone) || done.ActivitySource != session.SourceTranscript || done.LastActivity.IsZero() {
		t.Errorf("done: %+v", done)
	}
	for _, id := range []string{idKilled, idTUI} {
		o := got[id]
		if o.Activity != session.ActivityBusy || len(o.InFlight) != 1 || o.InFlight[0].Kind != session.ProblemOrphanedToolCall ||
			!strings.Contains(o.InFlight[0].Detail, "run_shell_command") || !strings.Contains(o.InFlight[0].Detail, "python3") {
			t.Errorf("%s: %+v", id, o)
		}
	}
	if w := a.warnings(); len(w) != 0 {
		t.Errorf("warnings: %v", w)
	}
}

// A session's chat read as it grows (every pass reading only what was
// appended, lines torn between passes) is observed as a fresh adapter
// reading it whole observes it; and only the appended bytes are read.
func TestDiscoverIncrementalEqualsFresh(t *testing.T) {
	root := home(t)
	path := chatPath(root, idTUI)
	data := fixture(t, "tui-cancelled-then-killed.jsonl")
	a := New(Config{Roots: []string{root}})
	for cut := 0; cut <= len(data); cut += 777 {
		if cut+777 > len(data) {
			cut = len(data)
		}
		// Append in place: the same inode, grown.
		fh, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteAt(data[:cut], 0)
		fh.Close()
		inc := discover(t, a)
		fresh := discover(t, New(Config{Roots: []string{root}}))
		if !reflect.DeepEqual(inc, fresh) {
			t.Fatalf("at %d bytes, incremental:\n%+v\nfresh:\n%+v", cut, inc, fresh)
		}
		f := a.roots[root].files[path]
		if want := int64(bytes.LastIndexByte(data[:cut], '\n') + 1); f.offset != want {
			t.Fatalf("at %d bytes: offset %d, want %d", cut, f.offset, want)
		}
		if cut == len(data) {
			break
		}
	}
	if a.bytesRead > int64(len(data))+int64(len(data)/777+1)*2048 {
		t.Errorf("read %d bytes for a %d-byte chat grown in steps: more than the appended bytes", a.bytesRead, len(data))
	}
}

// A chat replaced at its path (a new inode, here shorter) is read from its
// start, not continued.
func TestDiscoverReplacedChat(t *testing.T) {
	root := home(t, "headless-killed-mid-tool.jsonl")
	a := New(Config{Roots: []string{root}})
	if o := discover(t, a)[idKilled]; o.Activity != session.ActivityBusy {
		t.Fatalf("before: %+v", o)
	}
	path := chatPath(root, idKilled)
	done := bytes.ReplaceAll(fixture(t, "headless-done.jsonl"), []byte(idDone), []byte(idKilled))
	if err := os.WriteFile(path+".new", done, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	got := discover(t, a)[idKilled]
	fresh := discover(t, New(Config{Roots: []string{root}}))[idKilled]
	if got.Activity != session.ActivityIdle || got.Title != "Say hello" || !reflect.DeepEqual(got, fresh) {
		t.Fatalf("after the replacement: %+v\nfresh: %+v", got, fresh)
	}
}

// A restart with the saved state reads no chat that did not change and
// says the same of every session; one that grew is read from the saved
// offset; one that went is deleted; an unusable entry is read afresh.
func TestCheckpointRestore(t *testing.T) {
	root := home(t, "headless-done.jsonl", "headless-killed-mid-tool.jsonl", "tui-cancelled-then-killed.jsonl")
	a := New(Config{Roots: []string{root}})
	before := discover(t, a)
	put, del := checkpoint(a)
	if len(put) != 3 || len(del) != 0 {
		t.Fatalf("first checkpoint: %d entries, %d deletions", len(put), len(del))
	}
	if put, del := checkpoint(a); len(put) != 0 || len(del) != 0 {
		t.Fatalf("nothing changed, yet the checkpoint has %d entries, %d deletions", len(put), len(del))
	}

	b := New(Config{Roots: []string{root}})
	b.Restore(put)
	if after := discover(t, b); !reflect.DeepEqual(after, before) {
		t.Fatalf("restored:\n%+v\nwant\n%+v", after, before)
	}
	if b.reads != 0 {
		t.Errorf("a restart read %d unchanged chats again", b.reads)
	}
	if put, _ := checkpoint(b); len(put) != 0 {
		t.Errorf("a restart saved %d unchanged chats again", len(put))
	}

	// One grows by an answer, one goes away, one entry is garbage.
	grown := chatPath(root, idKilled)
	fh, err := os.OpenFile(grown, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := fh.Seek(0, 2)
	fh.WriteString(`{"uuid":"x1","sessionId":"` + idKilled + `","timestamp":"2026-11-28T01:00:00.000Z","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"call_0_1795826902092","name":"run_shell_command","response":{"output":"done"}}}]}}` + "\n")
	fh.WriteString(`{"uuid":"x2","sessionId":"` + idKilled + `","timestamp":"2026-11-28T01:00:01.000Z","type":"assistant","message":{"role":"model","parts":[{"text":"ok"}]}}` + "\n")
	fh.Close()
	if err := os.Remove(chatPath(root, idDone)); err != nil {
		t.Fatal(err)
	}
	saved := map[string][]byte{}
	for k, v := range put {
		saved[k] = v
	}
	saved[chatPath(root, idTUI)] = []byte{checkpointFormat, 0xff}
	c := New(Config{Roots: []string{root}})
	c.Restore(saved)
	obs := discover(t, c)
	if o := obs[idKilled]; o.Activity != session.ActivityIdle || len(o.InFlight) != 0 {
		t.Errorf("the grown chat: %+v, want idle", o)
	}
	if o := obs[idTUI]; o.Activity != session.ActivityBusy || len(o.InFlight) != 1 {
		t.Errorf("the chat with a garbage entry, read again: %+v", o)
	}
	fi, _ := os.Stat(grown)
	tuiSize := int64(len(fixture(t, "tui-cancelled-then-killed.jsonl")))
	if want := fi.Size() - size + tuiSize; c.bytesRead != want {
		t.Errorf("read %d bytes, want %d: the appended bytes and the chat read afresh", c.bytesRead, want)
	}
	put, del = checkpoint(c)
	if len(put) != 2 || put[grown] == nil || put[chatPath(root, idTUI)] == nil {
		t.Errorf("saved again: %d entries, want the grown one and the one read afresh", len(put))
	}
	if want := []string{chatPath(root, idDone)}; !reflect.DeepEqual(del, want) {
		t.Errorf("deleted %q, want %q", del, want)
	}
}

// Bad input: a chats "folder" that is a file, a project folder that
// cannot be listed, a chat with bad and long lines, a registry entry that
// is garbage. Each is named (an error or a warning), the rest is read.
func TestDiscoverBadInput(t *testing.T) {
	root := home(t, "headless-done.jsonl")
	bad := filepath.Join(root, "projects", "-tmp-other")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "chats"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := fixture(t, "headless-killed-mid-tool.jsonl")
	b = append([]byte("garbage line\n"+strings.Repeat("z", 5000)+"\n"), b...)
	if err := os.WriteFile(chatPath(root, idKilled), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "sessions", "123.json"), []byte("{garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := New(Config{Roots: []string{root}, MaxLine: 4000})
	got, obs := discoverSnap(t, a, nil)
	if len(got) != 2 || got[idKilled].Activity != session.ActivityBusy || got[idDone].Activity != session.ActivityIdle {
		t.Fatalf("sessions %+v", got)
	}
	if len(obs.Errors) != 1 || obs.Errors[0].Input != filepath.Join(bad, "chats") {
		t.Errorf("errors %v, want the chats file", obs.Errors)
	}
	var ws []string
	for _, w := range obs.Warnings {
		ws = append(ws, w.Error())
	}
	all := strings.Join(ws, "\n")
	if len(obs.Warnings) != 2 || !strings.Contains(all, "1 lines skipped: not a JSON record") || !strings.Contains(all, "1 lines skipped: longer than 4000 bytes") ||
		!strings.Contains(all, "123.json") {
		t.Errorf("warnings:\n%s", all)
	}
}

// A home that does not exist is no error (Qwen never ran); one that is
// not a folder is.
func TestDiscoverRoots(t *testing.T) {
	a := New(Config{Roots: []string{filepath.Join(t.TempDir(), "none")}})
	if got := discover(t, a); len(got) != 0 {
		t.Errorf("%+v", got)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := New(Config{Roots: []string{f}}).Discover(context.Background(), nil); err == nil {
		t.Error("a home that is a file: no error")
	}
}

// A cold chat (not written for ColdAfter, no live qwen in its cwd) is not
// stat'ed between full rescans; a full rescan reads it.
func TestColdChatAtFullRescan(t *testing.T) {
	root := home(t, "headless-done.jsonl")
	a := New(Config{Roots: []string{root}, ColdAfter: time.Millisecond})
	discover(t, a)
	time.Sleep(5 * time.Millisecond)
	fh, _ := os.OpenFile(chatPath(root, idDone), os.O_APPEND|os.O_WRONLY, 0)
	fh.WriteString(`{"uuid":"n","sessionId":"` + idDone + `","timestamp":"2026-11-28T02:00:00.000Z","type":"user","message":{"role":"user","parts":[{"text":"again"}]}}` + "\n")
	fh.Close()
	os.Chtimes(chatPath(root, idDone), time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
	if o := discover(t, a)[idDone]; o.Activity != session.ActivityIdle {
		t.Fatalf("a cold chat was read between rescans: %+v", o)
	}
	a.RequestRescan()
	if o := discover(t, a)[idDone]; o.Activity != session.ActivityBusy {
		t.Fatalf("a full rescan did not read the cold chat: %+v", o)
	}
}

// An idle pass hands out the last quiet set without building anything,
// and only while nothing it was built from changed: after every change
// below the sessions are a fresh adapter's, and a pass with no change
// after it returns the very same set and no list.
func TestIdlePassIsTheLastOne(t *testing.T) {
	root := home(t, "headless-done.jsonl", "headless-killed-mid-tool.jsonl")
	a := New(Config{Roots: []string{root}})
	for _, step := range []struct {
		what   string
		change func()
	}{
		{"the first pass", func() {}},
		{"a new chat", func() {
			os.WriteFile(chatPath(root, idTUI), fixture(t, "tui-cancelled-then-killed.jsonl"), 0o644)
		}},
		{"a chat gone", func() { os.Remove(chatPath(root, idDone)) }},
		{"a chat replaced", func() {
			done := bytes.ReplaceAll(fixture(t, "headless-done.jsonl"), []byte(idDone), []byte(idKilled))
			os.WriteFile(chatPath(root, idKilled)+".new", done, 0o644)
			os.Rename(chatPath(root, idKilled)+".new", chatPath(root, idKilled))
		}},
		{"the project gone", func() { os.RemoveAll(filepath.Join(root, "projects")) }},
	} {
		step.change()
		inc, obs := discoverSnap(t, a, nil)
		if fresh := discover(t, New(Config{Roots: []string{root}})); !reflect.DeepEqual(inc, fresh) {
			t.Fatalf("%s: the pass saw\n%+v\na fresh adapter\n%+v", step.what, inc, fresh)
		}
		_, again := discoverSnap(t, a, nil)
		if again.Quiet != obs.Quiet || len(again.Sessions) != 0 {
			t.Fatalf("%s, then nothing: a new set (%v) or a list of %d", step.what, again.Quiet != obs.Quiet, len(again.Sessions))
		}
	}
}
