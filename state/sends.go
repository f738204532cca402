package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/sessiond/sessiond/session"
)

// Sends are prompts queued for sessions (v1/sends/<id> -> JSON
// session.Send). Each change is one transaction, so a send moves from
// queued to delivering exactly once however many callers race for it:
// the delivery that wins the move is the only one that sends.

// ErrSendState is returned by UpdateSend when fn refuses the send's state.
var ErrSendState = errors.New("send is not in the state asked for")

// PutSend writes a new send.
func (s *Store) PutSend(x session.Send) error {
	if x.ID == "" || x.SessionID == "" {
		return fmt.Errorf("put send: empty id or session id")
	}
	return s.sends(func(b *bolt.Bucket) error {
		if b.Get([]byte(x.ID)) != nil {
			return fmt.Errorf("put send %s: %w", x.ID, ErrConflict)
		}
		return putSend(b, x)
	})
}

// UpdateSend changes send id with fn inside one transaction; fn returns
// ErrSendState (wrapped or not) to leave it as it is. The send as written
// is returned.
func (s *Store) UpdateSend(id string, fn func(*session.Send) error) (session.Send, error) {
	var out session.Send
	err := s.sends(func(b *bolt.Bucket) error {
		v := b.Get([]byte(id))
		if v == nil {
			return fmt.Errorf("send %s: %w", id, ErrNotFound)
		}
		if err := json.Unmarshal(v, &out); err != nil {
			return fmt.Errorf("decode send %s: %w", id, err)
		}
		if err := fn(&out); err != nil {
			return err
		}
		return putSend(b, out)
	})
	return out, err
}

// BadSend is a stored send that does not decode (written by another
// version, or damaged). It stays in the store as it is, is named so its
// user can be told, and is never delivered.
type BadSend struct {
	ID  string
	Err error
}

// Sends returns every send that decodes, oldest first, and those that do
// not beside them: one bad send must not stop every other from being
// listed and delivered.
func (s *Store) Sends() ([]session.Send, []BadSend, error) {
	var out []session.Send
	var bad []BadSend
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketV1).Bucket(bucketSends)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var x session.Send
			err := json.Unmarshal(v, &x)
			if err == nil && (x.ID != string(k) || x.SessionID == "") {
				err = fmt.Errorf("it names id %q and session %q", x.ID, x.SessionID)
			}
			if err != nil {
				bad = append(bad, BadSend{ID: string(k), Err: fmt.Errorf("decode send %q: %w", k, err)})
				return nil
			}
			out = append(out, x)
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, bad, nil
}

// DeleteSends removes the sends named.
func (s *Store) DeleteSends(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	return s.sends(func(b *bolt.Bucket) error {
		for _, id := range ids {
			if err := b.Delete([]byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Store) sends(fn func(*bolt.Bucket) error) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketV1).Bucket(bucketSends)
		if b == nil {
			return fmt.Errorf("store %s lacks the sends bucket of schema version %d", s.path, currentSchema)
		}
		return fn(b)
	})
}

func putSend(b *bolt.Bucket, x session.Send) error {
	v, err := json.Marshal(x)
	if err != nil {
		return err
	}
	return b.Put([]byte(x.ID), v)
}
