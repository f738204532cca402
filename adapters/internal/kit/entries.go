package kit

import (
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
)

// Entries is the Restore and Checkpoint of an adapter whose checkpoint
// holds one entry per input (a rollout, a chat, a session folder), keyed
// by its path, and whose input's state T is versioned by a generation: a
// uint64 each read of the input takes anew from the adapter's counter
// (codex, gemini, qwen, pi, copilot). The adapter keeps its Book, Restored
// and counter in its own struct, under its own lock, and makes an Entries
// of them, its encoder and decoder, for each call: Restore and Checkpoint
// then say only how its entries are encoded and which states are saved.
type Entries[T any] struct {
	// Mu is the adapter's lock, which guards Book, Restored, Last and the
	// states: Restore and Checkpoint hold it, as does the checkpoint's
	// Commit.
	Mu       sync.Locker
	Book     *Book[uint64]
	Restored *Restored[T]
	// Last is the adapter's counter: the last generation given.
	Last *uint64
	// Gen is where a state keeps its generation.
	Gen func(T) *uint64
	// Decode reads the entry saved for key; an error means it is of no
	// use (another format or bound, garbage) and its input is read again.
	// Restore calls it from several goroutines at once, without Mu: it
	// must touch nothing but its arguments. Encode writes a state's
	// entry.
	Decode func(key string, b []byte) (T, error)
	Encode func(T) []byte
	// Log gets Restore's line: "restored saved <What> state", with the
	// number of usable entries under Inputs ("rollouts").
	Log          *zap.Logger
	What, Inputs string
}

// Restore implements adapters.Checkpointer.Restore: it starts Book and
// Restored over, and holds each entry that decodes, at a new generation,
// until the pass that lists its input takes it. An entry that does not
// decode is booked at generation 0, which no state has: the next
// Checkpoint writes it again once its input is read, and deletes it
// otherwise. It logs how many were usable, and the first error.
func (e Entries[T]) Restore(saved map[string][]byte) {
	decoded := decodeAll(saved, e.Decode)
	e.Mu.Lock()
	defer e.Mu.Unlock()
	e.Restored.Reset(len(saved))
	e.Book.Reset(len(saved))
	bad := 0
	var firstErr error
	for _, d := range decoded {
		key, v, err := d.key, d.v, d.err
		if err != nil {
			bad++
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", key, err)
			}
			e.Book.Saved(key, 0) // deleted by the next Checkpoint unless read again
			continue
		}
		*e.Last++
		*e.Gen(v) = *e.Last
		e.Restored.Hold(key, v)
		e.Book.Saved(key, *e.Last)
	}
	e.Log.Info("restored saved "+e.What+" state", zap.Int(e.Inputs, len(saved)-bad), zap.Int("unusable", bad))
	if firstErr != nil {
		e.Log.Info("some saved "+e.What+" state is not usable; those "+e.Inputs+" are read again", zap.Int("unusable", bad), zap.NamedError("first", firstErr))
	}
}

// Checkpoint implements adapters.Checkpointer.Checkpoint: of the states
// saved yields (by key; under Mu, so it may walk the adapter's maps),
// those read since their entry was last saved are encoded and put, and
// every entry the store holds for a key saved no longer yields is deleted,
// except those Restored still holds (restored, not taken by a pass yet).
// The checkpoint's Commit, once the store wrote it, takes Mu and marks
// them saved.
func (e Entries[T]) Checkpoint(saved iter.Seq2[string, T]) adapters.Checkpoint {
	e.Mu.Lock()
	defer e.Mu.Unlock()
	ch := e.Book.Changes()
	for key, v := range saved {
		if gen := *e.Gen(v); !ch.Unchanged(key, gen) {
			ch.Put(key, gen, e.Encode(v))
		}
	}
	cp, commit := ch.End(e.Restored.Holds)
	cp.Commit = func() {
		e.Mu.Lock()
		defer e.Mu.Unlock()
		commit()
	}
	return cp
}

// decoded is one entry's Decode.
type decoded[T any] struct {
	key string
	v   T
	err error
}

// decodeAll decodes saved on every core: a restart waits for it (the
// 2,000 entries of Gemini chats took 40 ms on one).
func decodeAll[T any](saved map[string][]byte, decode func(string, []byte) (T, error)) []decoded[T] {
	out := make([]decoded[T], 0, len(saved))
	for key := range saved {
		out = append(out, decoded[T]{key: key})
	}
	slices.SortFunc(out, func(a, b decoded[T]) int { return strings.Compare(a.key, b.key) })
	Each(len(out), func(i int) {
		d := &out[i]
		d.v, d.err = decode(d.key, saved[d.key])
	})
	return out
}
