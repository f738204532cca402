package kit

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSettled(t *testing.T) {
	m := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at   time.Duration
		want bool
	}{{-time.Second, false}, {0, false}, {RacyWindow - 1, false}, {RacyWindow, true}, {time.Hour, true}} {
		if got := Settled(m, m.Add(tc.at)); got != tc.want {
			t.Errorf("Settled at mtime%+v = %v", tc.at, got)
		}
	}
}

func TestRescan(t *testing.T) {
	var r Rescan
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if !r.Due(now, time.Minute) {
		t.Fatal("the first pass is not full")
	}
	if r.Due(now.Add(59*time.Second), time.Minute) {
		t.Fatal("full again before the period")
	}
	r.Request()
	if !r.Due(now.Add(59*time.Second), time.Minute) {
		t.Fatal("a requested rescan did not come")
	}
	// The clock restarted at the requested one.
	if r.Due(now.Add(time.Minute), time.Minute) || !r.Due(now.Add(119*time.Second), time.Minute) {
		t.Fatal("the period does not count from the last full pass")
	}
}

func TestFileID(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi1, _ := os.Stat(p)
	dev1, ino1, ok := FileID(fi1)
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		if ok {
			t.Fatal("an identity where none is known")
		}
		return
	}
	if !ok {
		t.Fatal("no identity on a unix")
	}
	// Replaced at its path (kept open, so its inode is not reused).
	keep, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	fi2, _ := os.Stat(p)
	dev2, ino2, _ := FileID(fi2)
	if dev1 != dev2 || ino1 == ino2 {
		t.Fatalf("replaced file: (%d, %d) then (%d, %d)", dev1, ino1, dev2, ino2)
	}
}

// The generation book: what changed since its save is written, what is
// gone deleted (unless kept), and only a commit makes it saved.
func TestBookGenerations(t *testing.T) {
	var b Book[uint64]
	b.Reset(3)
	b.Saved("a", 0) // restored, its state not read again
	b.Saved("b", 0) // restored, read again since
	b.Saved("c", 0) // restored, its input gone
	b.Saved("d", 0) // restored, not taken yet
	state := map[string]uint64{"a": 0, "b": 1, "e": 1}
	ch := b.Changes()
	for _, k := range []string{"a", "b", "e"} {
		if !ch.Unchanged(k, state[k]) {
			ch.Put(k, state[k], []byte(k))
		}
	}
	cp, _ := ch.End(func(k string) bool { return k == "d" })
	if got := slices.Sorted(maps.Keys(cp.Put)); !slices.Equal(got, []string{"b", "e"}) || !slices.Equal(cp.Del, []string{"c"}) {
		t.Fatalf("put %v, deleted %v; want b and e put, c deleted", got, cp.Del)
	}
	// Not committed: the same again.
	ch = b.Changes()
	for _, k := range []string{"a", "b", "e"} {
		if !ch.Unchanged(k, state[k]) {
			ch.Put(k, state[k], []byte(k))
		}
	}
	cp2, commit2 := ch.End(func(k string) bool { return k == "d" })
	if len(cp2.Put) != 2 || len(cp2.Del) != 1 {
		t.Fatalf("an uncommitted checkpoint was forgotten: %d puts, %v deleted", len(cp2.Put), cp2.Del)
	}
	commit2()
	ch = b.Changes()
	for _, k := range []string{"a", "b", "e"} {
		if !ch.Unchanged(k, state[k]) {
			t.Errorf("%s written again after its commit", k)
		}
	}
	cp3, commit3 := ch.End(func(string) bool { return false })
	if len(cp3.Put) != 0 || !slices.Equal(cp3.Del, []string{"d"}) {
		t.Fatalf("put %d, deleted %v; want d deleted once not kept", len(cp3.Put), cp3.Del)
	}
	commit3()
	// e's input is gone: told the last checkpoint, not this one, it is
	// deleted (the set of keys told starts over with each Changes).
	ch = b.Changes()
	for _, k := range []string{"a", "b"} {
		ch.Unchanged(k, state[k])
	}
	if cp, _ := ch.End(func(string) bool { return false }); len(cp.Put) != 0 || !slices.Equal(cp.Del, []string{"e"}) {
		t.Fatalf("put %d, deleted %v; want e deleted", len(cp.Put), cp.Del)
	}
}

