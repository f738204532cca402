package codex

import (
	"errors"
	"path/filepath"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

var _ adapters.Checkpointer = (*Adapter)(nil)

// What the adapter learned of each rollout (its identity, size and mtime,
// the session_meta, the turn state and where the next read starts) is
// saved through the tracker in the store, keyed by the rollout's path.
// After a restart a rollout whose (device, inode, size, mtime) still match
// is not read at all, and one that grew is read from the saved offset, as
// within one run: a restart costs a stat per rollout, not ~50 KB of reads.
// Owners are never saved: each pass reads the lock table afresh.

// checkpointFormat is the first byte of every saved entry. Bump it when the
// layout changes, or when what a turn state means changes (a parser fix
// that concludes differently from the same lines): an entry of another
// format is ignored, and its rollout read again.
const checkpointFormat = 3 // 2: the turn's drift; 3: id_allocation is no drift

// maxSavedPending bounds the pending calls an entry may hold (garbage
// must not allocate without limit).
const maxSavedPending = 1 << 12

// Restore implements adapters.Checkpointer. Entries wait for the first
// listing to find their rollouts; those it does not find are dropped by
// the next Checkpoint.
func (a *Adapter) Restore(saved map[string][]byte) { a.entries().Restore(saved) }

// Checkpoint implements adapters.Checkpointer: the rollouts read since
// their last save, and the saved ones no longer listed. Restored entries
// no listing has taken yet stay until a pass ran.
func (a *Adapter) Checkpoint() adapters.Checkpoint {
	return a.entries().Checkpoint(func(yield func(string, *fileState) bool) {
		for _, r := range a.roots {
			for path, f := range r.files {
				// A compressed rollout is not saved: it is read whole again
				// (compressed.go).
				if f.read && !f.compressed && !yield(path, f) {
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
		Log:    a.log, What: "rollout", Inputs: "rollouts"}
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
	w.Varint(f.offset)
	w.Varint(int64(f.bad))
	metaErr := ""
	if f.metaErr != nil {
		metaErr = f.metaErr.Error()
	}
	w.Str(metaErr)
	m := &f.meta
	for _, s := range []string{m.ID, m.Cwd, m.CLIVersion, m.Originator, m.Source, m.ForkedFrom, m.Title} {
		w.Str(s)
	}
	w.Time(m.Started)
	t := &f.turn
	w.Bool(t.Known)
	w.Bool(t.Busy)
	w.Str(t.TurnID)
	w.Time(t.Since)
	w.Str(t.Aborted)
	w.Time(t.Last)
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
// entry is not used (the rollout is read again); it never panics on
// garbage.
func decodeFileState(path string, b []byte, maxTail int64) (*fileState, error) {
	m := rolloutName.FindStringSubmatch(filepath.Base(path))
	if m == nil || m[3] != "" || !filepath.IsAbs(path) {
		return nil, errors.New("not a rollout path")
	}
	r := wire.NewReader(b)
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
	f.offset = r.Varint()
	f.bad = int(r.Varint())
	if e := r.Str(); e != "" {
		f.metaErr = errors.New(e)
	}
	me := &f.meta
	for _, s := range []*string{&me.ID, &me.Cwd, &me.CLIVersion, &me.Originator, &me.Source, &me.ForkedFrom, &me.Title} {
		*s = r.Str()
	}
	me.Started = r.Time()
	t := &f.turn
	t.Known = r.Bool()
	t.Busy = r.Bool()
	t.TurnID = r.Str()
	t.Since = r.Time()
	t.Aborted = r.Str()
	t.Last = r.Time()
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
	case f.size < 0 || f.offset < 0 || f.offset > f.size || f.bad < 0:
		return nil, errors.New("offsets out of range")
	}
	return f, nil
}
