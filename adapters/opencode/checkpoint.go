package opencode

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

// What the adapter learned of each database is saved through the tracker
// in the store (adapters.Checkpointer), so that a restart does not read
// every database whole again:
//
//	db\x00<db path>                   the cursors: the largest message and part
//	                                  rowids, the ids of those rows, the file's
//	                                  (device, inode)
//	session\x00<db path>\x00<id>      one session: its row, its last assistant
//	                                  message, its pending and running tool
//	                                  parts, its last write
//
// After a restart the first pass adopts them as if it had read them itself
// and checks them as every pass checks the previous one's state: the file
// must be the same, the row at each cursor must still be there (else rowids
// may have been given again, and the database is read whole). Then it reads
// only what changed since: sessions whose row's time_updated differs,
// sessions with message or part rows past the cursors, sessions with work in
// flight (always read again), sessions whose entry is missing or unusable.
// Owners, servers and activity are never saved: each pass finds them anew in
// the process table, so saved state never makes a live owner dead or a dead
// one running; at worst it is data a pass would have read the same.

// checkpointFormat is the first byte of every saved entry. Bump it when
// the layout changes, and also when what a saved session means changes (a
// reader fix that would conclude differently from the same rows): an entry
// of another format is not used, so the next start reads those sessions
// (or, for a database entry, the whole database) again.
const checkpointFormat = 2 // 2: the session's drift

// Key prefixes of saved entries.
const (
	dbKeyPrefix      = "db\x00"
	sessionKeyPrefix = "session\x00"
)

// maxSavedTools bounds the in-flight tool parts of one saved session (a
// garbage count must not allocate much; real sessions have a handful).
const maxSavedTools = 4096

// savedDB is one database's state as a checkpoint holds it: the cursors
// and the sessions read up to them.
type savedDB struct {
	cur      cursors
	sessions map[string]*sessionData
}

func dbEntryKey(path string) string { return dbKeyPrefix + path }

func sessionEntryKey(path, id string) string { return sessionKeyPrefix + path + "\x00" + id }

// parseEntryKey splits a saved key into its database path and, for a
// session entry, the session id.
func parseEntryKey(k string) (path, id string, session bool, err error) {
	if p, ok := strings.CutPrefix(k, dbKeyPrefix); ok {
		if p == "" || strings.Contains(p, "\x00") {
			return "", "", false, errors.New("bad database key")
		}
		return p, "", false, nil
	}
	if rest, ok := strings.CutPrefix(k, sessionKeyPrefix); ok {
		p, id, ok := strings.Cut(rest, "\x00")
		if !ok || p == "" || id == "" || strings.Contains(id, "\x00") {
			return "", "", false, errors.New("bad session key")
		}
		return p, id, true, nil
	}
	return "", "", false, errors.New("unknown key")
}

// Restore implements adapters.Checkpointer. The entries are held until a
// pass lists their database; a database whose own entry is missing or
// unusable is read whole, and a session whose entry is unusable is read
// again, as a new one would be.
func (a *Adapter) Restore(saved map[string][]byte) {
	dbs := map[string]*savedDB{}
	withCursors := map[string]bool{}
	// What the store holds by key: a session entry's version is its
	// session (see Checkpoint), a database entry's nil.
	var book kit.Book[*sessionData]
	book.Reset(len(saved))
	bad := 0
	var firstErr error
	for k, v := range saved {
		path, id, isSession, err := parseEntryKey(k)
		var s *sessionData
		if err == nil {
			d := dbs[path]
			if d == nil {
				d = &savedDB{sessions: map[string]*sessionData{}}
				dbs[path] = d
			}
			if isSession {
				if s, err = decodeSession(v, path, id); err == nil {
					d.sessions[id] = s
				}
			} else if d.cur, err = decodeCursors(v); err == nil {
				withCursors[path] = true
			}
		}
		if err != nil {
			bad++
			if firstErr == nil {
				firstErr = fmt.Errorf("%q: %w", k, err)
			}
			book.SavedBad(k)
			continue
		}
		book.SavedBytes(k, s, v)
	}
	for path := range dbs {
		if !withCursors[path] {
			delete(dbs, path)
		}
	}

	a.passMu.Lock()
	a.restored = dbs
	a.passMu.Unlock()
	a.cpMu.Lock()
	a.cpBook = book
	a.cpMu.Unlock()

	n := 0
	for _, d := range dbs {
		n += len(d.sessions)
	}
	a.log.Info("restored saved OpenCode state", zap.Int("databases", len(dbs)), zap.Int("sessions", n), zap.Int("unusable", bad))
	if firstErr != nil {
		a.log.Info("some saved OpenCode state is not usable; what it covered is read again", zap.Int("unusable", bad), zap.NamedError("first", firstErr))
	}
}

