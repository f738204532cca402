package kit

import (
	"errors"
	"io/fs"
	"os"
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
