package kit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// Prefetched stats are what os.Stat says, each handed out once; a path
// taken again, or not prefetched, is stat'ed then.
func TestStatsPrefetchAndTake(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range PrefetchMin + 10 {
		p := filepath.Join(dir, fmt.Sprintf("f%03d", i))
		if i%7 != 0 { // every seventh is missing
			if err := os.WriteFile(p, make([]byte, i), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		paths = append(paths, p)
	}
	var s Stats
	s.Prefetch(paths)
	if len(s.m) != len(paths) {
		t.Fatalf("prefetched %d of %d", len(s.m), len(paths))
	}
	// Grown after the prefetch: the first take says the size before.
	if err := os.WriteFile(paths[1], make([]byte, 999), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, p := range paths {
		fi, err := s.Take(p)
		switch {
		case i%7 == 0:
			if !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s: err %v, want not exist", p, err)
			}
		case err != nil:
			t.Fatal(err)
		case fi.Size() != int64(i):
			t.Fatalf("%s: size %d, want %d (as prefetched)", p, fi.Size(), i)
		}
	}
	if fi, err := s.Take(paths[1]); err != nil || fi.Size() != 999 {
		t.Fatalf("taken again: %v %v, want a fresh stat of 999 bytes", fi, err)
	}
	var few Stats
	few.Prefetch(paths[:PrefetchMin-1])
	if len(few.m) != 0 {
		t.Fatal("fewer than PrefetchMin paths were prefetched")
	}
	s.Prefetch(paths)
	s.Drop()
	if len(s.m) != 0 {
		t.Fatal("Drop kept results")
	}
}
