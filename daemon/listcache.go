package daemon

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"sort"
	"sync"
	"time"

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
	// framed; enc[i] is order[i]'s encoding, a slice of all's bytes.
	all listBody
	enc [][]byte
	// byRec is enc by record, carried into the next snapshot, and the
	// encodings prime made ahead of it.
	byRec map[*session.Record][]byte
	// primed are the batches prime encoded since the last rebuild, in
	// the order they came.
	primed []primedBatch
	// built says the fields above describe snap (a primed cache has
	// encodings but no answer yet).
	built bool
	// used is when body last answered: forget drops the encodings of a
	// cache no list has needed for a while.
	used time.Time
}

// primedBatch is one call of prime: its records' encodings in one
// buffer, in the records' order and separated by commas, as a list
// answer holds them.
type primedBatch struct {
	recs []*session.Record
	buf  []byte
	enc  [][]byte // enc[i] is recs[i]'s, a slice of buf
}

// listBody is an answer of GET /v1/sessions: the bytes of its parts, one
// after the other. The first answer after a startup pass that primed
// the cache is the primed buffers between the frame's parts
// (fromPrimed); any other is one buffer.
type listBody [][]byte

// Len is the answer's length in bytes.
func (b listBody) Len() int {
	n := 0
	for _, p := range b {
		n += len(p)
	}
	return n
}

