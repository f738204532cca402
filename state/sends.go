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

// Sends returns every send, oldest first.
func (s *Store) Sends() ([]session.Send, error) {
	var out []session.Send
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketV1).Bucket(bucketSends)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var x session.Send
			if err := json.Unmarshal(v, &x); err != nil {
				return fmt.Errorf("decode send %s: %w", k, err)
			}
			out = append(out, x)
			return nil
		})
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, err
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
