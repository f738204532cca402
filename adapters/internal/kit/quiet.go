package kit

import (
	"slices"
	"strings"

	"github.com/sessiond/sessiond/adapters"
)

// Quiet hands an adapter's quiet sessions to the tracker as one
// adapters.QuietSet, the same pointer pass after pass while none of them
// changes. An idle pass of an adapter that returned every session in its
// list (2,000 of history) made the tracker look up, fingerprint and
// compare each of them again every 5 s; with the set it skips them all.
//
// A session is loud, and stays in the adapter's list, while it has an
// owner (the tracker probes it every pass anyway, and owners come and go
// with processes) or an item about a process (an orphan: it ends when
// the process does); the rest are quiet. Split compares this pass's quiet
// sessions with the last set field by field (adapters.Observed.Equal), so
// it holds whatever the adapter builds them from; an adapter that keeps
// its built observations between passes makes that comparison of equal
// strings by pointer.
type Quiet struct {
	set *adapters.QuietSet
	// last are the set's sessions, which the set owns: compared, never
	// changed.
	last []adapters.Observed
	// key is what the last SplitAt's sessions were built from, when
	// keyed; allQuiet that none of them was loud.
	key      Key
	keyed    bool
	allQuiet bool
}

// Key is an adapter's fingerprint of every input its observations are
// built from (its read counter, its count of other changes): equal keys
// promise equal observations, before owners are assigned.
type Key [2]uint64

// Again returns the last set, and true, when the adapter may hand it out
// without building its observations at all: its inputs are as they were
// at the last SplitAt (key), and that pass had no loud session. The
// adapter asks only when nothing this pass can make one loud (no process
// of its agent runs, nothing remembered below a dead one): its idle pass
// over a history then builds nothing.
func (q *Quiet) Again(key Key) (*adapters.QuietSet, bool) {
	if q.keyed && q.allQuiet && q.key == key && q.set != nil {
		return q.set, true
	}
	return nil, false
}

// SplitAt is Split of observations built from the inputs key names.
func (q *Quiet) SplitAt(key Key, obs []adapters.Observed) (loud []adapters.Observed, set *adapters.QuietSet) {
	loud, set = q.Split(obs)
	q.key, q.keyed, q.allQuiet = key, true, len(loud) == 0
	return loud, set
}

// Split returns the loud sessions of obs, in their order, and the set of
// the quiet ones: the last set when they are equal to it, else a new one.
// obs is one observation per id, best sorted by UpstreamID (an adapter
// sorts its list anyway; the set must be). Split keeps no reference to
// obs: the list and the set hold copies.
func (q *Quiet) Split(obs []adapters.Observed) (loud []adapters.Observed, set *adapters.QuietSet) {
	q.keyed = false
	loud = make([]adapters.Observed, 0, 8)
	same := true
	n := 0 // quiet sessions so far
	for i := range obs {
		o := &obs[i]
		if IsLoud(o) {
			loud = append(loud, *o)
			continue
		}
		if same && (n >= len(q.last) || !q.last[n].Equal(o)) {
			same = false
		}
		n++
	}
	if same && n == len(q.last) && q.set != nil {
		return loud, q.set
	}
	quiet := make([]adapters.Observed, 0, n)
	for i := range obs {
		if o := &obs[i]; !IsLoud(o) {
			quiet = append(quiet, *o)
		}
	}
	byID := func(a, b adapters.Observed) int { return strings.Compare(a.UpstreamID, b.UpstreamID) }
	if !slices.IsSortedFunc(quiet, byID) {
		slices.SortFunc(quiet, byID)
	}
	q.last = quiet
	q.set = adapters.NewQuietSet(quiet)
	return loud, q.set
}

// IsLoud reports whether o stays in the adapter's list: it has an owner,
// or an item about a process.
func IsLoud(o *adapters.Observed) bool {
	if len(o.Owners) > 0 {
		return true
	}
	for _, list := range [][]adapters.Issue{o.InFlight, o.Problems} {
		for i := range list {
			if list[i].Process != nil {
				return true
			}
		}
	}
	return false
}
