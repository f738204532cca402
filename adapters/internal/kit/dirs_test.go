package kit

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
)

func TestDirsList(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "d")
	ds := Dirs{}
	var errs []adapters.InputError
	jsonl := func(name string, e fs.DirEntry) bool {
		return e.Type().IsRegular() && strings.HasSuffix(name, ".jsonl")
	}
	list := func(full bool, now time.Time) []string {
		t.Helper()
		errs = nil
		return ds.List(dir, full, now, &errs, jsonl)
	}
	write := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// The folder's mtime set by hand, so that settled or not is the test's.
	mtime := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	touch := func(m time.Time) {
		t.Helper()
		if err := os.Chtimes(dir, m, m); err != nil {
			t.Fatal(err)
		}
	}

	if got := list(false, mtime); got != nil || len(errs) != 0 || len(ds) != 0 {
		t.Fatalf("a folder not there: %v, %v, %d kept", got, errs, len(ds))
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write("a.jsonl")
	write("b.txt")
	if err := os.Mkdir(filepath.Join(dir, "c.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	touch(mtime)
	settled := mtime.Add(RacyWindow)
	if got := list(false, settled); !slices.Equal(got, []string{"a.jsonl"}) || len(errs) != 0 {
		t.Fatalf("first listing %v, %v; want a.jsonl only", got, errs)
	}
	if !ds[dir].Mtime().Equal(mtime) {
		t.Fatalf("Mtime %v, want %v", ds[dir].Mtime(), mtime)
	}

	// A file added within the same mtime: not seen while the listing is
	// settled and the pass not full; seen at a full pass.
	write("d.jsonl")
	touch(mtime)
	if got := list(false, settled.Add(time.Minute)); !slices.Equal(got, []string{"a.jsonl"}) {
		t.Fatalf("an unchanged folder was listed again: %v", got)
	}
	if got := list(true, settled.Add(time.Minute)); !slices.Equal(got, []string{"a.jsonl", "d.jsonl"}) {
		t.Fatalf("a full pass did not list again: %v", got)
	}
	// A listing taken within the racy window is not trusted.
	write("e.jsonl")
	touch(mtime)
	racy := mtime.Add(RacyWindow - time.Millisecond)
	list(true, racy)
	write("f.jsonl")
	touch(mtime)
	if got := list(false, settled.Add(time.Hour)); !slices.Contains(got, "f.jsonl") {
		t.Fatalf("a listing taken before the folder settled was trusted: %v", got)
	}
	// Another mtime: listed again.
	write("g.jsonl")
	touch(mtime.Add(time.Second))
	if got := list(false, settled.Add(time.Hour)); !slices.Contains(got, "g.jsonl") {
		t.Fatalf("a changed folder was not listed again: %v", got)
	}
	want := list(false, settled.Add(time.Hour))

	// Not readable (here: a file now, of another mtime): an error, and the
	// last listing stands.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := list(false, settled.Add(2*time.Hour)); !slices.Equal(got, want) || len(errs) != 1 || errs[0].Input != dir {
		t.Fatalf("an unreadable folder: %v, errors %v; want %v and one error", got, errs, want)
	}
	// Not stat'able (below a file): an error, the last listing stands.
	sub := filepath.Join(dir, "x")
	ds[sub] = ds[dir]
	errs = nil
	if got := ds.List(sub, true, settled, &errs, jsonl); !slices.Equal(got, want) || len(errs) != 1 || errs[0].Input != sub {
		t.Fatalf("a folder that cannot be stat'ed: %v, errors %v; want %v and one error", got, errs, want)
	}
	// Gone: no names, and its listing is forgotten.
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if got := list(false, settled); got != nil || len(errs) != 0 || ds[dir] != nil {
		t.Fatalf("a folder gone: %v, %v, listing kept %v", got, errs, ds[dir] != nil)
	}
	// An unreadable folder never listed: an error, no names.
	errs = nil
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ds.List(dir, false, settled, &errs, jsonl); got != nil || len(errs) != 1 {
		t.Fatalf("an unreadable folder never listed: %v, %v", got, errs)
	}
}

// TestDirsListPaths: the joined paths match the names, are the same
// slice while the folder's listing stands, and follow a new listing.
func TestDirsListPaths(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.jsonl", "a.jsonl", "x.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	jsonl := func(name string, e fs.DirEntry) bool { return strings.HasSuffix(name, ".jsonl") }
	mtime := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	if err := os.Chtimes(dir, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	ds := Dirs{}
	var errs []adapters.InputError
	now := mtime.Add(RacyWindow)
	names, paths := ds.ListPaths(dir, false, now, &errs, jsonl)
	if len(errs) != 0 || len(names) != 2 || len(paths) != 2 {
		t.Fatalf("names %v, paths %v, errs %v", names, paths, errs)
	}
	for i := range names {
		if paths[i] != filepath.Join(dir, names[i]) {
			t.Fatalf("paths[%d] = %q for name %q", i, paths[i], names[i])
		}
	}
	_, again := ds.ListPaths(dir, false, now.Add(time.Second), &errs, jsonl)
	if &again[0] != &paths[0] {
		t.Fatal("an unchanged listing's paths were joined again")
	}
	if err := os.WriteFile(filepath.Join(dir, "c.jsonl"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	names, paths = ds.ListPaths(dir, true, now.Add(time.Minute), &errs, jsonl)
	if len(names) != 3 || len(paths) != 3 || !slices.Contains(paths, filepath.Join(dir, "c.jsonl")) {
		t.Fatalf("after a new file: names %v, paths %v", names, paths)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if names, paths = ds.ListPaths(dir, true, now.Add(time.Hour), &errs, jsonl); names != nil || paths != nil {
		t.Fatalf("a folder gone: names %v, paths %v", names, paths)
	}
}
