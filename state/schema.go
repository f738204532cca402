package state

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
)

// Bucket and key names of the tree in the package comment.
var (
	bucketV1       = []byte("v1")
	bucketMeta     = []byte("meta")
	bucketSessions = []byte("sessions")
	bucketUpstream = []byte("upstream")
	bucketEvents   = []byte("events")
	bucketAdapters = []byte("adapters")
	bucketSends    = []byte("sends")
	keySchema      = []byte("schema")
)

// migration brings the store from version-1 to version. Migrations run in
// order, all in the one write transaction of Open, so a crash mid-way leaves
// the previous version intact.
type migration struct {
	version uint32
	name    string
	migrate func(tx *bolt.Tx) error
}

// migrations is the ordered history of the schema. Append only; never edit
// a released step.
var migrations = []migration{
	{1, "create meta, sessions and events buckets", createV1},
	{2, "index sessions by agent and upstream id", indexUpstream},
	{3, "create the adapters bucket of what adapters learned per input", createAdapters},
	{4, "create the sends bucket of queued prompts", createSends},
}

// currentSchema is the store schema this build writes.
var currentSchema = migrations[len(migrations)-1].version

func createV1(tx *bolt.Tx) error {
	root, err := tx.CreateBucketIfNotExists(bucketV1)
	if err != nil {
		return err
	}
	for _, name := range [][]byte{bucketMeta, bucketSessions, bucketEvents} {
		if _, err := root.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket v1/%s: %w", name, err)
		}
	}
	return nil
}

// createAdapters creates v1/adapters. Version 2 stores had none: their
// adapters start from nothing and read every input once, as before.
func createAdapters(tx *bolt.Tx) error {
	if _, err := tx.Bucket(bucketV1).CreateBucketIfNotExists(bucketAdapters); err != nil {
		return fmt.Errorf("create bucket v1/adapters: %w", err)
	}
	return nil
}

// createSends creates v1/sends, the prompts queued by `sessionctl send
// --when-idle`. Version 3 stores had none.
func createSends(tx *bolt.Tx) error {
	if _, err := tx.Bucket(bucketV1).CreateBucketIfNotExists(bucketSends); err != nil {
		return fmt.Errorf("create bucket v1/sends: %w", err)
	}
	return nil
}

// indexUpstream builds v1/upstream from the records. Version 1 did not
// enforce the uniqueness of (agent, upstream id); should two records share
// a pair, the earliest created one (then the smaller id) keeps the entry,
// as it is the one the rest of the history refers to.
func indexUpstream(tx *bolt.Tx) error {
	root := tx.Bucket(bucketV1)
	idx, err := root.CreateBucketIfNotExists(bucketUpstream)
	if err != nil {
		return fmt.Errorf("create bucket v1/upstream: %w", err)
	}
	type owner struct {
		id      string
		created time.Time
	}
	owners := map[string]owner{}
	err = root.Bucket(bucketSessions).ForEach(func(k, v []byte) error {
		var r struct {
			Agent      string    `json:"agent"`
			UpstreamID string    `json:"upstream_id"`
			CreatedAt  time.Time `json:"created_at"`
		}
		if err := json.Unmarshal(v, &r); err != nil {
			return fmt.Errorf("decode session %s: %w", k, err)
		}
		if r.UpstreamID == "" {
			return nil
		}
		key := string(upstreamKey(r.Agent, r.UpstreamID))
		o, ok := owners[key]
		if ok && !r.CreatedAt.Before(o.created) {
			return nil // ForEach runs in id order: ties keep the smaller id
		}
		owners[key] = owner{string(k), r.CreatedAt}
		return nil
	})
	if err != nil {
		return err
	}
	for key, o := range owners {
		if err := idx.Put([]byte(key), []byte(o.id)); err != nil {
			return fmt.Errorf("index session %s: %w", o.id, err)
		}
	}
	return nil
}

// upstreamKey is the v1/upstream key of an (agent, upstream id) pair. Agent
// names hold no NUL, so the pair is unambiguous.
func upstreamKey(agent, upstreamID string) []byte {
	k := make([]byte, 0, len(agent)+1+len(upstreamID))
	k = append(k, agent...)
	k = append(k, 0)
	return append(k, upstreamID...)
}

// readSchema reads the stored version; 0 for a fresh file.
func readSchema(tx *bolt.Tx) (uint32, error) {
	root := tx.Bucket(bucketV1)
	if root == nil {
		return 0, nil
	}
	meta := root.Bucket(bucketMeta)
	if meta == nil {
		return 0, nil
	}
	v := meta.Get(keySchema)
	if v == nil {
		return 0, nil
	}
	if len(v) != 4 {
		return 0, fmt.Errorf("schema version is %d bytes, want 4", len(v))
	}
	return binary.BigEndian.Uint32(v), nil
}

// migrate brings the schema to currentSchema, refusing (without writing) a
// newer one, and tidies the event log. A panic means bbolt met a corrupt
// page the check did not reach; it becomes a *corruptError.
func (s *Store) migrate() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &corruptError{fmt.Errorf("reading store %s panicked: %v", s.path, r)}
		}
	}()
	var cur uint32
	if err := s.db.View(func(tx *bolt.Tx) (err error) {
		cur, err = readSchema(tx)
		return err
	}); err != nil {
		return err
	}
	if cur > currentSchema {
		return fmt.Errorf("schema version %d is newer than this sessiond knows (%d): run a newer sessiond, or move the file aside to start afresh", cur, currentSchema)
	}
	var applied []string
	err = s.db.Update(func(tx *bolt.Tx) error {
		for _, m := range migrations {
			if m.version <= cur {
				continue
			}
			if err := m.migrate(tx); err != nil {
				return fmt.Errorf("migrate schema to version %d (%s): %w", m.version, m.name, err)
			}
			applied = append(applied, m.name)
		}
		root := tx.Bucket(bucketV1)
		if cur != currentSchema {
			v := binary.BigEndian.AppendUint32(nil, currentSchema)
			if err := root.Bucket(bucketMeta).Put(keySchema, v); err != nil {
				return fmt.Errorf("write schema version: %w", err)
			}
		}
		events := root.Bucket(bucketEvents)
		// The bucket sequence is the source of event seqs. Should a writer
		// ever have stored keys past it, move it up so seqs never repeat.
		if k, _ := events.Cursor().Last(); len(k) == 8 {
			if last := binary.BigEndian.Uint64(k); last > events.Sequence() {
				if err := events.SetSequence(last); err != nil {
					return fmt.Errorf("raise event sequence to %d: %w", last, err)
				}
			}
		}
		// Age-based retention also after a long downtime.
		_, err := s.prune(events, events.Sequence())
		return err
	})
	if err != nil {
		return err
	}
	if len(applied) > 0 {
		s.log.Info("migrated store schema", zap.String("path", s.path),
			zap.Uint32("from", cur), zap.Uint32("to", currentSchema), zap.Strings("steps", applied))
	}
	return nil
}