// published records a database's state after a successful read, for the
// next Checkpoint. The sessions map and the sessions in it are never
// changed once a read returned them.
func (a *Adapter) published(path string, r *dbReader) {
	a.cpMu.Lock()
	defer a.cpMu.Unlock()
	if a.cpDBs == nil {
		a.cpDBs = map[string]*savedDB{}
	}
	a.cpDBs[path] = &savedDB{cur: r.cur, sessions: r.sessions}
}

// listed records the databases a pass found; the entries of the others
// are dropped by the next Checkpoint.
func (a *Adapter) listed(keep map[string]bool) {
	a.cpMu.Lock()
	defer a.cpMu.Unlock()
	a.cpListed = keep
	for path := range a.cpDBs {
		if !keep[path] {
			delete(a.cpDBs, path)
		}
	}
}

// Checkpoint implements adapters.Checkpointer: the entries of sessions
// read since their last save, the cursors when they moved, and the keys
// of sessions and databases no longer there. Before the first pass it
// drops nothing; a database listed but not read yet (locked, say) keeps
// its entries (keepEntry).
func (a *Adapter) Checkpoint() adapters.Checkpoint {
	a.cpMu.Lock()
	defer a.cpMu.Unlock()
	ch := a.cpBook.Changes()
	for path, d := range a.cpDBs {
		if d.sessions == nil {
			continue // nothing read (no tables yet): its entries go
		}
		ch.PutSum(dbEntryKey(path), nil, encodeCursors(d.cur))
		for id, s := range d.sessions {
			// An unchanged session is the same pointer (passes reuse
			// unchanged sessions): it costs no encoding. One read again
			// (work in flight) to the same bytes is not written.
			if k := sessionEntryKey(path, id); !ch.Unchanged(k, s) {
				ch.PutSum(k, s, encodeSession(s))
			}
		}
	}
	cp, commit := ch.End(a.keepEntry)
	cp.Commit = func() {
		a.cpMu.Lock()
		defer a.cpMu.Unlock()
		commit()
	}
	return cp
}

// keepEntry reports whether an entry the last pass's state does not have
// stays saved: every entry before the first pass (nothing is known to be
// gone), and those of a database the pass listed but could not read.
func (a *Adapter) keepEntry(k string) bool {
	if a.cpListed == nil {
		return true
	}
	path, _, _, err := parseEntryKey(k)
	return err == nil && a.cpListed[path] && a.cpDBs[path] == nil
}

// encodeCursors writes a database entry.
func encodeCursors(c cursors) []byte {
	w := cpWriter{wire.Writer{B: make([]byte, 0, 96)}}
	w.Byte(checkpointFormat)
	w.Varint(c.msgRowid)
	w.Str(c.msgID)
	w.Varint(c.partRowid)
	w.Str(c.partID)
	w.Bool(c.idKnown)
	w.Uvarint(c.dev)
	w.Uvarint(c.ino)
	return w.B
}

// decodeCursors reads a database entry. Any error means the entry is not
// used (the database is read whole); it never panics on garbage.
func decodeCursors(b []byte) (cursors, error) {
	r := cpReader{wire.NewReader(b)}
	r.Format(checkpointFormat)
	var c cursors
	c.msgRowid = r.Varint()
	c.msgID = r.Str()
	c.partRowid = r.Varint()
	c.partID = r.Str()
	c.idKnown = r.Bool()
	c.dev = r.Uvarint()
	c.ino = r.Uvarint()
	r.End()
	if r.Err() == nil && (c.msgRowid < 0 || c.partRowid < 0) {
		r.Fail("negative rowid")
	}
	return c, r.Err()
}

