package copilot

import (
	"errors"
	"path/filepath"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

var _ adapters.Checkpointer = (*Adapter)(nil)

// What the adapter learned of each session folder (the identity, size and
// mtime of the folder and its two files, the inuse pids, the turn state,
// where the next read of events.jsonl starts, the workspace) is saved
// through the tracker in the store, keyed by the folder's path. After a
// restart a file whose (device, inode, size, mtime) still match is not
// read at all, and events.jsonl grown is read from the saved offset, as
// within one run. Owners are never saved: each pass reads the copilot
// processes' descriptors afresh.

// checkpointFormat is the first byte of every saved entry. Bump it when
// the layout changes, or when what a turn state means changes (a parser
// fix that concludes differently from the same lines): an entry of
// another format is ignored, and its session read again.
const checkpointFormat = 2 // 2: the events' drift

// Restore implements adapters.Checkpointer. Entries wait for the first
// listing to find their folders; those it does not find are dropped by
// the next Checkpoint.
func (a *Adapter) Restore(saved map[string][]byte) { a.entries().Restore(saved) }

// Checkpoint implements adapters.Checkpointer: the sessions read since
// their last save, and the saved ones no longer listed. Restored entries
// no listing has taken yet stay until a full pass ran.
func (a *Adapter) Checkpoint() adapters.Checkpoint {
	return a.entries().Checkpoint(func(yield func(string, *sessState) bool) {
		for _, r := range a.roots {
			for _, s := range r.sessions {
				if s.dirRead.read && !yield(s.dir, s) {
					return
				}
			}
		}
	})
}

// entries is the glue of the adapter's checkpoint entries (kit.Entries).
func (a *Adapter) entries() kit.Entries[*sessState] {
	return kit.Entries[*sessState]{Mu: &a.mu, Book: &a.book, Restored: &a.restored, Last: &a.gen,
		Gen:    func(s *sessState) *uint64 { return &s.gen },
		Decode: decodeSession,
		Encode: encodeSession,
		Log:    a.log, What: "session", Inputs: "sessions"}
}

func writeFile(w *wire.Writer, f *fileRead) {
	w.Bool(f.read)
	w.Uvarint(f.dev)
	w.Uvarint(f.ino)
	w.Varint(f.size)
	w.Time(f.mtime)
	w.Time(f.at)
}

func readFile(r *wire.Reader) fileRead {
	f := fileRead{read: r.Bool(), dev: r.Uvarint(), ino: r.Uvarint(), size: r.Varint()}
	f.mtime = r.Time().Local()
	f.at = r.Time().Local()
	return f
}

// encodeSession writes s in checkpointFormat (package wire's encoding).
func encodeSession(s *sessState) []byte {
	w := wire.Writer{B: make([]byte, 0, 256)}
	w.Byte(checkpointFormat)
	w.Str(s.id)
	writeFile(&w, &s.dirRead)
	w.Uvarint(uint64(len(s.inuse)))
	for _, p := range s.inuse {
		w.Varint(int64(p))
	}
	w.Bool(s.hasEvents)
	w.Bool(s.hasWorkspace)
	writeFile(&w, &s.events)
	w.Varint(s.offset)
	w.Varint(int64(s.bad))
	st := &s.st
	for _, v := range []string{st.ID, st.Cwd, st.Version, st.Prompt, st.Ended, st.Aborted} {
		w.Str(v)
	}
	w.Time(st.Started)
	w.Bool(st.Known)
	w.Bool(st.Busy)
	w.Time(st.Since)
	w.Bool(st.More)
	w.Time(st.Last)
	w.Uvarint(uint64(len(st.Pending)))
	for _, c := range st.Pending {
		w.Str(c.ID)
		w.Str(c.Name)
		w.Str(c.Args)
		w.Time(c.Since)
	}
	w.Uvarint(uint64(len(st.Perms)))
	for _, p := range st.Perms {
		w.Str(p.ID)
		w.Str(p.CallID)
		w.Str(p.Kind)
		w.Str(p.Detail)
		w.Time(p.Since)
	}
	writeFile(&w, &s.ws)
	for _, v := range []string{s.wsv.ID, s.wsv.Cwd, s.wsv.Name, s.wsv.Client, s.wsErr} {
		w.Str(v)
	}
	w.Time(s.wsv.Created)
	w.Time(s.wsv.Updated)
	st.Drift.Append(&w)
	return w.B
}

// decodeSession reads an entry of encodeSession. Any error means the
// entry is not used (the session is read again); it never panics on
// garbage.
func decodeSession(path string, b []byte) (*sessState, error) {
	if !filepath.IsAbs(path) || !isSessionID(filepath.Base(path)) || filepath.Base(filepath.Dir(path)) != "session-state" {
		return nil, errors.New("not a session folder path")
	}
	r := wire.NewSharedReader(b)
	if r.Format(checkpointFormat); r.Err() != nil {
		return nil, r.Err()
	}
	s := &sessState{dir: path}
	s.id = r.Str()
	s.dirRead = readFile(&r)
	n := r.Uvarint()
	if n > maxPending {
		r.Fail("more inuse pids than are kept")
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		s.inuse = append(s.inuse, int(r.Varint()))
	}
	s.hasEvents = r.Bool()
	s.hasWorkspace = r.Bool()
	s.events = readFile(&r)
	s.offset = r.Varint()
	s.bad = int(r.Varint())
	st := &s.st
	for _, v := range []*string{&st.ID, &st.Cwd, &st.Version, &st.Prompt, &st.Ended, &st.Aborted} {
		*v = r.Str()
	}
	st.Started = r.Time()
	st.Known = r.Bool()
	st.Busy = r.Bool()
	st.Since = r.Time()
	st.More = r.Bool()
	st.Last = r.Time()
	n = r.Uvarint()
	if n > maxPending {
		r.Fail("more pending calls than are kept")
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		st.Pending = append(st.Pending, call{ID: r.Str(), Name: r.Str(), Args: r.Str(), Since: r.Time()})
	}
	n = r.Uvarint()
	if n > maxPending {
		r.Fail("more pending permissions than are kept")
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		st.Perms = append(st.Perms, perm{ID: r.Str(), CallID: r.Str(), Kind: r.Str(), Detail: r.Str(), Since: r.Time()})
	}
	s.ws = readFile(&r)
	for _, v := range []*string{&s.wsv.ID, &s.wsv.Cwd, &s.wsv.Name, &s.wsv.Client, &s.wsErr} {
		*v = r.Str()
	}
	s.wsv.Created = r.Time()
	s.wsv.Updated = r.Time()
	st.Drift = kit.ReadSeen(&r)
	r.End()
	switch {
	case r.Err() != nil:
		return nil, r.Err()
	case s.id != filepath.Base(path):
		return nil, errors.New("saved for another session id")
	case s.offset < 0 || s.offset > s.events.size || s.bad < 0 || s.events.size < 0 || s.ws.size < 0:
		return nil, errors.New("offsets out of range")
	}
	return s, nil
}