// opencode's variant: versions are the states themselves, and entries are
// compared by content.
func TestBookSums(t *testing.T) {
	type st struct{ n int }
	s1, s2, s3 := &st{1}, &st{2}, &st{3}
	var b Book[*st]
	b.Reset(2)
	b.SavedBytes("s1", s1, []byte("one"))
	b.SavedBytes("db", nil, []byte("cursors"))
	b.SavedBad("bad")
	ch := b.Changes()
	if !ch.Unchanged("s1", s1) {
		t.Error("the restored state itself is not its entry's version")
	}
	if ch.Unchanged("s2", s2) {
		t.Error("a new key is unchanged")
	}
	ch.PutSum("s2", s2, []byte("two"))
	ch.PutSum("db", nil, []byte("cursors")) // the same bytes
	// bad's state read again to the bytes it held: a bad entry is written.
	if ch.Unchanged("bad", s3) {
		t.Error("a bad entry is unchanged")
	}
	ch.PutSum("bad", s3, []byte("three"))
	cp, commit := ch.End(func(string) bool { return false })
	if got := slices.Sorted(maps.Keys(cp.Put)); !slices.Equal(got, []string{"bad", "s2"}) || len(cp.Del) != 0 {
		t.Fatalf("put %v, deleted %v; want bad and s2", got, cp.Del)
	}
	commit()
	// Read again to the same bytes (another state, the same content):
	// nothing written, and the new state is the entry's version at once.
	s1again := &st{1}
	ch = b.Changes()
	if ch.Unchanged("s1", s1again) {
		t.Fatal("another state is unchanged")
	}
	ch.PutSum("s1", s1again, []byte("one"))
	ch.PutSum("s2", s2, []byte("two, longer"))
	ch.Unchanged("bad", s3)
	ch.PutSum("db", nil, []byte("cursors"))
	cp, _ = ch.End(func(string) bool { return false })
	if got := slices.Sorted(maps.Keys(cp.Put)); !slices.Equal(got, []string{"s2"}) || len(cp.Del) != 0 {
		t.Fatalf("put %v, deleted %v; want s2", got, cp.Del)
	}
	if !b.Changes().Unchanged("s1", s1again) {
		t.Fatal("the same bytes did not make the new state the entry's version")
	}
}

func TestRestored(t *testing.T) {
	var r Restored[int]
	if r.Holding() || r.Holds("a") {
		t.Fatal("holding before Reset")
	}
	if _, ok := r.Take("a"); ok {
		t.Fatal("took from nothing")
	}
	r.Reset(2)
	r.Hold("a", 1)
	r.Hold("b", 0)
	if !r.Holding() || !r.Holds("a") || !r.Holds("b") {
		t.Fatal("not holding what was held")
	}
	if v, ok := r.Take("a"); !ok || v != 1 {
		t.Fatalf("Take = %d, %v", v, ok)
	}
	if _, ok := r.Take("a"); ok || r.Holds("a") {
		t.Fatal("taken twice")
	}
	r.Drop()
	if r.Holding() || r.Holds("b") {
		t.Fatal("holding after Drop")
	}
}

// TestReaderReused: a reader given back and taken again reads its new
// input from its start, with nothing of the last one left buffered.
func TestReaderReused(t *testing.T) {
	br := Reader(strings.NewReader("first line\nleft in the buffer\n"))
	if line, err := br.ReadSlice('\n'); err != nil || string(line) != "first line\n" {
		t.Fatalf("ReadSlice = %q, %v", line, err)
	}
	PutReader(br)
	for range 4 { // the pool may hand out this one or a new one
		br := Reader(strings.NewReader("second\n"))
		if br.Size() != ReaderSize {
			t.Fatalf("Size = %d, want %d", br.Size(), ReaderSize)
		}
		line, err := br.ReadSlice('\n')
		if err != nil || string(line) != "second\n" {
			t.Fatalf("ReadSlice after reuse = %q, %v", line, err)
		}
		if _, err := br.ReadSlice('\n'); err != io.EOF {
			t.Fatalf("second ReadSlice: %v, want EOF", err)
		}
		PutReader(br)
	}
}

// BenchmarkChangesUnchanged is an idle checkpoint's ledger work: 2,000
// entries, none changed since their save.
func BenchmarkChangesUnchanged(b *testing.B) {
	var book Book[uint64]
	keys := make([]string, 2000)
	for i := range keys {
		keys[i] = fmt.Sprintf("/home/u/.gemini/tmp/p%d/chats/session-%d.jsonl", i%50, i)
		book.Saved(keys[i], 1)
	}
	b.ReportAllocs()
	for b.Loop() {
		ch := book.Changes()
		for _, k := range keys {
			if !ch.Unchanged(k, 1) {
				b.Fatal("changed")
			}
		}
		if cp, _ := ch.End(func(string) bool { return false }); len(cp.Put)+len(cp.Del) != 0 {
			b.Fatal("a checkpoint of nothing")
		}
	}
}