// WriteTo writes the answer's parts to w in order.
func (b listBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for _, p := range b {
		m, err := w.Write(p)
		n += int64(m)
		if err != nil {
			return n, err
		}
	}
	return n, nil
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
func (c *listCache) body(recs []*session.Record, f *listFilter) (listBody, error) {
	c.mu.Lock()
	c.used = time.Now()
	if !c.built || !slices.Equal(recs, c.snap) {
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
	return listBody{append(b, listSuffix...)}, nil
}

// rebuild makes the cache describe recs, reusing the encodings of the
// records it already holds. A record that does not encode (none can: the
// store encoded each one before it committed it) leaves the cache as it
// was. Callers hold mu.
//
// The answer is written in one pass, straight into its final buffer: a
// cached record's bytes are copied, a new one is encoded in place
// (api.Session.AppendJSON, held to json.Marshal by its tests). A first
// list after a restart encodes 12,000 sessions in about 20 ms that way,
// and with no second buffer: it runs while a first start's memory limit
// holds the heap near the live data, where every extra megabyte is
// collector work.
func (c *listCache) rebuild(recs []*session.Record) error {
	order := slices.Clone(recs)
	sort.SliceStable(order, func(i, j int) bool { return order[i].CreatedAt.Before(order[j].CreatedAt) })
	primed := c.primed
	c.primed = nil
	if all, enc, ok := fromPrimed(order, primed); ok {
		byRec := make(map[*session.Record][]byte, len(order))
		for i, r := range order {
			byRec[r] = enc[i]
		}
		c.snap, c.order, c.enc, c.all, c.byRec = slices.Clone(recs), order, enc, all, byRec
		c.built = true
		return nil
	}

	size, cached := len(listPrefix)+len(listSuffix), 0
	for _, r := range order {
		if b, ok := c.byRec[r]; ok {
			size += len(b) + 1
			cached++
		}
	}
	perNew := 900 // a realistic session is ~800 bytes
	if cached > 0 {
		perNew = size/cached + 64
	}
	all := make([]byte, 0, size+(len(order)-cached)*perNew)
	all = append(all, listPrefix...)
	ends := make([]int, len(order))
	for i, r := range order {
		if i > 0 {
			all = append(all, ',')
		}
		if b, ok := c.byRec[r]; ok {
			all = append(all, b...)
		} else {
			s := api.FromRecord(r)
			b, err := s.AppendJSON(all)
			if err != nil {
				return fmt.Errorf("encode session %s: %w", r.ID, err)
			}
			all = b
		}
		ends[i] = len(all)
	}
	all = append(all, listSuffix...)
	enc := make([][]byte, len(order))
	byRec := make(map[*session.Record][]byte, len(order))
	start := len(listPrefix)
	for i, r := range order {
		enc[i] = all[start:ends[i]:ends[i]]
		byRec[r] = enc[i]
		start = ends[i] + 1
	}
	c.snap, c.order, c.enc, c.all, c.byRec = slices.Clone(recs), order, enc, listBody{all}, byRec
	c.built = true
	return nil
}

// listComma separates the primed batches of an answer.
var listComma = []byte{','}

// fromPrimed returns the answer for order made of the primed batches
// themselves, framed, when order is exactly their records one batch
// after the other (a first start's: its sessions are listed in the order
// they were created and committed; a restart's whose pass changed no
// record). Then the first list copies nothing:
// at 12,000 sessions, building one 9.4 MB buffer of them cost 10-19 ms.
func fromPrimed(order []*session.Record, primed []primedBatch) (listBody, [][]byte, bool) {
	if len(primed) == 0 {
		return nil, nil, false
	}
	n := 0
	for _, p := range primed {
		n += len(p.recs)
	}
	if n != len(order) {
		return nil, nil, false
	}
	i := 0
	for _, p := range primed {
		for _, r := range p.recs {
			if order[i] != r {
				return nil, nil, false
			}
			i++
		}
	}
	all := make(listBody, 0, 2*len(primed)+1)
	all = append(all, []byte(listPrefix))
	enc := make([][]byte, 0, len(order))
	for k, p := range primed {
		if k > 0 {
			all = append(all, listComma)
		}
		all = append(all, p.buf)
		enc = append(enc, p.enc...)
	}
	return append(all, []byte(listSuffix)), enc, true
}

// prime encodes recs, records the store has just committed, for the
// lists to come: the next rebuild takes their bytes instead of encoding
// them (see fromPrimed). The records must be the store's own, as
// ListShared will hand them out (a commit's, passed on by the tracker's
// OnCreated), so the soundness argument above holds for them too; an
// encoding no snapshot comes to show is dropped by the next rebuild. They
// are encoded outside the lock, into one buffer for all of them; if one
// does not encode, none is kept, and rebuild encodes and reports it.
func (c *listCache) prime(recs []*session.Record) {
	buf := make([]byte, 0, len(recs)*900) // a realistic session is ~800 bytes
	ends := make([]int, len(recs))
	for i, r := range recs {
		if i > 0 {
			buf = append(buf, ',')
		}
		s := api.FromRecord(r)
		b, err := s.AppendJSON(buf)
		if err != nil {
			return
		}
		buf, ends[i] = b, len(b)
	}
	enc := make([][]byte, len(recs))
	start := 0
	for i := range recs {
		enc[i] = buf[start:ends[i]:ends[i]]
		start = ends[i] + 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byRec == nil {
		c.byRec = make(map[*session.Record][]byte, len(recs))
	}
	for i, r := range recs {
		if _, ok := c.byRec[r]; !ok {
			c.byRec[r] = enc[i]
		}
	}
	c.primed = append(c.primed, primedBatch{recs: slices.Clone(recs), buf: buf, enc: enc})
}

// listCacheIdle is how long the list cache outlives the last list that
// used it. Its encodings are the largest thing a daemon keeps (16 MiB at
// 17,000 sessions, a quarter of the live heap), and an old snapshot's
// also keeps that snapshot's records alive; encoding them again is
// 3 ms at 2,000 sessions, ~25 ms at 17,000, paid by the first list
// after a quiet minute.
const listCacheIdle = time.Minute

// forget drops every encoding when no list has used the cache since
// idle before now, and reports whether it dropped any. The next list
// encodes every session again, as the first one does.
func (c *listCache) forget(now time.Time, idle time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.used.IsZero() || now.Sub(c.used) < idle {
		return false
	}
	if !c.built && len(c.byRec) == 0 && len(c.primed) == 0 {
		return false
	}
	c.snap, c.order, c.all, c.enc, c.byRec, c.primed, c.built = nil, nil, nil, nil, nil, nil, false
	return true
}

// forgetWhenIdle runs forget every idle/2 until ctx is done. After a
// drop it collects and gives the freed pages back: otherwise Go keeps
// them until the heap grows to twice what it was, which an idle daemon's
// heap may not do for an hour.
func (c *listCache) forgetWhenIdle(ctx context.Context, idle time.Duration, dropped func()) {
	t := time.NewTicker(idle / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if c.forget(now, idle) {
				debug.FreeOSMemory()
				if dropped != nil {
					dropped()
				}
			}
		}
	}
}
