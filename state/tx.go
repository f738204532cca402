package state

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/session"
)

// appendFill is the fill of pages of buckets written at increasing keys.
const appendFill = 0.95

// NewID returns a new session id: 12 lowercase hex characters from
// crypto/rand, short enough to type and, like Docker's short ids, unique
// enough for one user's sessions (Create retries on the rare collision).
func NewID() string {
	var b [6]byte
	rand.Read(b[:]) // never fails since Go 1.24
	return hex.EncodeToString(b[:])
}

// Tx is one transaction over the store. The reconciler gets one from Batch
// to change many sessions atomically. A Tx is valid only inside the
// function it was passed to.
type Tx struct {
	s        *Store
	tx       *bolt.Tx
	sessions *bolt.Bucket
	upstream *bolt.Bucket
	events   *bolt.Bucket
	appended int
	// written holds each record as this transaction wrote it, for the
	// store's cache once the transaction has committed.
	written map[string]*session.Record
	// arena holds the encodings this transaction hands to bbolt, which
	// keeps each value until the commit: many values per allocation.
	arena []byte
	// The keys this transaction adds to the sessions and to the upstream
	// index (see keyTrack).
	ids, ukeys keyTrack
}

// arenaChunk is the size of each of a transaction's encoding buffers: a
// realistic record is under 1 KiB.
const arenaChunk = 64 << 10

// encode appends a value to the transaction's arena with appendJSON (a
// record's or event's AppendJSON) and returns its bytes, valid until the
// transaction ends.
func (tx *Tx) encode(appendJSON func([]byte) ([]byte, error)) ([]byte, error) {
	if cap(tx.arena)-len(tx.arena) < 4<<10 {
		tx.arena = make([]byte, 0, arenaChunk)
	}
	start := len(tx.arena)
	all, err := appendJSON(tx.arena)
	if err != nil {
		return nil, err
	}
	if cap(all) == cap(tx.arena) {
		tx.arena = all
	} // else it outgrew the chunk (a value of kilobytes) into an array of its own
	return all[start:len(all):len(all)], nil
}

// unencode gives back the arena space of b, the last value encode
// returned, when it is not written after all.
func (tx *Tx) unencode(b []byte) {
	n := len(tx.arena)
	if len(b) > 0 && n >= len(b) && &tx.arena[n-1] == &b[len(b)-1] {
		tx.arena = tx.arena[:n-len(b)]
	}
}

func (s *Store) newTx(btx *bolt.Tx) (*Tx, error) {
	root := btx.Bucket(bucketV1)
	if root == nil {
		return nil, fmt.Errorf("store %s has no v1 bucket", s.path)
	}
	tx := &Tx{s: s, tx: btx, sessions: root.Bucket(bucketSessions), upstream: root.Bucket(bucketUpstream), events: root.Bucket(bucketEvents)}
	if tx.sessions == nil || tx.upstream == nil || tx.events == nil {
		return nil, fmt.Errorf("store %s lacks a bucket of schema version %d", s.path, currentSchema)
	}
	// Events are only appended, at increasing keys: pages filled to the
	// brim, not bbolt's half (the default suits keys that land anywhere,
	// like the sessions' random ids). Half-empty pages doubled the events'
	// share of the file, and of the daemon's resident memory, which counts
	// the pages of the mapped file it touches.
	tx.events.FillPercent = appendFill
	return tx, nil
}

// view runs fn in a read-only transaction: a consistent snapshot that
// never blocks writers.
func (s *Store) view(fn func(tx *Tx) error) error {
	return s.db.View(func(btx *bolt.Tx) error {
		tx, err := s.newTx(btx)
		if err != nil {
			return err
		}
		return fn(tx)
	})
}

