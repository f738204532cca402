package gemini

import (
	"errors"
	"path/filepath"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

var _ adapters.Checkpointer = (*Adapter)(nil)

// What the adapter folded of each chat (its identity, size and mtime,
// where the next read starts, and the chat as folded) is saved through
// the tracker in the store, keyed by the chat's path. After a restart a
// chat whose (device, inode, size, mtime) still match is not read at all,
// and one that grew is read from the saved offset, as within one run.
// Owners are never saved: each pass infers them afresh.

// checkpointFormat is the first byte of every saved entry. Bump it when the
// layout changes, or when what a folded chat means changes (a parser fix
// that concludes differently from the same lines): an entry of another
// format is ignored, and its chat read again.
const checkpointFormat = 3 // 2: the chat's drift; 3: 4 messages kept, ids sorted

// maxSavedSeen bounds the message ids an entry may hold (garbage must
// not allocate without limit).
const maxSavedSeen = 1 << 20

// Restore implements adapters.Checkpointer. Entries wait for the first
// listing to find their chats; those it does not find are dropped by the
// next Checkpoint.
func (a *Adapter) Restore(saved map[string][]byte) { a.entries().Restore(saved) }

// Checkpoint implements adapters.Checkpointer: the chats read since their
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
		Decode: func(path string, b []byte) (*fileState, error) { return decodeFileState(path, b, a.cfg.MaxWhole) },
		Encode: func(f *fileState) []byte { return encodeFileState(f, a.cfg.MaxWhole) },
		Log:    a.log, What: "chat", Inputs: "chats"}
}

// encodeFileState writes f in checkpointFormat (package wire's encoding).
// maxWhole is saved because a whole-file chat read under another bound
// may conclude differently.
func encodeFileState(f *fileState, maxWhole int64) []byte {
	w := wire.Writer{B: make([]byte, 0, 256)}
	w.Byte(checkpointFormat)
	w.Varint(maxWhole)
	w.Uvarint(f.dev)
	w.Uvarint(f.ino)
	w.Varint(f.size)
	w.Time(f.mtime)
	w.Time(f.readAt)
	w.Varint(f.offset)
	e := ""
	if f.err != nil {
		e = f.err.Error()
	}
	w.Str(e)
	c := &f.c
	for _, s := range []string{c.ID, c.ProjectHash, c.Kind, c.Summary, c.Title} {
		w.Str(s)
	}
	w.Time(c.Started)
	w.Time(c.Updated)
	w.Time(c.Last)
	w.Bool(c.HasHeader)
	w.Bool(c.Dropped)
	w.Varint(int64(c.Bad))
	w.Uvarint(uint64(len(c.Msgs)))
	for _, m := range c.Msgs {
		w.Str(m.ID)
		w.Str(m.Type)
		w.Time(m.At)
		w.Bool(m.Text)
		w.Uvarint(uint64(len(m.Calls)))
		for _, k := range m.Calls {
			w.Str(k.ID)
			w.Str(k.Name)
			w.Str(k.Status)
			w.Str(k.Args)
			w.Time(k.At)
		}
	}
	w.Uvarint(uint64(len(c.Seen)))
	for _, h := range c.Seen {
		w.Uvarint(h)
	}
	c.Drift.Append(&w)
	return w.B
}

// errOtherBound: the entry was made under another whole-file bound.
var errOtherBound = errors.New("saved with another whole-file bound")

// decodeFileState reads an entry of encodeFileState. Any error means the
// entry is not used (the chat is read again); it never panics on garbage.
func decodeFileState(path string, b []byte, maxWhole int64) (*fileState, error) {
	f, ok := fileAt(path)
	if !ok {
		return nil, errors.New("not a chat path")
	}
	r := wire.NewSharedReader(b)
	if r.Format(checkpointFormat); r.Err() != nil {
		return nil, r.Err()
	}
	if mw := r.Varint(); r.Err() == nil && mw != maxWhole {
		return nil, errOtherBound
	}
	f.read = true
	f.dev = r.Uvarint()
	f.ino = r.Uvarint()
	f.size = r.Varint()
	f.mtime = r.Time().Local()
	f.readAt = r.Time().Local()
	f.offset = r.Varint()
	if e := r.Str(); e != "" {
		f.err = errors.New(e)
	}
	c := &f.c
	for _, s := range []*string{&c.ID, &c.ProjectHash, &c.Kind, &c.Summary, &c.Title} {
		*s = r.Str()
	}
	c.Started = r.Time()
	c.Updated = r.Time()
	c.Last = r.Time()
	c.HasHeader = r.Bool()
	c.Dropped = r.Bool()
	c.Bad = int(r.Varint())
	n := r.Uvarint()
	if n > maxKept {
		r.Fail("more messages than are kept")
	} else if n <= uint64(len(b)) {
		c.Msgs = make([]message, 0, n) // each takes a byte or more
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		m := message{ID: r.Str(), Type: r.Str(), At: r.Time(), Text: r.Bool()}
		k := r.Uvarint()
		if k > 1<<12 {
			r.Fail("more tool calls than are kept")
		}
		for j := uint64(0); j < k && r.Err() == nil; j++ {
			m.Calls = append(m.Calls, call{ID: r.Str(), Name: r.Str(), Status: r.Str(), Args: r.Str(), At: r.Time()})
		}
		c.Msgs = append(c.Msgs, m)
	}
	s := r.Uvarint()
	if s > maxSavedSeen {
		r.Fail("more message ids than are kept")
	}
	if s > 0 && r.Err() == nil {
		c.Seen = make(idSet, 0, min(s, uint64(len(b))))
		for i := uint64(0); i < s && r.Err() == nil; i++ {
			h := r.Uvarint()
			if n := len(c.Seen); n > 0 && h <= c.Seen[n-1] {
				r.Fail("message ids out of order")
			}
			c.Seen = append(c.Seen, h)
		}
	}
	c.Drift = kit.ReadSeen(&r)
	r.End()
	switch {
	case r.Err() != nil:
		return nil, r.Err()
	case f.size < 0 || f.offset < 0 || f.offset > f.size || c.Bad < 0:
		return nil, errors.New("offsets out of range")
	}
	return f, nil
}

// fileAt is the fileState a chat path names, before any read: its
// project, and for a subagent's chat its parent session; ok false for a
// path that is no chat's.
func fileAt(path string) (*fileState, bool) {
	if !filepath.IsAbs(path) {
		return nil, false
	}
	dir, name := filepath.Split(path)
	dir = filepath.Clean(dir)
	f := &fileState{path: path, whole: strings.HasSuffix(name, ".json")}
	if filepath.Base(dir) != "chats" {
		// tmp/<project>/chats/<parent>/<id>.jsonl
		f.parent = filepath.Base(dir)
		dir = filepath.Dir(dir)
		if filepath.Base(dir) != "chats" || !strings.HasSuffix(name, ".jsonl") {
			return nil, false
		}
	} else if !isSessionFile(name) {
		return nil, false
	}
	f.project = filepath.Base(filepath.Dir(dir))
	if filepath.Base(filepath.Dir(filepath.Dir(dir))) != "tmp" {
		return nil, false
	}
	return f, true
}
