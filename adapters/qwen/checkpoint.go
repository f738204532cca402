package qwen

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

var _ adapters.Checkpointer = (*Adapter)(nil)

// What the adapter learned of each chat (its identity, size and mtime,
// where the next read starts, and what the lines read say) is saved
// through the tracker in the store, keyed by the chat's path. After a
// restart a chat whose (device, inode, size, mtime) still match is not
// read at all, and one that grew is read from the saved offset, as
// within one run. Owners are never saved: each pass looks at the
// registry and the process table afresh.

// checkpointFormat is the first byte of every saved entry. Bump it when the
// layout changes, or when what a saved state means changes (a parser fix
// that concludes differently from the same lines): an entry of another
// format is ignored, and its chat read again.
const checkpointFormat = 2 // 2: the chat's drift

// Restore implements adapters.Checkpointer. Entries wait for the first
// listing to find their chats; those it does not find are dropped by the
// next Checkpoint.
func (a *Adapter) Restore(saved map[string][]byte) { a.entries().Restore(saved) }

// Checkpoint implements adapters.Checkpointer: the chats read since their
// last save, and the saved ones no longer listed. Restored entries no
// listing has taken yet stay until a full pass ran.
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
		Decode: func(path string, b []byte) (*fileState, error) { return decodeFileState(path, b, a.cfg.MaxLine) },
		Encode: func(f *fileState) []byte { return encodeFileState(f, a.cfg.MaxLine) },
		Log:    a.log, What: "chat", Inputs: "chats"}
}

// encodeFileState writes f in checkpointFormat. maxLine is saved because
// a read under another bound may skip other lines.
func encodeFileState(f *fileState, maxLine int) []byte {
	w := wire.Writer{B: make([]byte, 0, 256)}
	w.Byte(checkpointFormat)
	w.Varint(int64(maxLine))
	w.Str(f.id)
	w.Uvarint(f.dev)
	w.Uvarint(f.ino)
	w.Varint(f.size)
	w.Time(f.mtime)
	w.Varint(f.offset)
	st := &f.st
	w.Varint(int64(st.bad))
	w.Varint(int64(st.recovered))
	w.Varint(int64(st.long))
	m := &st.meta
	for _, s := range []string{m.ID, m.Cwd, m.Version, m.Title} {
		w.Str(s)
	}
	w.Time(m.Started)
	t := &st.turn
	w.Byte(byte(t.Phase))
	w.Time(t.Since)
	w.Bool(t.Cancelled)
	w.Time(t.Last)
	w.Uvarint(uint64(len(t.Pending)))
	for _, c := range t.Pending {
		w.Str(c.ID)
		w.Str(c.Name)
		w.Str(c.Args)
		w.Time(c.Since)
	}
	st.drift.Append(&w)
	return w.B
}

// errOtherMaxLine: the entry was made under another line bound.
var errOtherMaxLine = errors.New("saved with another line bound")

// decodeFileState reads an entry of encodeFileState. Any error means the
// entry is not used (the chat is read again); it never panics on garbage.
func decodeFileState(path string, b []byte, maxLine int) (*fileState, error) {
	id, ok := strings.CutSuffix(filepath.Base(path), ".jsonl")
	if !ok || !validID(id) || !filepath.IsAbs(path) || filepath.Base(filepath.Dir(path)) != "chats" {
		return nil, errors.New("not a chat path")
	}
	r := wire.NewSharedReader(b)
	if r.Format(checkpointFormat); r.Err() != nil {
		return nil, r.Err()
	}
	if ml := r.Varint(); r.Err() == nil && ml != int64(maxLine) {
		return nil, errOtherMaxLine
	}
	f := &fileState{path: path, read: true}
	f.id = r.Str()
	f.dev = r.Uvarint()
	f.ino = r.Uvarint()
	f.size = r.Varint()
	f.mtime = r.Time().Local()
	f.offset = r.Varint()
	st := &f.st
	st.bad = int(r.Varint())
	st.recovered = int(r.Varint())
	st.long = int(r.Varint())
	m := &st.meta
	for _, s := range []*string{&m.ID, &m.Cwd, &m.Version, &m.Title} {
		*s = r.Str()
	}
	m.Started = r.Time()
	t := &st.turn
	t.Phase = phase(r.Byte())
	t.Since = r.Time()
	t.Cancelled = r.Bool()
	t.Last = r.Time()
	n := r.Uvarint()
	if n > maxPending {
		r.Fail("more pending calls than are kept")
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		t.Pending = append(t.Pending, call{ID: r.Str(), Name: r.Str(), Args: r.Str(), Since: r.Time()})
	}
	st.drift = kit.ReadSeen(&r)
	r.End()
	switch {
	case r.Err() != nil:
		return nil, r.Err()
	case f.id != id:
		return nil, errors.New("saved for another session id")
	case f.size < 0 || f.offset < 0 || f.offset > f.size || st.bad < 0 || st.recovered < 0 || st.long < 0:
		return nil, errors.New("offsets out of range")
	case t.Phase > phaseIdle:
		return nil, errors.New("unknown turn phase")
	}
	return f, nil
}