// Batch runs fn in one write transaction, so a reconcile pass over many
// sessions commits (with all its events) or not at all. An error from fn
// rolls everything back and is returned as is. Changed waiters are woken
// only after the commit succeeded. fn may run concurrently with readers but
// never with another writer; it must not call Store methods that write.
func (s *Store) Batch(fn func(tx *Tx) error) error {
	// bbolt serializes writers anyway; serializing here too makes the cache
	// updates below happen in commit order.
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	var fnErr error
	var appended int
	var written map[string]*session.Record
	start := time.Now()
	defer func() { s.commits.observe(time.Since(start)) }()
	err := s.db.Update(func(btx *bolt.Tx) error {
		tx, err := s.newTx(btx)
		if err != nil {
			return err
		}
		fnErr = fn(tx)
		appended, written = tx.appended, tx.written
		return fnErr
	})
	if fnErr != nil {
		return fnErr
	}
	if err != nil {
		return fmt.Errorf("write to store %s: %w", s.path, err)
	}
	s.cacheWritten(written)
	if appended > 0 {
		s.notify()
	}
	return nil
}

// Create records a new session with its first event in one transaction.
// See Tx.Create.
func (s *Store) Create(rec *session.Record, ev session.Event) error {
	return s.Batch(func(tx *Tx) error { return tx.Create(rec, ev) })
}

