package daemon

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// listPrefix and listSuffix frame the sessions of GET /v1/sessions as
// writeJSON frames an api.SessionList: encoding/json writes a slice as its
// elements, each as json.Marshal writes it, between brackets and separated
// by commas, and the Encoder ends the value with a newline.
const (
	listPrefix = `{"sessions":[`
	listSuffix = "]}\n"
)

// listCache keeps the encoding of every session for GET /v1/sessions, so a
// list is a concatenation of bytes, not 10,000 encodings (40 ms of
// encoding/json at 10,000 sessions, 9 MB of JSON).
//
// It is sound because the store never changes a record it handed out: a
// commit replaces the record object (state.Store.ListShared). An encoding
// is therefore kept by the record's pointer and is right for as long as
// that pointer is listed; the map holds the pointer, so the address cannot
// be reused while the entry lives. Each new snapshot of the store rebuilds
// the cache from the old one, encoding only records it has not seen, and
// drops the rest: it holds the encodings of the records listed now and no
// others.
type listCache struct {
	mu sync.Mutex
	// snap is a copy of the store's snapshot the fields below describe,
	// compared pointer by pointer with each new one: a copy, so nothing
	// the store does to its own slice can make a stale cache look current.
	snap []*session.Record
	// order is snap in the answer's order: stably by CreatedAt, as the
	// handler always sorted.
	order []*session.Record
	// all is the whole answer of ?all=true: every session in order,
	// framed; enc[i] is order[i]'s encoding, a slice of all.
	all []byte
	enc [][]byte
	// byRec is enc by record, carried into the next snapshot.
	byRec map[*session.Record][]byte
}

// listFilter is the query of GET /v1/sessions: a status list (any of its
// comma-separated words), else every status but stopped unless all; and
// an agent.
type listFilter struct {
	all    bool
	status string
	words  []string
	agent  string
}

func (f *listFilter) match(r *session.Record) bool {
	if f.agent != "" && r.Agent != f.agent {
		return false
	}
	if f.status != "" {
		return slices.Contains(f.words, string(r.Status))
	}
	return f.all || r.Status != session.StatusStopped
}

// everything says whether the filter keeps every session of any store.
func (f *listFilter) everything() bool { return f.all && f.status == "" && f.agent == "" }

// body returns the answer of GET /v1/sessions for recs, the store's
// snapshot (ListShared), filtered by f. The bytes are shared: the caller
// must not change them. It fails only if a record does not encode.
func (c *listCache) body(recs []*session.Record, f *listFilter) ([]byte, error) {
	c.mu.Lock()
	if c.byRec == nil || !slices.Equal(recs, c.snap) {
		if err := c.rebuild(recs); err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	order, enc, all := c.order, c.enc, c.all
	c.mu.Unlock()
	if f.everything() {
		return all, nil
	}
	size := len(listPrefix) + len(listSuffix)
	for i, r := range order {
		if f.match(r) {
			size += len(enc[i]) + 1
		}
	}
	b := make([]byte, 0, size)
	b = append(b, listPrefix...)
	first := true
	for i, r := range order {
		if f.match(r) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, enc[i]...)
		}
	}
	return append(b, listSuffix...), nil
}

// rebuild makes the cache describe recs, reusing the encodings of the
// records it already holds. A record that does not encode (none can: the
// store encoded each one before it committed it) leaves the cache as it
// was. Callers hold mu.
func (c *listCache) rebuild(recs []*session.Record) error {
	order := slices.Clone(recs)
	sort.SliceStable(order, func(i, j int) bool { return order[i].CreatedAt.Before(order[j].CreatedAt) })

	enc := make([][]byte, len(order))
	var missing []int
	for i, r := range order {
		if b, ok := c.byRec[r]; ok {
			enc[i] = b
		} else {
			missing = append(missing, i)
		}
	}
	if err := encodeRecords(order, enc, missing); err != nil {
		return err
	}

	size := len(listPrefix) + len(listSuffix)
	for _, b := range enc {
		size += len(b) + 1
	}
	all := make([]byte, 0, size)
	all = append(all, listPrefix...)
	byRec := make(map[*session.Record][]byte, len(order))
	for i, r := range order {
		if i > 0 {
			all = append(all, ',')
		}
		start := len(all)
		all = append(all, enc[i]...)
		enc[i] = all[start:len(all):len(all)]
		byRec[r] = enc[i]
	}
	all = append(all, listSuffix...)
	c.snap, c.order, c.enc, c.all, c.byRec = slices.Clone(recs), order, enc, all, byRec
	return nil
}

// encodeRecords fills enc[i] for every i in idx with order[i]'s wire form,
// as json.Marshal writes it, on every CPU when there are many (a first
// list after a restart encodes them all). Each worker appends its share
// to one buffer (api.Session.AppendJSON, held to json.Marshal by its
// tests), and enc[i] are slices of it.
func encodeRecords(order []*session.Record, enc [][]byte, idx []int) error {
	workers := min(runtime.GOMAXPROCS(0), max(1, len(idx)/256))
	share := (len(idx) + workers - 1) / max(1, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		part := idx[min(len(idx), w*share):min(len(idx), (w+1)*share)]
		encode := func() {
			buf := make([]byte, 0, len(part)*1024) // a realistic session is ~800 bytes
			ends := make([]int, len(part))
			for k, i := range part {
				s := api.FromRecord(order[i])
				b, err := s.AppendJSON(buf)
				if err != nil {
					errs[w] = fmt.Errorf("encode session %s: %w", order[i].ID, err)
					return
				}
				buf = b
				ends[k] = len(buf)
			}
			start := 0
			for k, i := range part {
				enc[i] = buf[start:ends[k]:ends[k]]
				start = ends[k]
			}
		}
		if workers == 1 {
			encode()
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			encode()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
