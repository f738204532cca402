package kit

import (
	"hash/maphash"

	"github.com/sessiond/sessiond/adapters"
)

// Book is the ledger of what the store holds of an adapter's checkpoint:
// for each key, the version V of the state its entry was encoded from, and
// for entries compared by content, the sum of their bytes. Not safe for
// concurrent use: the adapter guards it with the lock of its Checkpoint,
// Restore and commits.
type Book[V comparable] struct {
	held map[string]V
	// sums are the sums of the entries written, or restored, as bytes
	// compared by content (Changes.PutSum, SavedBytes); bad the entries of
	// no use, only replaced or deleted. Both stay nil for an adapter that
	// uses neither, so its ledger is one map, as small as its own was.
	sums map[string]uint64
	bad  map[string]bool
	seed maphash.Seed
	// live is the set of keys a checkpoint's state has, kept from one
	// Changes to the next and cleared: made anew it was a map of every
	// input every 10 s, most of an idle daemon's garbage once its passes
	// made none.
	live map[string]bool
}

// Reset forgets every entry: Restore starts the book over for n entries.
func (b *Book[V]) Reset(n int) {
	b.held = make(map[string]V, n)
	b.sums, b.bad = nil, nil
}

func (b *Book[V]) init() {
	if b.held == nil {
		b.held = map[string]V{}
	}
}

func (b *Book[V]) sum(bytes []byte) uint64 {
	if b.seed == (maphash.Seed{}) {
		b.seed = maphash.MakeSeed()
	}
	return maphash.Bytes(b.seed, bytes)
}

// Saved records that the store holds an entry for key encoded from the
// state at version v. An entry restored but not usable is saved at a
// version no state has (claude's and codex's generation 0 of a state
// never read): it is written again once its input is read, and deleted
// otherwise.
func (b *Book[V]) Saved(key string, v V) {
	b.init()
	b.held[key] = v
}

// SavedBytes is Saved for an entry compared by content: its bytes' sum is
// kept, so that Changes.PutSum of the same bytes writes nothing.
func (b *Book[V]) SavedBytes(key string, v V, bytes []byte) {
	b.init()
	b.held[key] = v
	if b.sums == nil {
		b.sums = map[string]uint64{}
	}
	b.sums[key] = b.sum(bytes)
}

// SavedBad records that the store holds an entry for key that is of no
// use: the next Checkpoint writes it again or deletes it.
func (b *Book[V]) SavedBad(key string) {
	b.init()
	var zero V
	b.held[key] = zero
	if b.bad == nil {
		b.bad = map[string]bool{}
	}
	b.bad[key] = true
}

// Changes begins a checkpoint: the adapter tells it every entry its
// state has now, then calls End. One checkpoint at a time: the next
// Changes starts over the set of keys the last one was told.
func (b *Book[V]) Changes() *Changes[V] {
	b.init()
	if b.live == nil {
		b.live = map[string]bool{}
	}
	clear(b.live)
	return &Changes[V]{b: b, put: map[string][]byte{}, puts: map[string]V{}, live: b.live}
}

// Changes collects one checkpoint.
type Changes[V comparable] struct {
	b       *Book[V]
	put     map[string][]byte
	puts    map[string]V
	putSums map[string]uint64
	live    map[string]bool
}

// Unchanged marks key as one the state has, at version v, and reports
// whether the store's entry for it was encoded from that version: if not,
// the adapter encodes it and calls Put (or PutSum).
func (c *Changes[V]) Unchanged(key string, v V) bool {
	c.live[key] = true
	hv, ok := c.b.held[key]
	return ok && hv == v && !c.b.bad[key]
}

// Put writes key's entry, encoded from the state at version v.
func (c *Changes[V]) Put(key string, v V, bytes []byte) {
	c.live[key] = true
	c.put[key] = bytes
	c.puts[key] = v
}

// PutSum is Put for an entry compared by content: when the store holds
// these very bytes already (a state read again to the same conclusion),
// nothing is written, and the entry is known to be of version v from now.
func (c *Changes[V]) PutSum(key string, v V, bytes []byte) {
	c.live[key] = true
	b := c.b
	sum := b.sum(bytes)
	if old, ok := b.sums[key]; ok && old == sum && !b.bad[key] {
		b.held[key] = v
		return
	}
	c.put[key] = bytes
	c.puts[key] = v
	if c.putSums == nil {
		c.putSums = map[string]uint64{}
	}
	c.putSums[key] = sum
}

// End returns the checkpoint: the entries Put, and the deletion of every
// key the store holds that the state no longer has, unless keep(key) (an
// entry restored and not taken yet, say, or one of an input the pass could
// not read). commit marks them saved; the adapter calls it under its lock
// from the checkpoint's Commit, once the store wrote them. Uncommitted,
// the next checkpoint returns them again.
func (c *Changes[V]) End(keep func(key string) bool) (cp adapters.Checkpoint, commit func()) {
	cp.Put = c.put
	for key := range c.b.held {
		if !c.live[key] && !keep(key) {
			cp.Del = append(cp.Del, key)
		}
	}
	b, puts, sums, del := c.b, c.puts, c.putSums, cp.Del
	return cp, func() {
		for key, v := range puts {
			b.held[key] = v
			delete(b.bad, key)
			if s, ok := sums[key]; ok {
				if b.sums == nil {
					b.sums = map[string]uint64{}
				}
				b.sums[key] = s
			} else {
				delete(b.sums, key)
			}
		}
		for _, key := range del {
			delete(b.held, key)
			delete(b.sums, key)
			delete(b.bad, key)
		}
	}
}

// Restored holds the entries Restore handed back, by key, until the pass
// that lists their inputs takes them. Not safe for concurrent use.
type Restored[T any] struct {
	m map[string]T
}

// Reset starts holding, for n entries: Holding is true from now on, until
// Drop.
func (r *Restored[T]) Reset(n int) { r.m = make(map[string]T, n) }

// Hold keeps v for key.
func (r *Restored[T]) Hold(key string, v T) { r.m[key] = v }

// Take returns the entry held for key, once.
func (r *Restored[T]) Take(key string) (v T, ok bool) {
	v, ok = r.m[key]
	if ok {
		delete(r.m, key)
	}
	return v, ok
}

// Holds reports whether an entry is held for key: Checkpoint keeps it.
func (r *Restored[T]) Holds(key string) bool {
	_, ok := r.m[key]
	return ok
}

// Holding reports whether Restore ran and no Drop followed.
func (r *Restored[T]) Holding() bool { return r.m != nil }

// Drop lets the entries not taken go, once a pass listed every input:
// their inputs are gone, and the next Checkpoint deletes them.
func (r *Restored[T]) Drop() { r.m = nil }
