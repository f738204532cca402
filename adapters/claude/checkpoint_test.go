package claude

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/session"
)

// denseRoot writes n dense transcripts (every ending claudetest.GenDense
// makes: a reply, a crash mid tool call, a trailing prompt, an interrupt, a
// torn line) into a root and returns it.
func denseRoot(t *testing.T, n int, seed uint64) *claudetest.Root {
	t.Helper()
	r, _ := newRoot(t)
	rng := rand.New(rand.NewPCG(seed, seed+1))
	for i := range n {
		data := claudetest.GenDense(rng, 2<<10+rng.IntN(200<<10))
		p := filepath.Join(r.Dir, "projects", "-p"+string(rune('a'+i%5)), claudetest.NewSessionID()+".jsonl")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// allFiles returns the adapter's transcript states by path.
func allFiles(a *Adapter) map[string]*fileState {
	out := map[string]*fileState{}
	for _, r := range a.roots {
		for _, p := range r.projects {
			for _, f := range p.files {
				out[f.path] = f
			}
		}
	}
	return out
}

// Every field of a transcript's state survives the codec: DeepEqual also
// compares the unexported fields, so a field added to fileState or summary
// and forgotten by the codec fails here.
func TestCheckpointCodecRoundTrip(t *testing.T) {
	r := denseRoot(t, 60, 7)
	a := newTestAdapter(t, &testFS{}, r.Dir)
	discover(t, a, nil)
	files := allFiles(a)
	if len(files) != 60 {
		t.Fatalf("%d transcripts read, want 60", len(files))
	}
	states := map[transcript.TurnState]int{}
	for path, f := range files {
		b := encodeFileState(f, a.cfg.WindowBytes, a.cfg.MaxLineBytes)
		got, err := decodeFileState(path, b, a.cfg.WindowBytes, a.cfg.MaxLineBytes)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		want := *f
		want.gen = 0                   // a count of this run's reads, not saved
		want.obs, want.obsGen = nil, 0 // a cache of this run, not saved
		want.serial, want.dir = 0, ""  // given when listed
		want.cwd, want.cwdOf = "", ""  // a cache of this run, made on use
		if len(want.sum.Pending) == 0 {
			want.sum.Pending = nil // empty and nil mean the same
		}
		if !reflect.DeepEqual(got, &want) {
			t.Fatalf("%s: round trip differs\n got %+v\nwant %+v", path, got, &want)
		}
		if again := encodeFileState(got, a.cfg.WindowBytes, a.cfg.MaxLineBytes); !bytes.Equal(again, b) {
			t.Fatalf("%s: re-encoding differs", path)
		}
		states[f.sum.State]++
	}
	// The data covers what is saved: several turn states, pending calls.
	if len(states) < 3 {
		t.Fatalf("turn states covered: %v", states)
	}
}

func TestCheckpointRefusesOtherConfigAndGarbage(t *testing.T) {
	r := denseRoot(t, 3, 8)
	a := newTestAdapter(t, &testFS{}, r.Dir)
	discover(t, a, nil)
	for path, f := range allFiles(a) {
		b := encodeFileState(f, a.cfg.WindowBytes, a.cfg.MaxLineBytes)
		if _, err := decodeFileState(path, b, a.cfg.WindowBytes/2, a.cfg.MaxLineBytes); err == nil {
			t.Error("an entry saved with another window was used")
		}
		if _, err := decodeFileState("relative.jsonl", b, a.cfg.WindowBytes, a.cfg.MaxLineBytes); err == nil {
			t.Error("a relative path was used")
		}
		other := append([]byte{checkpointFormat + 1}, b[1:]...)
		if _, err := decodeFileState(path, other, a.cfg.WindowBytes, a.cfg.MaxLineBytes); err == nil {
			t.Error("an entry of another format was used")
		}
		for n := range len(b) {
			if _, err := decodeFileState(path, b[:n], a.cfg.WindowBytes, a.cfg.MaxLineBytes); err == nil {
				t.Fatalf("an entry cut to %d of %d bytes was used", n, len(b))
			}
		}
		if _, err := decodeFileState(path, append(b, 0), a.cfg.WindowBytes, a.cfg.MaxLineBytes); err == nil {
			t.Error("trailing bytes accepted")
		}
	}
}

// save runs a Checkpoint into m as the tracker does with the store.
func save(m map[string][]byte, cp adapters.Checkpoint) {
	for k, v := range cp.Put {
		m[k] = append([]byte(nil), v...)
	}
	for _, k := range cp.Del {
		delete(m, k)
	}
	cp.Commit()
}

// A restarted adapter handed the saved state reads no transcript that did
// not change, reads only the appended bytes of one that grew, and reports
// the very sessions a fresh read reports.
func TestRestoreReadsOnlyWhatChanged(t *testing.T) {
	r := denseRoot(t, 40, 9)
	first := newTestAdapter(t, &testFS{}, r.Dir)
	want := discover(t, first, nil)
	store := map[string][]byte{}
	save(store, first.Checkpoint())
	if len(store) != 40 {
		t.Fatalf("saved %d entries, want 40", len(store))
	}
	// Nothing changed: the next checkpoint writes nothing.
	if cp := first.Checkpoint(); len(cp.Put)+len(cp.Del) != 0 {
		t.Fatalf("an unchanged adapter checkpoints %d puts, %d deletes", len(cp.Put), len(cp.Del))
	}

	fsys := &testFS{}
	second := newTestAdapter(t, fsys, r.Dir)
	second.Restore(store)
	got := discover(t, second, nil)
	if n := fsys.read.Load(); n != 0 {
		t.Fatalf("restart read %d bytes of unchanged transcripts (opened %v)", n, fsys.openedPaths())
	}
	sameSessions(t, got, want)
	if cp := second.Checkpoint(); len(cp.Put)+len(cp.Del) != 0 {
		t.Fatalf("a restart that read nothing checkpoints %d puts, %d deletes", len(cp.Put), len(cp.Del))
	}

	// One grows, one is deleted, one is replaced; a third adapter restored
	// from the same (now stale) state reads the growth from the saved
	// offset and agrees with a fresh read.
	var paths []string
	for p := range allFiles(first) {
		paths = append(paths, p)
	}
	grown, gone, replaced := paths[0], paths[1], paths[2]
	fi, _ := os.Stat(grown)
	tr := claudetest.NewTranscript(strings.TrimSuffix(filepath.Base(grown), ".jsonl"), "/home/u/src/grown", time.Now())
	toolID := tr.CrashMidTool("grow", "sleep 100")
	appendTo(t, grown, tr.Bytes())
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	rep := claudetest.NewTranscript(strings.TrimSuffix(filepath.Base(replaced), ".jsonl"), "/home/u/src/replaced", time.Now())
	rep.Turn("new", "ls", "x", "done")
	tmp := replaced + ".tmp"
	if err := os.WriteFile(tmp, rep.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, replaced); err != nil {
		t.Fatal(err)
	}

	fsys = &testFS{}
	third := newTestAdapter(t, fsys, r.Dir)
	third.Restore(store)
	got = discover(t, third, nil)
	// The reference is the adapter that never stopped: bad-line counts
	// are kept since a file's last listing from its start, so a fresh read
	// of a file that grew may see other windows.
	sameSessions(t, got, discover(t, first, nil))
	if o := mustFind(t, got, strings.TrimSuffix(filepath.Base(grown), ".jsonl")); issue(o.InFlight, session.ProblemOrphanedToolCall, toolID) == nil {
		t.Fatalf("the appended tool call is not in flight: %+v", o.InFlight)
	}
	opened := fsys.openedPaths()
	if len(opened) != 2 || !contains(opened, grown) || !contains(opened, replaced) {
		t.Fatalf("opened %v, want only the grown and the replaced transcript", opened)
	}
	grew := int64(len(tr.Bytes()))
	if n := fsys.read.Load(); n > grew+int64(len(rep.Bytes()))+int64(first.cfg.WindowBytes) || fi.Size() < 1 {
		t.Fatalf("read %d bytes for %d appended and a %d byte replacement", n, grew, len(rep.Bytes()))
	}
	cp := third.Checkpoint()
	if len(cp.Put) != 2 || cp.Put[grown] == nil || cp.Put[replaced] == nil {
		t.Fatalf("checkpoint puts %d entries, want the grown and the replaced", len(cp.Put))
	}
	if len(cp.Del) != 1 || cp.Del[0] != gone {
		t.Fatalf("checkpoint deletes %v, want %s", cp.Del, gone)
	}
	// Not committed (the store write failed): the next checkpoint returns
	// the same again.
	if again := third.Checkpoint(); len(again.Put) != 2 || len(again.Del) != 1 {
		t.Fatalf("an uncommitted checkpoint was forgotten: %d puts, %d deletes", len(again.Put), len(again.Del))
	}
}

// Garbage in the store costs a read, never a wrong session.
func TestRestoreIgnoresUnusableEntries(t *testing.T) {
	r := denseRoot(t, 5, 10)
	first := newTestAdapter(t, &testFS{}, r.Dir)
	want := discover(t, first, nil)
	store := map[string][]byte{}
	save(store, first.Checkpoint())
	for k := range store {
		store[k] = []byte{checkpointFormat, 0xff}
		break
	}
	store["/nowhere/x.jsonl"] = []byte("junk")
	fsys := &testFS{}
	second := newTestAdapter(t, fsys, r.Dir)
	second.Restore(store)
	sameSessions(t, discover(t, second, nil), want)
	if n := len(fsys.openedPaths()); n != 1 {
		t.Fatalf("opened %d transcripts, want the one with the bad entry", n)
	}
	// Decoded as the pass found them: four used, the bad one not, and
	// the one of no transcript never looked at.
	if l := second.restoreLog; l.entries != 6 || l.used != 4 || l.unusable != 1 || l.firstErr == nil {
		t.Fatalf("restore log %+v, want 6 entries: 4 used, 1 unusable (with its error), 1 not found", l)
	}
	cp := second.Checkpoint()
	if len(cp.Put) != 1 || len(cp.Del) != 1 || cp.Del[0] != "/nowhere/x.jsonl" {
		t.Fatalf("checkpoint: %d puts, deletes %v", len(cp.Put), cp.Del)
	}
}

func appendTo(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sameSessions compares two observations session by session.
func sameSessions(t *testing.T, got, want adapters.Observation) {
	t.Helper()
	if got.Len() != want.Len() {
		t.Fatalf("%d sessions, want %d", got.Len(), want.Len())
	}
	for _, w := range want.All() {
		g := find(got, w.UpstreamID)
		if g == nil {
			t.Fatalf("session %s missing", w.UpstreamID)
		}
		gs := *g
		gs.Stamp, w.Stamp = 0, 0 // each adapter stamps its own way
		if !reflect.DeepEqual(gs, w) {
			t.Fatalf("session %s differs\n got %+v\nwant %+v", w.UpstreamID, *g, w)
		}
	}
	if !reflect.DeepEqual(got.Warnings, want.Warnings) {
		t.Fatalf("warnings differ\n got %v\nwant %v", got.Warnings, want.Warnings)
	}
}

func FuzzDecodeCheckpoint(f *testing.F) {
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/home/u/proj", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	tr.CrashMidTool("run the tests", "go test ./...")
	var s transcript.Summary
	if _, err := transcript.List(bytes.NewReader(tr.Bytes()), int64(len(tr.Bytes())), defaultWindowBytes, &s); err != nil {
		f.Fatal(err)
	}
	fs := &fileState{path: "/r/projects/p/x.jsonl", id: "x", read: true, size: 9, offset: 9, sum: s, hasID: true, dev: 3, ino: 4}
	f.Add(encodeFileState(fs, defaultWindowBytes, defaultMaxLineBytes))
	s.Prompt = &transcript.Line{UUID: "u", Prompt: "p", Kind: transcript.KindPrompt, Time: time.Unix(5, 6)}
	fs.sum = s
	f.Add(encodeFileState(fs, defaultWindowBytes, defaultMaxLineBytes))
	f.Add([]byte{checkpointFormat})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeFileState("/r/projects/p/x.jsonl", b, defaultWindowBytes, defaultMaxLineBytes)
		if err != nil {
			return
		}
		// What decodes re-encodes to what decodes the same.
		again, err := decodeFileState("/r/projects/p/x.jsonl", encodeFileState(got, defaultWindowBytes, defaultMaxLineBytes), defaultWindowBytes, defaultMaxLineBytes)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoding changed the state: %v\n%+v\n%+v", err, got, again)
		}
	})
}