// encodeSession writes a session entry: everything a database read puts in
// sessionData (the id and the source are in the key).
func encodeSession(s *sessionData) []byte {
	w := cpWriter{wire.Writer{B: make([]byte, 0, 256)}}
	w.Byte(checkpointFormat)
	w.Str(s.ProjectID)
	w.Str(s.ParentID)
	w.Str(s.Directory)
	w.Str(s.Title)
	w.Str(s.Version)
	w.time(s.Created)
	w.time(s.Updated)
	w.time(s.Archived)
	w.time(s.LastWrite)
	if m := s.LastAssistant; m == nil {
		w.Bool(false)
	} else {
		w.Bool(true)
		w.Str(m.ID)
		w.Str(m.SessionID)
		w.Str(m.Role)
		w.Str(m.Agent)
		w.Str(m.ModelID)
		w.Str(m.Cwd)
		w.time(m.Created)
		w.time(m.Completed)
		w.Str(m.ErrorName)
		w.Str(m.ErrorMessage)
	}
	w.Uvarint(uint64(len(s.Tools)))
	for i := range s.Tools {
		t := &s.Tools[i]
		w.Str(t.ID)
		w.Str(t.MessageID)
		w.Str(t.SessionID)
		w.Str(t.Type)
		w.Str(t.Tool)
		w.Str(t.CallID)
		w.Str(t.Status)
		w.Str(t.Title)
		w.time(t.Start)
		w.time(t.End)
		w.Str(t.ChildSessionID)
		w.Bool(t.Interrupted)
		w.time(t.Created)
		w.time(t.Updated)
	}
	s.drift.Append(&w.Writer)
	return w.B
}

// decodeSession reads a session entry of the database at path. Any error
// means the entry is not used (the session is read again); it never panics
// on garbage, and it refuses what no read could have produced.
func decodeSession(b []byte, path, id string) (*sessionData, error) {
	r := cpReader{wire.NewReader(b)}
	r.Format(checkpointFormat)
	s := &sessionData{ID: id, Source: path}
	s.ProjectID = r.Str()
	s.ParentID = r.Str()
	s.Directory = r.Str()
	s.Title = r.Str()
	s.Version = r.Str()
	s.Created = r.time()
	s.Updated = r.time()
	s.Archived = r.time()
	s.LastWrite = r.time()
	if r.Bool() {
		m := &ocMessage{}
		m.ID = r.Str()
		m.SessionID = r.Str()
		m.Role = r.Str()
		m.Agent = r.Str()
		m.ModelID = r.Str()
		m.Cwd = r.Str()
		m.Created = r.time()
		m.Completed = r.time()
		m.ErrorName = r.Str()
		m.ErrorMessage = r.Str()
		if r.Err() == nil && (!m.Assistant() || m.ID == "" || m.SessionID != id) {
			r.Fail("last assistant message is not this session's assistant message")
		}
		s.LastAssistant = m
	}
	n := r.Uvarint()
	if r.Err() == nil && n > maxSavedTools {
		r.Fail("more tool parts than are kept")
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		var t toolCall
		t.ID = r.Str()
		t.MessageID = r.Str()
		t.SessionID = r.Str()
		t.Type = r.Str()
		t.Tool = r.Str()
		t.CallID = r.Str()
		t.Status = r.Str()
		t.Title = r.Str()
		t.Start = r.time()
		t.End = r.time()
		t.ChildSessionID = r.Str()
		t.Interrupted = r.Bool()
		t.Created = r.time()
		t.Updated = r.time()
		if r.Err() == nil && (!t.InFlight() || t.ID == "" || t.SessionID != id) {
			r.Fail("tool part is not one of this session's in flight")
		}
		s.Tools = append(s.Tools, t)
	}
	s.drift = kit.ReadSeen(&r.Reader)
	r.End()
	if r.Err() == nil && s.LastWrite.Before(s.Updated) {
		r.Fail("last write before the session row's")
	}
	if r.Err() != nil {
		return nil, r.Err()
	}
	return s, nil
}

// cpWriter is wire.Writer with this adapter's time encoding.
type cpWriter struct{ wire.Writer }

// time writes milliseconds since the epoch, 0 for the zero time: every
// time the reader keeps comes from OpenCode's milliseconds (msTime).
func (w *cpWriter) time(t time.Time) {
	if t.IsZero() {
		w.Varint(0)
		return
	}
	w.Varint(t.UnixMilli())
}

// cpReader is wire.Reader with this adapter's time encoding.
type cpReader struct{ wire.Reader }

// time reads what cpWriter.time wrote, as msTime would have made it.
func (r *cpReader) time() time.Time {
	v := r.Varint()
	if r.Err() != nil || v == 0 {
		return time.Time{}
	}
	t := msInt(v)
	if t.IsZero() {
		r.Fail("time out of range")
	}
	return t
}
