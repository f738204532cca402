package kit

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/sessiond/sessiond/adapters"
)

// Dirs are the folders an adapter's passes list, by path, each with its
// last listing. Not safe for concurrent use: passes are serialized.
type Dirs map[string]*Listing

// Listing is a folder's last listing.
type Listing struct {
	mtime, listedAt time.Time
	names           []string
	// paths are the names joined to the folder, made on first ask
	// (ListPaths) and kept while the listing stands.
	paths []string
}

// Mtime is the folder's mtime when it was listed.
func (l *Listing) Mtime() time.Time { return l.mtime }

// List returns the names in dir that keep passes, listing dir again only
// when its mtime changed, a listing was not settled (one mtime tick can
// hide a new file), or the pass is full; else the last listing's names
// (which the caller must not change). A folder that does not exist has
// no names, and its listing is forgotten; one that cannot be stat'ed or
// read is an error in errs, and its last listing stands, so the inputs
// in it keep their state. now is when the pass began.
func (d Dirs) List(dir string, full bool, now time.Time, errs *[]adapters.InputError, keep func(name string, e fs.DirEntry) bool) []string {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		delete(d, dir)
		return nil
	}
	last := d[dir]
	if err != nil {
		*errs = append(*errs, adapters.InputError{Input: dir, Err: err})
		return last.namesOrNil()
	}
	if last != nil && !full && fi.ModTime().Equal(last.mtime) && Settled(last.mtime, last.listedAt) {
		return last.names
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		*errs = append(*errs, adapters.InputError{Input: dir, Err: err})
		return last.namesOrNil()
	}
	l := &Listing{mtime: fi.ModTime(), listedAt: now}
	for _, e := range ents {
		if keep(e.Name(), e) {
			l.names = append(l.names, e.Name())
		}
	}
	d[dir] = l
	return l.names
}

func (l *Listing) namesOrNil() []string {
	if l == nil {
		return nil
	}
	return l.names
}

// ListPaths is List, with each name joined to dir: paths[i] is
// filepath.Join(dir, names[i]). The joined paths are kept with the
// listing, so an idle pass over folders that did not change joins
// nothing (2,000 chats: 2,000 new strings every 5 s). The caller must
// change neither slice.
func (d Dirs) ListPaths(dir string, full bool, now time.Time, errs *[]adapters.InputError, keep func(name string, e fs.DirEntry) bool) (names, paths []string) {
	names = d.List(dir, full, now, errs, keep)
	l := d[dir] // the listing List returned (a folder gone has none, and no names)
	if l == nil || len(names) == 0 {
		return names, nil
	}
	if l.paths == nil {
		l.paths = make([]string, len(names))
		for i, n := range names {
			l.paths[i] = filepath.Join(dir, n)
		}
	}
	return names, l.paths
}

// Prune deletes from files every path a pass did not list, and reports
// how many. listed must hold each path once, each a key of files (a pass
// adds what it lists before it prunes): then a map as long as the list
// holds nothing else, and an idle pass builds no set to find out.
func Prune[T any](files map[string]T, listed []string) (deleted int) {
	if len(files) == len(listed) {
		return 0
	}
	seen := make(map[string]struct{}, len(listed))
	for _, p := range listed {
		seen[p] = struct{}{}
	}
	for p := range files {
		if _, ok := seen[p]; !ok {
			delete(files, p)
			deleted++
		}
	}
	return deleted
}
