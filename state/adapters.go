package state

import (
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// An adapter's saved state is a cache of what it learned per input (for
// Claude: a transcript's identity, size, read offsets and turn state), so a
// restart re-reads only the inputs that changed. The store keeps the values
// as opaque bytes: their format belongs to the adapter, which must treat a
// value it cannot decode as absent (and read the input again). Nothing here
// is a session record, so no event is written and the record cache is not
// touched.

// AdapterState returns every entry agent saved, by key. The values are
// copies, safe to keep after the call.
func (s *Store) AdapterState(agent string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := s.db.View(func(tx *bolt.Tx) error {
		b := adapterBucket(tx, agent)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if v == nil {
				return nil // a nested bucket: never written by SaveAdapterState
			}
			out[string(k)] = append([]byte(nil), v...)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read saved state of adapter %s: %w", agent, err)
	}
	return out, nil
}

// SaveAdapterState writes agent's changed entries and deletes the dropped
// ones, in one transaction. An empty key or agent name is refused, as bbolt
// would refuse it.
func (s *Store) SaveAdapterState(agent string, put map[string][]byte, del []string) error {
	if agent == "" {
		return fmt.Errorf("save adapter state: empty adapter name")
	}
	if len(put) == 0 && len(del) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket(bucketV1)
		if root == nil {
			return fmt.Errorf("store %s has no v1 bucket", s.path)
		}
		all := root.Bucket(bucketAdapters)
		if all == nil {
			return fmt.Errorf("store %s lacks the adapters bucket of schema version %d", s.path, currentSchema)
		}
		b, err := all.CreateBucketIfNotExists([]byte(agent))
		if err != nil {
			return err
		}
		for _, k := range del {
			if k == "" {
				continue
			}
			if err := b.Delete([]byte(k)); err != nil {
				return fmt.Errorf("delete %q: %w", k, err)
			}
		}
		// In key order, into full pages: a first save puts every input
		// at once (10,000 transcripts), and in map order bbolt left each
		// page half empty. Later saves put a few keys, and a page that
		// overflows splits as it would anyway.
		keys := make([]string, 0, len(put))
		for k := range put {
			if k == "" {
				return fmt.Errorf("entry with an empty key")
			}
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.FillPercent = appendFill
		for _, k := range keys {
			if err := b.Put([]byte(k), put[k]); err != nil {
				return fmt.Errorf("put %q: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("save state of adapter %s: %w", agent, err)
	}
	return nil
}

func adapterBucket(tx *bolt.Tx, agent string) *bolt.Bucket {
	root := tx.Bucket(bucketV1)
	if root == nil {
		return nil
	}
	all := root.Bucket(bucketAdapters)
	if all == nil {
		return nil
	}
	return all.Bucket([]byte(agent))
}
