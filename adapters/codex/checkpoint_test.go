package codex

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/codextest"
)

// checkpoint returns a's checkpoint, committed.
func checkpoint(a *Adapter) (put map[string][]byte, del []string) {
	cp := a.Checkpoint()
	cp.Commit()
	sort.Strings(cp.Del)
	return cp.Put, cp.Del
}

// A restart with the saved state reads no rollout that did not change and
// says the same of every session; one that grew is read again, one that
// went is dropped, and entries that cannot be used are read afresh.
func TestCheckpointRestore(t *testing.T) {
	root := home(t, "done.jsonl", "killed.jsonl", "sigint.jsonl")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	before := discover(t, a)
	put, del := checkpoint(a)
	if len(put) != 3 || len(del) != 0 {
		t.Fatalf("first checkpoint: %d entries, %d deletions", len(put), len(del))
	}
	if put, del := checkpoint(a); len(put) != 0 || len(del) != 0 {
		t.Fatalf("nothing changed, yet the checkpoint has %d entries, %d deletions", len(put), len(del))
	}

	b := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	b.Restore(put)
	if after := discover(t, b); !reflect.DeepEqual(after, before) {
		t.Fatalf("restored:\n%+v\nwant\n%+v", after, before)
	}
	if put, _ := checkpoint(b); len(put) != 0 {
		t.Errorf("a restart read %d unchanged rollouts again", len(put))
	}

	// One grows by a turn start, one goes away, one entry is garbage.
	paths := map[string]string{}
	for _, f := range b.roots[root].files {
		paths[f.id] = f.path
	}
	grown := paths[fixtures[0].id]
	fh, err := os.OpenFile(grown, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(`{"timestamp":"2026-11-25T00:16:00.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t2"}}` + "\n")
	fh.Close()
	if err := os.Remove(paths[fixtures[2].id]); err != nil {
		t.Fatal(err)
	}
	saved := map[string][]byte{}
	for k, v := range put {
		saved[k] = v
	}
	saved[paths[fixtures[1].id]] = []byte{checkpointFormat, 0xff}
	c := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	c.Restore(saved)
	obs := discover(t, c)
	if o := obs[fixtures[0].id]; o.Activity != "busy" {
		t.Errorf("the grown rollout: %s, want busy (its new turn)", o.Activity)
	}
	if o := obs[fixtures[1].id]; o.Activity != "busy" || len(o.InFlight) != 1 {
		t.Errorf("the rollout with a garbage entry, read again: %+v", o)
	}
	put, del = checkpoint(c)
	if len(put) != 2 || put[grown] == nil || put[paths[fixtures[1].id]] == nil {
		t.Errorf("saved again: %d entries, want the grown one and the one read afresh", len(put))
	}
	if want := []string{paths[fixtures[2].id]}; !reflect.DeepEqual(del, want) {
		t.Errorf("deleted %q, want %q", del, want)
	}
}

// Entries that cannot be used are refused, never trusted: another format,
// another tail bound, another id, a path that is no rollout, any cut.
func TestCheckpointRefusesWhatItCannotUse(t *testing.T) {
	root := home(t, "killed.jsonl")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	discover(t, a)
	put, _ := checkpoint(a)
	var path string
	var b []byte
	for path, b = range put {
	}
	if _, err := decodeFileState(path, b, defaultTail); err != nil {
		t.Fatalf("its own entry: %v", err)
	}
	other := append([]byte{checkpointFormat + 1}, b[1:]...)
	for name, c := range map[string]struct {
		path string
		b    []byte
		tail int64
	}{
		"format":   {path, other, defaultTail},
		"tail":     {path, b, defaultTail / 2},
		"id":       {filepath.Join(filepath.Dir(path), "rollout-2026-11-25T00-15-09-01a2100e-0000-7000-8000-000000000000.jsonl"), b, defaultTail},
		"relative": {filepath.Base(path), b, defaultTail},
	} {
		if _, err := decodeFileState(c.path, c.b, c.tail); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for n := range len(b) {
		if _, err := decodeFileState(path, b[:n], defaultTail); err == nil {
			t.Fatalf("a cut to %d of %d bytes was accepted", n, len(b))
		}
	}
}

func FuzzDecodeFileState(f *testing.F) {
	root := f.TempDir()
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	os.MkdirAll(day, 0o755)
	for _, fx := range fixtures {
		os.WriteFile(filepath.Join(day, "rollout-2026-11-25T00-15-09-"+fx.id+".jsonl"), codextest.Fixture(fx.file), 0o644)
	}
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	a.Discover(f.Context(), nil)
	for _, b := range a.Checkpoint().Put {
		f.Add(b)
	}
	path := filepath.Join(day, "rollout-2026-11-25T00-15-09-"+fixtures[1].id+".jsonl")
	// What decodes, encoded again, decodes to the same state (the bytes
	// may differ: a varint may be written longer than it need be).
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeFileState(path, b, defaultTail)
		if err != nil {
			return
		}
		again, err := decodeFileState(path, encodeFileState(st, defaultTail), defaultTail)
		if err != nil {
			t.Fatalf("its own encoding does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, st) {
			t.Errorf("decoded, encoded and decoded again differs:\n%+v\n%+v", again, st)
		}
	})
}