// Update changes one session in one transaction. See Tx.Update.
func (s *Store) Update(id string, fn func(rec *session.Record) ([]session.Event, error)) (*session.Record, error) {
	var out *session.Record
	err := s.Batch(func(tx *Tx) (err error) {
		out, err = tx.Update(id, fn)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// get returns the session with the id; an error wrapping ErrNotFound if
// there is none.
func (tx *Tx) get(id string) (*session.Record, error) {
	v := tx.sessions.Get([]byte(id))
	if v == nil {
		return nil, fmt.Errorf("session %s: %w", id, ErrNotFound)
	}
	return decodeRecord(id, v)
}

// byUpstream returns the session recorded for the agent's own session id;
// an error wrapping ErrNotFound if there is none.
func (tx *Tx) byUpstream(agent, upstreamID string) (*session.Record, error) {
	id := tx.upstream.Get(upstreamKey(agent, upstreamID))
	if id == nil {
		return nil, fmt.Errorf("session %s/%s: %w", agent, upstreamID, ErrNotFound)
	}
	v := tx.sessions.Get(id)
	if v == nil {
		return nil, fmt.Errorf("session %s/%s (index names %s): %w", agent, upstreamID, id, ErrNotFound)
	}
	return decodeRecord(string(id), v)
}

// allParallel is all with the decoding spread over GOMAXPROCS goroutines.
// The values are bbolt's memory, valid until the transaction ends, which
// is after every goroutine is done. The first error (in key order) wins.
func (tx *Tx) allParallel() ([]*session.Record, error) {
	type kv struct{ k, v []byte }
	var raw []kv
	if err := tx.sessions.ForEach(func(k, v []byte) error {
		raw = append(raw, kv{k, v})
		return nil
	}); err != nil {
		return nil, err
	}
	recs := make([]*session.Record, len(raw))
	errs := make([]error, len(raw))
	workers := min(runtime.GOMAXPROCS(0), max(1, len(raw)/256))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(raw); i += workers {
				recs[i], errs[i] = decodeRecord(string(raw[i].k), raw[i].v)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// Create records rec and appends ev, its first event, with ev's SessionID
// set to rec's id and Agent and Time filled when empty (Type defaults to
// session.EventCreated). It sets rec.ID (a NewID) when empty, rec.V, and
// CreatedAt and UpdatedAt when zero. (Agent, UpstreamID) must be free, else
// the error wraps ErrConflict and nothing is written, so a Batch may go on;
// an empty UpstreamID (a launch whose agent has not shown its id yet) takes
// no index entry.
func (tx *Tx) Create(rec *session.Record, ev session.Event) error {
	return tx.create(rec, ev, false)
}

// CreateOwned is Create for a record the store may keep: its cache holds
// rec itself, not a copy, so the caller must not change rec once this
// returns nil. A first start creates every session at once (12,000 at 10k
// Claude + 2k OpenCode), and a copy of each beside the tracker's own was
// 29 % of the live heap at the end of that pass.
func (tx *Tx) CreateOwned(rec *session.Record, ev session.Event) error {
	return tx.create(rec, ev, true)
}

func (tx *Tx) create(rec *session.Record, ev session.Event, owned bool) error {
	if rec == nil {
		return errors.New("create session: nil record")
	}
	if rec.Agent == "" {
		return fmt.Errorf("create session %s (upstream %q): agent is empty", rec.ID, rec.UpstreamID)
	}
	id := rec.ID
	if id == "" {
		for id = NewID(); tx.sessions.Get([]byte(id)) != nil; id = NewID() {
		}
	} else if !tx.ids.past(tx.sessions, []byte(id)) && tx.sessions.Get([]byte(id)) != nil {
		return fmt.Errorf("create session %s: %w", id, ErrIDInUse)
	}
	var ukey []byte
	if rec.UpstreamID != "" {
		ukey = upstreamKey(rec.Agent, rec.UpstreamID)
		if !tx.ukeys.past(tx.upstream, ukey) {
			if owner := tx.upstream.Get(ukey); owner != nil {
				return fmt.Errorf("create session %s/%s: held by session %s: %w", rec.Agent, rec.UpstreamID, owner, ErrConflict)
			}
		}
	}
	now := tx.s.now()
	rec.ID = id
	rec.V = recordVersion
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	if rec.UpdatedAt.IsZero() {
		rec.UpdatedAt = rec.CreatedAt
	}
	b, err := tx.encode(rec.AppendJSON)
	if err != nil {
		return fmt.Errorf("encode session %s: %w", id, err)
	}
	idKey := []byte(id)
	tx.ids.add(tx.sessions, idKey)
	if err := tx.sessions.Put(idKey, b); err != nil {
		return fmt.Errorf("write session %s: %w", id, err)
	}
	if owned {
		tx.keep(rec)
	} else {
		tx.wrote(rec)
	}
	if ukey != nil {
		tx.ukeys.add(tx.upstream, ukey)
		if err := tx.upstream.Put(ukey, idKey); err != nil {
			return fmt.Errorf("index session %s: %w", id, err)
		}
	}
	ev.SessionID = id
	if ev.Agent == "" {
		ev.Agent = rec.Agent
	}
	if ev.Type == "" {
		ev.Type = session.EventCreated
	}
	if ev.Time.IsZero() {
		ev.Time = now
	}
	_, err = tx.append(ev)
	return err
}

// Update reads the session, lets fn change it in place, and appends the
// events fn returns (SessionID, Agent and Time filled when empty), all in
// this transaction. The record is rewritten, with UpdatedAt set, only if
// its encoding changed; events fn returns are appended either way. If
// (Agent, UpstreamID) changed, the index follows, and a pair held by
// another session is an error wrapping ErrConflict. An error from fn, a
// conflict, or a missing session (ErrNotFound) writes nothing, so a Batch
// may go on. Update returns the record as stored.
func (tx *Tx) Update(id string, fn func(rec *session.Record) ([]session.Event, error)) (*session.Record, error) {
	key := []byte(id)
	// old stays valid and unchanged for the whole transaction: bbolt
	// copies on write and never overwrites a value it handed out.
	old := tx.sessions.Get(key)
	if old == nil {
		return nil, fmt.Errorf("update session %s: %w", id, ErrNotFound)
	}
	rec, err := decodeRecord(id, old)
	if err != nil {
		return nil, err
	}
	prevKey := upstreamKeyOf(rec)
	evs, err := fn(rec)
	if err != nil {
		return nil, err
	}
	if rec.ID != id {
		return nil, fmt.Errorf("update session %s: the update changed the id to %q", id, rec.ID)
	}
	rec.V = recordVersion
	b, err := tx.encode(rec.AppendJSON)
	if err != nil {
		return nil, fmt.Errorf("encode session %s: %w", id, err)
	}
	now := tx.s.now()
	changed := !bytes.Equal(b, old)
	tx.unencode(b) // written below, if at all, with a new updated_at
	if changed {
		newKey := upstreamKeyOf(rec)
		moved := !bytes.Equal(prevKey, newKey)
		if moved && newKey != nil {
			if owner := tx.upstream.Get(newKey); owner != nil && string(owner) != id {
				return nil, fmt.Errorf("update session %s: %s/%s held by session %s: %w", id, rec.Agent, rec.UpstreamID, owner, ErrConflict)
			}
		}
		rec.UpdatedAt = now
		if b, err = tx.encode(rec.AppendJSON); err != nil {
			return nil, fmt.Errorf("encode session %s: %w", id, err)
		}
		if err := tx.sessions.Put(key, b); err != nil {
			return nil, fmt.Errorf("write session %s: %w", id, err)
		}
		tx.wrote(rec)
		if moved {
			if prevKey != nil && string(tx.upstream.Get(prevKey)) == id {
				if err := tx.upstream.Delete(prevKey); err != nil {
					return nil, fmt.Errorf("unindex session %s: %w", id, err)
				}
			}
			if newKey != nil {
				tx.ukeys.add(tx.upstream, newKey)
				if err := tx.upstream.Put(newKey, key); err != nil {
					return nil, fmt.Errorf("index session %s: %w", id, err)
				}
			}
		}
	}
	for _, ev := range evs {
		if ev.SessionID == "" {
			ev.SessionID = id
		}
		if ev.Agent == "" {
			ev.Agent = rec.Agent
		}
		if ev.Time.IsZero() {
			ev.Time = now
		}
		if _, err := tx.append(ev); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

func upstreamKeyOf(rec *session.Record) []byte {
	if rec.UpstreamID == "" {
		return nil
	}
	return upstreamKey(rec.Agent, rec.UpstreamID)
}

// Append adds an event that goes with no record change (a user action, a
// repair) and returns its sequence number. Time is filled when zero, and
// Agent from the session when empty.
func (tx *Tx) Append(ev session.Event) (uint64, error) {
	if ev.Agent == "" && ev.SessionID != "" {
		if v := tx.sessions.Get([]byte(ev.SessionID)); v != nil {
			var r struct {
				Agent string `json:"agent"`
			}
			if err := json.Unmarshal(v, &r); err == nil {
				ev.Agent = r.Agent
			}
		}
	}
	if ev.Time.IsZero() {
		ev.Time = tx.s.now()
	}
	return tx.append(ev)
}

// append writes ev under the next sequence number. The number comes from
// the bucket's own sequence, which is stored in the file, so numbers never
// repeat or go back, across restarts and pruning alike.
func (tx *Tx) append(ev session.Event) (uint64, error) {
	seq, err := tx.events.NextSequence()
	if err != nil {
		return 0, fmt.Errorf("next event seq: %w", err)
	}
	ev.Seq = seq
	b, err := tx.encode(ev.AppendJSON)
	if err != nil {
		return 0, fmt.Errorf("encode event %d: %w", seq, err)
	}
	if err := tx.events.Put(seqKey(seq), b); err != nil {
		return 0, fmt.Errorf("write event %d: %w", seq, err)
	}
	tx.appended++
	if seq%tx.s.pruneStep == 0 {
		if _, err := tx.s.prune(tx.events, seq); err != nil {
			return 0, err
		}
	}
	return seq, nil
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

// prune deletes the oldest events: those at or below last-MaxEvents and
// those older than MaxEventAge. It walks from the first event and stops at
// the first one kept, so it costs little when there is little to drop.
func (s *Store) prune(events *bolt.Bucket, last uint64) (int, error) {
	cutoff := s.now().Add(-s.maxAge)
	var limit uint64
	if n := uint64(s.maxEvents); last > n {
		limit = last - n
	}
	var dead [][]byte
	c := events.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if len(k) == 8 && binary.BigEndian.Uint64(k) > limit {
			var e struct {
				Time time.Time `json:"time"`
			}
			// An event that does not decode has no age; it goes.
			if json.Unmarshal(v, &e) == nil && !e.Time.Before(cutoff) {
				break
			}
		}
		dead = append(dead, bytes.Clone(k))
	}
	// Delete after the walk: deleting under a bbolt cursor skips keys.
	for _, k := range dead {
		if err := events.Delete(k); err != nil {
			return 0, fmt.Errorf("prune event %x: %w", k, err)
		}
	}
	return len(dead), nil
}

// recordDecodeOptions match names as encoding/json does: in any case, but
// with underscores and dashes significant.
var recordDecodeOptions = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true))

// decodeRecord decodes a stored record. A restart decodes every record
// before it is ready, so the common case is fast: a record exactly as
// session.Record.AppendJSON writes it is read by scanRecord. Anything else
// (a record an older sessiond wrote with encoding/json, a hand edit) goes
// to go-json-experiment/json (the package that became encoding/json/v2,
// about 2.5 times as fast as encoding/json, BenchmarkDecodeRecord), which
// reads records as encoding/json does (TestDecodeRecordMatchesEncodingJSON);
// should that stricter decoder refuse a value (invalid UTF-8, a duplicate
// name), encoding/json gets the last word, so no record readable before
// is lost.
func decodeRecord(id string, v []byte) (*session.Record, error) {
	if r, ok := scanRecord(v); ok {
		return r, nil
	}
	r := new(session.Record)
	if err := jsonv2.Unmarshal(v, r, recordDecodeOptions); err == nil {
		return r, nil
	}
	r = new(session.Record)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, fmt.Errorf("decode session %s: %w", id, err)
	}
	return r, nil
}

// keyTrack follows the keys a transaction adds to one bucket (every Put
// of a new key must go through add), to know when a key sorts after all
// the bucket holds. A first start creates its thousands of sessions in
// chunks, ordered so that each chunk's ids and upstream keys all land
// past the last chunk's (tracker's commit): such a key needs no lookup
// (it cannot be in use), and the bucket's pages are best filled to
// appendFill, not bbolt's half, which only doubled the pages written (a
// pwrite each) and the file.
type keyTrack struct {
	// below is the bucket's largest key when the transaction first
	// asked (loaded), top the largest added since.
	loaded     bool
	below, top []byte
	// added counts the keys added; appending: all of them were past.
	added     int
	appending bool
}

// past reports whether key sorts after every key of b: those it held when
// the transaction first asked, and those added since.
func (k *keyTrack) past(b *bolt.Bucket, key []byte) bool {
	if !k.loaded {
		if last, _ := b.Cursor().Last(); last != nil {
			k.below = bytes.Clone(last)
		}
		k.loaded = true
	}
	return bytes.Compare(key, k.below) > 0 && bytes.Compare(key, k.top) > 0
}

// add notes key, about to be put in b as a new key (kept, not copied:
// bbolt keeps it too until the commit), and sets b's fill: appendFill
// while every key added was past, else bbolt's default, since bbolt
// applies a bucket's fill to the whole transaction when it commits.
func (k *keyTrack) add(b *bolt.Bucket, key []byte) {
	past := k.past(b, key)
	k.appending = past && (k.added == 0 || k.appending)
	k.added++
	if bytes.Compare(key, k.top) > 0 {
		k.top = key
	}
	if k.appending {
		b.FillPercent = appendFill
	} else {
		b.FillPercent = bolt.DefaultFillPercent
	}
}

// wrote remembers a copy of a record as written, for the cache after the
// commit.
func (tx *Tx) wrote(rec *session.Record) { tx.keep(rec.Clone()) }

// keep remembers rec itself as written (see CreateOwned).
func (tx *Tx) keep(rec *session.Record) {
	if tx.written == nil {
		tx.written = map[string]*session.Record{}
	}
	tx.written[rec.ID] = rec
}
