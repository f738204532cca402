package state

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/sessiond/sessiond/session"
)

// Get returns the session with the id; an error wrapping ErrNotFound if
// there is none.
func (s *Store) Get(id string) (rec *session.Record, err error) {
	err = s.view(func(tx *Tx) error {
		rec, err = tx.get(id)
		return err
	})
	return rec, err
}

// ByUpstream returns the session recorded for an agent's own session id,
// so an observation is matched to its record without a scan.
func (s *Store) ByUpstream(agent, upstreamID string) (rec *session.Record, err error) {
	err = s.view(func(tx *Tx) error {
		rec, err = tx.byUpstream(agent, upstreamID)
		return err
	})
	return rec, err
}

// Lookup resolves what a user typed: an exact id, else an exact upstream id
// (of any agent), else a unique prefix of an id or of an upstream id. No
// match is an error wrapping ErrNotFound; several are an *AmbiguousError.
func (s *Store) Lookup(ref string) (rec *session.Record, err error) {
	if ref == "" {
		return nil, fmt.Errorf("look up session %q: %w", ref, ErrNotFound)
	}
	bref := []byte(ref)
	err = s.view(func(tx *Tx) error {
		if v := tx.sessions.Get(bref); v != nil {
			rec, err = decodeRecord(ref, v)
			return err
		}
		exact := map[string]bool{}
		prefix := map[string]bool{}
		err := tx.upstream.ForEach(func(k, v []byte) error {
			up := k[bytes.IndexByte(k, 0)+1:]
			switch {
			case bytes.Equal(up, bref):
				exact[string(v)] = true
			case bytes.HasPrefix(up, bref):
				prefix[string(v)] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		cands := exact
		if len(cands) == 0 {
			c := tx.sessions.Cursor()
			for k, _ := c.Seek(bref); k != nil && bytes.HasPrefix(k, bref); k, _ = c.Next() {
				prefix[string(k)] = true
			}
			cands = prefix
		}
		switch len(cands) {
		case 0:
			return fmt.Errorf("look up session %q: %w", ref, ErrNotFound)
		case 1:
			for id := range cands {
				rec, err = tx.get(id)
			}
			return err
		}
		amb := &AmbiguousError{Ref: ref}
		for id := range cands {
			amb.Candidates = append(amb.Candidates, id)
		}
		sort.Strings(amb.Candidates)
		return amb
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// List returns every session, ordered by CreatedAt then ID, so listings
// are stable. The records are the caller's own copies.
func (s *Store) List() ([]*session.Record, error) {
	shared, err := s.ListShared()
	if err != nil {
		return nil, err
	}
	recs := make([]*session.Record, len(shared))
	for i, r := range shared {
		recs[i] = r.Clone()
	}
	return recs, nil
}

// Empty reports whether the store holds no session: a first start.
func (s *Store) Empty() (empty bool, err error) {
	err = s.view(func(tx *Tx) error {
		k, _ := tx.sessions.Cursor().First()
		empty = k == nil
		return nil
	})
	return empty, err
}

// ListShared is List without the copies: the records, and the slice, are
// the store's own, shared by every caller, and must not be modified. The
// store never changes a record it handed out (a commit replaces it), so
// they stay a consistent view of one moment. The reconciler reads every
// record on every pass and copies only those it changes: copying all of
// them was a third of an idle pass over 10,000 sessions.
func (s *Store) ListShared() ([]*session.Record, error) {
	s.cacheMu.RLock()
	sorted, loaded := s.sorted, s.cache != nil
	s.cacheMu.RUnlock()
	if sorted != nil {
		return sorted, nil
	}
	if !loaded {
		if err := s.loadCache(); err != nil {
			return nil, err
		}
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.sorted == nil {
		recs := make([]*session.Record, 0, len(s.cache))
		for _, r := range s.cache {
			recs = append(recs, r)
		}
		sort.Slice(recs, func(i, j int) bool {
			a, b := recs[i], recs[j]
			if !a.CreatedAt.Equal(b.CreatedAt) {
				return a.CreatedAt.Before(b.CreatedAt)
			}
			return a.ID < b.ID
		})
		s.sorted = recs
	}
	return s.sorted, nil
}

// Events returns the events with Seq > since, ascending, at most limit of
// them (0 means no limit), so a client resumes exactly where it stopped.
func (s *Store) Events(since uint64, limit int) (evs []session.Event, err error) {
	if since == math.MaxUint64 {
		return nil, nil
	}
	err = s.view(func(tx *Tx) error {
		c := tx.events.Cursor()
		for k, v := c.Seek(seqKey(since + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(evs) >= limit {
				break
			}
			var ev session.Event
			if err := json.Unmarshal(v, &ev); err != nil {
				return fmt.Errorf("decode event %x: %w", k, err)
			}
			evs = append(evs, ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

// LastSeq is the last event sequence number ever assigned (0 if none), also
// when retention has pruned that event, so an SSE client knows where the
// log ends.
func (s *Store) LastSeq() (seq uint64, err error) {
	err = s.view(func(tx *Tx) error {
		seq = tx.events.Sequence()
		return nil
	})
	return seq, err
}

// FirstSeq is the oldest retained event's sequence number (0 if none), so a
// client that asks for older ones can be told they were pruned.
func (s *Store) FirstSeq() (seq uint64, err error) {
	err = s.view(func(tx *Tx) error {
		if k, _ := tx.events.Cursor().First(); len(k) == 8 {
			seq = binary.BigEndian.Uint64(k)
		}
		return nil
	})
	return seq, err
}

// loadCache reads every record from bbolt and keeps them. It holds the
// write lock so no commit lands between the read and the cache. The
// records are decoded on every CPU: at a restart this load is most of what
// stands between the daemon and ready (about 10 µs of encoding/json per
// record), and the decoded records go into the cache as they are, with no
// copy, since nobody else holds them yet.
func (s *Store) loadCache() error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.cacheMu.RLock()
	loaded := s.cache != nil
	s.cacheMu.RUnlock()
	if loaded {
		return nil // another caller loaded it while this one waited
	}
	var recs []*session.Record
	err := s.view(func(tx *Tx) (err error) {
		recs, err = tx.allParallel()
		return err
	})
	if err != nil {
		return err
	}
	c := make(map[string]*session.Record, len(recs))
	for _, r := range recs {
		c[r.ID] = r
	}
	s.cacheMu.Lock()
	s.cache, s.sorted = c, nil
	s.cacheMu.Unlock()
	return nil
}

// cacheWritten applies a committed transaction's records to the cache.
// Callers hold writeMu.
func (s *Store) cacheWritten(written map[string]*session.Record) {
	if len(written) == 0 {
		return
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	if s.cache == nil {
		return
	}
	for id, r := range written {
		s.cache[id] = r
	}
	s.sorted = nil
}
