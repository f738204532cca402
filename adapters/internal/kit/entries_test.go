package kit

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A state of a toy adapter: its entry is its value, in decimal.
type toyState struct {
	gen  uint64
	n    int
	read bool
}

type toyAdapter struct {
	mu       sync.Mutex
	gen      uint64
	book     Book[uint64]
	restored Restored[*toyState]
	states   map[string]*toyState
	log      *zap.Logger
}

func (a *toyAdapter) entries() Entries[*toyState] {
	return Entries[*toyState]{Mu: &a.mu, Book: &a.book, Restored: &a.restored, Last: &a.gen,
		Gen: func(s *toyState) *uint64 { return &s.gen },
		Decode: func(key string, b []byte) (*toyState, error) {
			n, err := strconv.Atoi(string(b))
			if err != nil {
				return nil, errors.New("not a number")
			}
			return &toyState{n: n, read: true}, nil
		},
		Encode: func(s *toyState) []byte { return []byte(strconv.Itoa(s.n)) },
		Log:    a.log, What: "toy", Inputs: "toys"}
}

func (a *toyAdapter) checkpoint() (put map[string][]byte, del []string, commit func()) {
	cp := a.entries().Checkpoint(func(yield func(string, *toyState) bool) {
		for key, s := range a.states {
			if s.read && !yield(key, s) {
				return
			}
		}
	})
	slices.Sort(cp.Del)
	return cp.Put, cp.Del, cp.Commit
}

// read is what a pass does to an input it reads: a new generation.
func (a *toyAdapter) read(key string, n int) {
	s := a.states[key]
	if s == nil {
		s = &toyState{}
		a.states[key] = s
	}
	a.gen++
	s.gen, s.n, s.read = a.gen, n, true
}

func TestEntries(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	a := &toyAdapter{states: map[string]*toyState{}, log: zap.New(core), gen: 7}
	a.entries().Restore(map[string][]byte{"/a": []byte("1"), "/b": []byte("2"), "/c": []byte("x"), "/gone": []byte("4")})

	// What decodes is held at a new generation, the rest booked at 0.
	if got := logs.FilterMessage("restored saved toy state").All(); len(got) != 1 || got[0].ContextMap()["toys"] != int64(3) || got[0].ContextMap()["unusable"] != int64(1) {
		t.Fatalf("restore log %v", got)
	}
	if got := logs.FilterMessage("some saved toy state is not usable; those toys are read again").All(); len(got) != 1 || got[0].ContextMap()["first"] != "/c: not a number" {
		t.Fatalf("unusable log %v", got)
	}
	gens := map[uint64]bool{}
	for _, k := range []string{"/a", "/b", "/gone"} {
		if !a.restored.Holds(k) {
			t.Fatalf("%s not held", k)
		}
		s, _ := a.restored.Take(k)
		a.restored.Hold(k, s)
		if s.gen <= 7 || s.gen > a.gen || gens[s.gen] {
			t.Fatalf("%s restored at generation %d (counter %d, given %v)", k, s.gen, a.gen, gens)
		}
		gens[s.gen] = true
	}
	if a.gen != 10 || a.restored.Holds("/c") {
		t.Fatalf("counter %d, /c held %v: want 10, not held", a.gen, a.restored.Holds("/c"))
	}
	if g, ok := a.book.held["/c"]; !ok || g != 0 {
		t.Fatalf("the entry of no use booked at %d (%v), want generation 0, which no state has", g, ok)
	}

	// Nothing read yet: nothing written, nothing held deleted, the entry
	// of no use deleted.
	put, del, _ := a.checkpoint()
	if len(put) != 0 || !slices.Equal(del, []string{"/c"}) {
		t.Fatalf("before a pass: put %v, deleted %v; want /c deleted", put, del)
	}

	// A pass takes /a unchanged (its restored generation), reads /b anew
	// and /d first, and drops /gone, which it did not list.
	sa, _ := a.restored.Take("/a")
	a.states["/a"] = sa
	a.restored.Take("/b")
	a.read("/b", 20)
	a.read("/d", 5)
	a.states["/unread"] = &toyState{} // listed, not read: not saved
	a.restored.Drop()
	put, del, commit := a.checkpoint()
	if got := slices.Sorted(maps.Keys(put)); !slices.Equal(got, []string{"/b", "/d"}) || string(put["/b"]) != "20" || string(put["/d"]) != "5" {
		t.Fatalf("put %q; want /b 20 and /d 5", put)
	}
	if !slices.Equal(del, []string{"/c", "/gone"}) {
		t.Fatalf("deleted %v; want /c and /gone", del)
	}
	// Not committed: the same again. Committed: nothing more.
	if put2, del2, _ := a.checkpoint(); len(put2) != 2 || len(del2) != 2 {
		t.Fatalf("an uncommitted checkpoint was forgotten: put %v, deleted %v", put2, del2)
	}
	commit()
	if !a.mu.TryLock() {
		t.Fatal("Commit left the lock held")
	}
	a.mu.Unlock()
	if put, del, _ := a.checkpoint(); len(put) != 0 || len(del) != 0 {
		t.Fatalf("after the commit: put %v, deleted %v", put, del)
	}
	// Read again: written again; gone: deleted.
	a.read("/a", 10)
	delete(a.states, "/d")
	if put, del, _ := a.checkpoint(); string(put["/a"]) != "10" || len(put) != 1 || !slices.Equal(del, []string{"/d"}) {
		t.Fatalf("put %q, deleted %v; want /a 10 and /d deleted", put, del)
	}
}

// Restore and Checkpoint hold the adapter's lock: a pass that holds it
// (reading, bumping the counter) is never raced.
func TestEntriesLock(t *testing.T) {
	a := &toyAdapter{states: map[string]*toyState{}, log: zap.NewNop()}
	a.mu.Lock()
	done := make(chan bool)
	go func() {
		a.entries().Restore(map[string][]byte{"/a": []byte("1")})
		a.checkpoint()
		done <- true
	}()
	for range 3 {
		a.read("/x", 1) // races with Restore's counter unless Restore waits
	}
	select {
	case <-done:
		t.Fatal("Restore ran while the adapter's lock was held")
	default:
	}
	a.mu.Unlock()
	<-done
	if a.gen != 4 {
		t.Fatalf("counter %d, want 4", a.gen)
	}
}

// Many entries are decoded on several goroutines: each one that decodes
// is held under its own key, with a generation of its own, and each that
// does not is booked to be deleted, as one by one (run with -race).
func TestEntriesRestoreMany(t *testing.T) {
	a := &toyAdapter{states: map[string]*toyState{}, log: zap.NewNop()}
	saved := map[string][]byte{}
	for i := range 5000 {
		v := strconv.Itoa(i)
		if i%7 == 0 {
			v = "x" + v
		}
		saved["k"+strconv.Itoa(i)] = []byte(v)
	}
	a.entries().Restore(saved)
	gens := map[uint64]bool{}
	for i := range 5000 {
		key := "k" + strconv.Itoa(i)
		s, ok := a.restored.Take(key)
		if i%7 == 0 {
			if ok {
				t.Fatalf("%s: garbage restored", key)
			}
			continue
		}
		if !ok || s.n != i || s.gen == 0 || gens[s.gen] {
			t.Fatalf("%s: restored %+v, %v (generations seen %d)", key, s, ok, len(gens))
		}
		gens[s.gen] = true
	}
	if a.gen != uint64(len(gens)) {
		t.Fatalf("counter at %d after %d restored", a.gen, len(gens))
	}
}
