package pi

import (
	"errors"
	"path/filepath"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

var _ adapters.Checkpointer = (*Adapter)(nil)

// What the adapter learned of each session file (its identity, size and
// mtime, the header, the turn state and where the next read starts) is
// saved through the tracker in the store, keyed by the file's path. After
// a restart a file whose (device, inode, size, mtime) still match is not
// read at all, and one that grew is read from the saved offset, as within
// one run. Owners are never saved: each pass finds them afresh.

// checkpointFormat is the first byte of every saved entry. Bump it when the
// layout changes, or when what a turn state means changes (a parser fix
// that concludes differently from the same lines): an entry of another
// format is ignored, and its file read again.
const checkpointFormat = 2 // 2: the turn's drift

// maxSavedPending bounds the pending calls an entry may hold (garbage
// must not allocate without limit).
const maxSavedPending = 1 << 12

// Restore implements adapters.Checkpointer. Entries wait for the first
// listing to find their files; those it does not find are dropped by the
// next Checkpoint.
func (a *Adapter) Restore(saved map[string][]byte) { a.entries().Restore(saved) }

// Checkpoint implements adapters.Checkpointer: the files read since their
// last save, and the saved ones no longer listed. Restored entries no
// listing has taken yet stay until a pass ran.
func (a *Adapter) Checkpoint() adapters.Checkpoint {
	return a.entries().Checkpoint(func(yield func(string, *fileState) bool) {
		for _, r := range a.roots {
			for path, f := range r.files {
				if f.read && !yield(path, f) {
					return
				}
			}
		}
	})
}

// entries is the glue of the adapter's checkpoint entries (kit.Entries).
func (a *Adapter) entries() kit.Entries[*fileState] {
	return kit.Entries[*fileState]{Mu: &a.mu, Book: &a.book, Restored: &a.restored, Last: &a.gen,
		Gen:    func(f *fileState) *uint64 { return &f.gen },
		Decode: func(path string, b []byte) (*fileState, error) { return decodeFileState(path, b, a.cfg.MaxTail) },
		Encode: func(f *fileState) []byte { return encodeFileState(f, a.cfg.MaxTail) },
		Log:    a.log, What: "Pi session", Inputs: "files"}
}

// encodeFileState writes f in checkpointFormat (package wire's encoding).
// maxTail is saved because a tail read under another bound may conclude
// differently.
func encodeFileState(f *fileState, maxTail int64) []byte {
	w := wire.Writer{B: make([]byte, 0, 256)}
	w.Byte(checkpointFormat)
	w.Varint(maxTail)
	w.Str(f.id)
	w.Uvarint(f.dev)
	w.Uvarint(f.ino)
	w.Varint(f.size)
	w.Time(f.mtime)
	w.Time(f.readAt)
	w.Varint(f.offset)
	w.Str(string(f.edge))
	w.Varint(int64(f.bad))
	w.Varint(int64(f.long))
	headErr := ""
	if f.headErr != nil {
		headErr = f.headErr.Error()
	}
	w.Str(headErr)
	h := &f.head
	w.Str(h.ID)
	w.Varint(int64(h.Version))
	w.Str(h.Cwd)
	w.Time(h.Started)
	w.Str(h.Parent)
	t := &f.turn
	w.Bool(t.Known)
	w.Bool(t.Busy)
	w.Time(t.Since)
	w.Time(t.Waiting)
	w.Str(t.Stop)
	w.Time(t.Last)
	w.Str(t.Title)
	w.Bool(t.named)
	w.Uvarint(uint64(len(t.Pending)))
	for _, c := range t.Pending {
		w.Str(c.ID)
		w.Str(c.Name)
		w.Str(c.Args)
		w.Time(c.Since)
	}
	t.Drift.Append(&w)
	return w.B
}

// errOtherTail: the entry was made under another tail bound.
var errOtherTail = errors.New("saved with another tail bound")

// decodeFileState reads an entry of encodeFileState. Any error means the
// entry is not used (the file is read again); it never panics on garbage.
func decodeFileState(path string, b []byte, maxTail int64) (*fileState, error) {
	m := sessionName.FindStringSubmatch(filepath.Base(path))
	if m == nil || !filepath.IsAbs(path) {
		return nil, errors.New("not a Pi session file path")
	}
	r := wire.NewSharedReader(b)
	if r.Format(checkpointFormat); r.Err() != nil {
		return nil, r.Err()
	}
	if mt := r.Varint(); r.Err() == nil && mt != maxTail {
		return nil, errOtherTail
	}
	f := &fileState{path: path, read: true}
	f.id = r.Str()
	f.dev = r.Uvarint()
	f.ino = r.Uvarint()
	f.size = r.Varint()
	f.mtime = r.Time().Local()
	f.readAt = r.Time().Local()
	f.offset = r.Varint()
	f.edge = []byte(r.Str())
	f.bad = int(r.Varint())
	f.long = int(r.Varint())
	if e := r.Str(); e != "" {
		f.headErr = errors.New(e)
	}
	h := &f.head
	h.ID = r.Str()
	h.Version = int(r.Varint())
	h.Cwd = r.Str()
	h.Started = r.Time()
	h.Parent = r.Str()
	t := &f.turn
	t.Known = r.Bool()
	t.Busy = r.Bool()
	t.Since = r.Time()
	t.Waiting = r.Time()
	t.Stop = r.Str()
	t.Last = r.Time()
	t.Title = r.Str()
	t.named = r.Bool()
	n := r.Uvarint()
	if n > maxSavedPending {
		r.Fail("more pending calls than are kept")
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		t.Pending = append(t.Pending, call{ID: r.Str(), Name: r.Str(), Args: r.Str(), Since: r.Time()})
	}
	t.Drift = kit.ReadSeen(&r)
	r.End()
	switch {
	case r.Err() != nil:
		return nil, r.Err()
	case f.id != m[2]:
		return nil, errors.New("saved for another session id")
	case f.size < 0 || f.offset < 0 || f.offset > f.size || int64(len(f.edge)) > min(f.offset, edgeLen) || f.bad < 0 || f.long < 0:
		return nil, errors.New("offsets out of range")
	}
	return f, nil
}
