package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// freshList is GET /v1/sessions as the handler wrote it before the cache:
// every record converted and encoded anew, each time. The cache must
// answer these bytes, exactly.
func freshList(recs []*session.Record, q url.Values) []byte {
	all, _ := strconv.ParseBool(q.Get("all"))
	status, agent := q.Get("status"), q.Get("agent")
	containsWord := func(list, w string) bool {
		for _, x := range strings.Split(list, ",") {
			if x == w {
				return true
			}
		}
		return false
	}
	out := api.SessionList{Sessions: []api.Session{}}
	for _, rec := range recs {
		if agent != "" && rec.Agent != agent {
			continue
		}
		if status != "" {
			if !containsWord(status, string(rec.Status)) {
				continue
			}
		} else if !all && rec.Status == session.StatusStopped {
			continue
		}
		out.Sessions = append(out.Sessions, api.FromRecord(rec))
	}
	sort.SliceStable(out.Sessions, func(i, j int) bool {
		return out.Sessions[i].CreatedAt.Before(out.Sessions[j].CreatedAt)
	})
	w := httptest.NewRecorder()
	writeJSON(w, http.StatusOK, out)
	return w.Body.Bytes()
}

// listQueries is every filter of GET /v1/sessions, alone and together, and
// the odd spellings the handler accepts.
var listQueries = func() []string {
	qs := []string{"", "all=true", "all=1", "all=false", "all=yes", "all=", "status=", "agent=", "status=running,", "status=,stopped", "status=stopped,stopped"}
	for _, st := range []string{"starting", "running", "stopped", "interrupted", "unknown", "running,interrupted", "stopped,unknown,running"} {
		qs = append(qs, "status="+st, "status="+st+"&all=true")
	}
	var withAgent []string
	for _, q := range qs {
		for _, a := range []string{"claude", "opencode", "nobody"} {
			sep := "&"
			if q == "" {
				sep = ""
			}
			withAgent = append(withAgent, q+sep+"agent="+a)
		}
	}
	return append(qs, withAgent...)
}()

func getList(t *testing.T, h http.Handler, query string) []byte {
	t.Helper()
	req := httptest.NewRequest("GET", "http://sessiond/v1/sessions?"+query, nil)
	req = req.WithContext(context.WithValue(req.Context(), peerKey, peer{uid: os.Getuid()}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /v1/sessions?%s: status %d: %s", query, w.Code, w.Body.Bytes())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET /v1/sessions?%s: Content-Type %q", query, ct)
	}
	if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(w.Body.Len()) {
		t.Fatalf("GET /v1/sessions?%s: Content-Length %q for %d bytes", query, cl, w.Body.Len())
	}
	return w.Body.Bytes()
}

// checkLists holds the handler's answer to every query to a fresh encoding
// of the store's records.
func checkLists(t *testing.T, step string, h http.Handler, st *state.Store) {
	t.Helper()
	recs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range listQueries {
		v, err := url.ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		got, want := getList(t, h, q), freshList(recs, v)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: GET /v1/sessions?%s differs from a fresh encoding:\n got %.300s\nwant %.300s", step, q, got, want)
		}
	}
}

// TestListCacheMatchesFreshEncoding: the cached answer of every filter is
// byte for byte a fresh encoding, at the start and after creates and
// updates that move sessions in and out of each view, change their bytes
// (escaped characters included) and their order.
func TestListCacheMatchesFreshEncoding(t *testing.T) {
	st := listStore(t, t.TempDir(), 300)
	s := listServer(st)
	h := s.handler()
	checkLists(t, "start", h, st)
	// Asking again serves the same snapshot from the cache.
	checkLists(t, "again", h, st)

	recs, err := st.List()
	if err != nil {
		t.Fatal(err)
	}
	// Creates: one older than every session, one tying an existing
	// CreatedAt (the stable order keeps the store's), one stamped by the
	// store (a monotonic clock reading), one with characters encoding/json
	// escapes.
	tie := recs[150].CreatedAt
	news := []*session.Record{
		{Agent: "claude", UpstreamID: "new-oldest", Status: session.StatusRunning, Cwd: "/a", CreatedAt: recs[0].CreatedAt.Add(-time.Hour)},
		{Agent: "opencode", UpstreamID: "new-tie", Status: session.StatusStopped, Cwd: "/b", CreatedAt: tie},
		{Agent: "claude", UpstreamID: "new-now", Status: session.StatusStarting, Cwd: "/c"},
		{Agent: "claude", UpstreamID: "new-escaped", Status: session.StatusInterrupted, Cwd: "/d/<x>&y",
			Title: "ship it \u2028 <b>now</b> & \"then\" \xff", CreatedAt: tie.Add(time.Millisecond)},
	}
	for _, r := range news {
		if err := st.Create(r, session.Event{}); err != nil {
			t.Fatal(err)
		}
	}
	checkLists(t, "after creates", h, st)

	// Updates: stopped to running and back, a new title, a new owner,
	// problems, and an agent change (into and out of the agent filter).
	update := func(id string, fn func(r *session.Record)) {
		t.Helper()
		if _, err := st.Update(id, func(r *session.Record) ([]session.Event, error) { fn(r); return nil, nil }); err != nil {
			t.Fatal(err)
		}
	}
	update(recs[1].ID, func(r *session.Record) { r.Status, r.StoppedAt = session.StatusRunning, nil })
	update(recs[10].ID, func(r *session.Record) { r.Status = session.StatusStopped })
	update(recs[20].ID, func(r *session.Record) { r.Title = "renamed </script>" })
	update(recs[30].ID, func(r *session.Record) {
		r.Owner = &proc.Identity{BootID: "b", PID: 7, StartTicks: 9}
		r.Problems = append(r.Problems, session.Problem{Kind: "stale_busy_marker", Detail: "d", Since: time.Unix(5, 0).UTC()})
	})
	update(news[2].ID, func(r *session.Record) { r.Status = session.StatusRunning })
	checkLists(t, "after updates", h, st)

	if err := st.Batch(func(tx *state.Tx) error {
		for _, r := range recs[40:140] {
			if _, err := tx.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
				r.Activity = session.ActivityIdle
				return nil, nil
			}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkLists(t, "after a batch of updates", h, st)

	shared, err := st.ListShared()
	if err != nil {
		t.Fatal(err)
	}
	if n, want := cachedRecords(s.lists), len(shared); n != want {
		t.Errorf("the cache holds %d encodings for %d sessions: replaced records were not dropped", n, want)
	}
}

// joined is the answer's bytes in one slice.
func (b listBody) joined() []byte { return bytes.Join(b, nil) }

func cachedRecords(c *listCache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byRec)
}

// TestListCacheDropsAndMatches drives the cache with snapshots the store
// cannot make today (it deletes no session): sessions gone, all gone, a
// whole new set of objects for the same sessions (a reopened store), and
// snapshot slices reused in place, and one out of order. Each answer is a fresh encoding, and
// the cache holds the encodings of the listed records only.
func TestListCacheDropsAndMatches(t *testing.T) {
	var snaps [][]*session.Record
	base := make([]*session.Record, 0, 200)
	for i := range 200 {
		r := realisticRecord(i)
		r.ID = fmt.Sprintf("id%010d", i)
		base = append(base, r)
	}
	snaps = append(snaps,
		base,
		base[50:],  // the oldest deleted
		base[:120], // the newest deleted
		append(append([]*session.Record{}, base[:30]...), base[90:]...), // a run deleted
		nil, // every session deleted
		base,
	)
	// Out of CreatedAt order (the store sorts, the answer must not depend
	// on it), with ties.
	shuffled := append([]*session.Record{}, base...)
	slices.Reverse(shuffled)
	shuffled[7], shuffled[100] = shuffled[100], shuffled[7]
	tied := shuffled[3].Clone()
	tied.ID, tied.UpstreamID = "tied", "tied"
	shuffled = append(shuffled, tied)
	snaps = append(snaps, shuffled)
	reopened := make([]*session.Record, len(base))
	for i, r := range base {
		reopened[i] = r.Clone()
	}
	snaps = append(snaps, reopened)
	// A slice the store would reuse in place: same backing array, other
	// records.
	reused := append([]*session.Record{}, base...)
	snaps = append(snaps, reused)
	var c listCache
	for k, snap := range snaps {
		if k == len(snaps)-1 {
			for i := range reused {
				if i%3 == 0 {
					r := reused[i].Clone()
					r.Title = fmt.Sprintf("changed %d", i)
					r.Status = session.StatusRunning
					reused[i] = r
				}
			}
		}
		checkList(t, &c, snap, fmt.Sprintf("snapshot %d", k))
		for _, r := range snap {
			c.mu.Lock()
			_, ok := c.byRec[r]
			c.mu.Unlock()
			if !ok {
				t.Fatalf("snapshot %d: record %s listed but not cached", k, r.ID)
			}
		}
	}
}

// TestListCacheConcurrent lists from many clients while sessions are
// created and updated (run with -race): every answer is a valid list whose
// size lies between the store's before and after.
func TestListCacheConcurrent(t *testing.T) {
	st := listStore(t, t.TempDir(), 200)
	h := listServer(st).handler()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := []string{"all=true", "", "status=running&agent=claude", "agent=opencode"}[g]
			for {
				select {
				case <-stop:
					return
				default:
				}
				req := httptest.NewRequest("GET", "http://sessiond/v1/sessions?"+q, nil)
				req = req.WithContext(context.WithValue(req.Context(), peerKey, peer{uid: os.Getuid()}))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				var l api.SessionList
				if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || w.Code != http.StatusOK {
					t.Errorf("?%s: status %d, %v", q, w.Code, err)
					return
				}
				if q == "all=true" && (len(l.Sessions) < 200 || len(l.Sessions) > 250) {
					t.Errorf("?all=true listed %d sessions, want 200 to 250", len(l.Sessions))
					return
				}
			}
		}()
	}
	recs, _ := st.List()
	for i := range 50 {
		r := realisticRecord(1000 + i)
		if err := st.Create(r, session.Event{}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Update(recs[i].ID, func(r *session.Record) ([]session.Event, error) {
			r.Title = fmt.Sprintf("t%d", i)
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	checkLists(t, "after concurrent writes", h, st)
}

// TestWithin: within reports a function that returned, and gives up on
// one still running at the deadline or when the request ends.
func TestWithin(t *testing.T) {
	if !within(context.Background(), time.Second, func() {}) {
		t.Error("a function that returned at once was reported as timed out")
	}
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	if within(context.Background(), 20*time.Millisecond, func() { <-release }) {
		t.Error("a blocked function was reported as returned")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("within waited %s for a 20ms bound", d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if within(ctx, time.Minute, func() { <-release }) {
		t.Error("a blocked function was reported as returned after the request ended")
	}
}

// TestListCacheEncodeError: a record that does not encode (the store
// refuses to commit one; a time past year 9999 is one) fails the list and
// leaves the cache as it was.
func TestListCacheEncodeError(t *testing.T) {
	good := realisticRecord(1)
	good.ID = "good"
	bad := realisticRecord(2)
	bad.ID = "bad"
	bad.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	var c listCache
	all := listFilter{all: true, words: []string{""}}
	before, err := c.body([]*session.Record{good}, &all)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.body([]*session.Record{good, bad}, &all); err == nil || !strings.Contains(err.Error(), "encode session bad") {
		t.Fatalf("a record past year 9999: error %v, want one naming it", err)
	}
	after, err := c.body([]*session.Record{good}, &all)
	if err != nil || !bytes.Equal(before.joined(), after.joined()) {
		t.Fatalf("after the failure: %v, %s, want %s", err, after.joined(), before.joined())
	}
}

// TestWarmListsEncodesBeforeServing: warmLists leaves the cache holding
// the store's sessions, so the first GET /v1/sessions encodes nothing, and
// answers as a fresh encoding would.
func TestWarmListsEncodesBeforeServing(t *testing.T) {
	st, err := state.Open(t.TempDir()+"/sessiond.db", state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 50 {
		r := &session.Record{Agent: "claude", UpstreamID: fmt.Sprintf("u%d", i), Status: session.StatusStopped, Cwd: "/w/<&>", CreatedAt: time.Unix(int64(1e9+i), 0)}
		if err := st.Create(r, session.Event{To: r.Status}); err != nil {
			t.Fatal(err)
		}
	}
	s := newServer(serverConfig{store: st, log: zap.NewNop(), started: time.Now(), uid: os.Getuid()})
	s.warmLists()
	recs, err := st.ListShared()
	if err != nil {
		t.Fatal(err)
	}
	s.lists.mu.Lock()
	cached, current := len(s.lists.byRec), slices.Equal(s.lists.snap, recs)
	s.lists.mu.Unlock()
	if cached != 50 || !current {
		t.Fatalf("after warmLists: %d encodings cached (want 50), cache current: %v", cached, current)
	}
	checkLists(t, "after warmLists", s.handler(), st)
}

// firstStartRecords are n records as a first start commits them: one
// CreatedAt, ids in creation order (the store lists them so).
func firstStartRecords(n int) []*session.Record {
	recs := make([]*session.Record, n)
	now := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	for i := range recs {
		r := realisticRecord(i)
		r.ID, r.CreatedAt, r.UpdatedAt = fmt.Sprintf("%012x", 0x1000+i*7), now, now
		recs[i] = r
	}
	return recs
}

// checkList asks c for every query over snap and compares each answer
// with a fresh encoding.
func checkList(t *testing.T, c *listCache, snap []*session.Record, what string) {
	t.Helper()
	for _, q := range listQueries {
		v, _ := url.ParseQuery(q)
		all, _ := strconv.ParseBool(v.Get("all"))
		status := v.Get("status")
		f := listFilter{all: all, status: status, words: strings.Split(status, ","), agent: v.Get("agent")}
		got, err := c.body(snap, &f)
		if err != nil {
			t.Fatalf("%s, ?%s: %v", what, q, err)
		}
		if want := freshList(snap, v); !bytes.Equal(got.joined(), want) {
			t.Fatalf("%s, ?%s: differs from a fresh encoding:\n got %.300s\nwant %.300s", what, q, got.joined(), want)
		}
	}
	if n := cachedRecords(c); n != len(snap) {
		t.Fatalf("%s: the cache holds %d encodings for %d sessions", what, n, len(snap))
	}
}

// TestListCachePrimed: the sessions a first start primed, batch by batch
// as they were committed, make the first answer without being copied
// (its parts are the batches' buffers), and every answer is a fresh
// encoding's bytes, whether the batches match the list or not: out of
// order, one record never primed, one primed that no snapshot shows, a
// record changed after.
func TestListCachePrimed(t *testing.T) {
	recs := firstStartRecords(90)
	batches := [][]*session.Record{recs[:40], recs[40:80], recs[80:]}

	var c listCache
	for _, b := range batches {
		c.prime(b)
	}
	checkList(t, &c, recs, "primed in order")
	if len(c.all) != 2*len(batches)+1 {
		t.Fatalf("primed in order: the answer has %d parts, want the %d batches framed", len(c.all), len(batches))
	}
	first := 0 // the index of each batch's first session
	for i, b := range batches {
		if part := c.all[1+2*i]; &part[0] != &c.enc[first][0] {
			t.Fatalf("batch %d: the answer does not hold the buffer its sessions' encodings are in", i)
		}
		first += len(b)
	}
	changed := slices.Clone(recs)
	changed[50] = recs[50].Clone()
	changed[50].Title = "changed after the first list"
	checkList(t, &c, changed, "one record changed after")

	var out listCache
	out.prime(batches[1])
	out.prime(batches[0])
	out.prime(batches[2])
	checkList(t, &out, recs, "primed out of order")
	if len(out.all) != 1 {
		t.Fatalf("primed out of order: %d parts, want one buffer", len(out.all))
	}

	var missing listCache
	missing.prime(recs[:40])
	missing.prime(recs[41:])
	checkList(t, &missing, recs, "one record not primed")

	var extra listCache
	stray := realisticRecord(1000)
	extra.prime(append(slices.Clone(recs), stray))
	checkList(t, &extra, recs, "one primed record not listed")
}

// TestListCachePrimeBesideLists: batches primed while lists are asked for
// over the snapshots so far (run with -race) answer as fresh encodings.
func TestListCachePrimeBesideLists(t *testing.T) {
	recs := firstStartRecords(300)
	var c listCache
	done := make(chan struct{})
	go func() {
		defer close(done)
		for lo := 0; lo < len(recs); lo += 50 {
			c.prime(recs[lo : lo+50])
		}
	}()
	all := listFilter{all: true, words: []string{""}}
	for n := 0; n <= len(recs); n += 25 {
		got, err := c.body(recs[:n], &all)
		if err != nil {
			t.Fatal(err)
		}
		if want := freshList(recs[:n], url.Values{"all": {"true"}}); !bytes.Equal(got.joined(), want) {
			t.Fatalf("%d sessions: differs from a fresh encoding", n)
		}
	}
	<-done
	checkList(t, &c, recs, "after every batch")
}

// TestListPrimerKeepsOrder: batches handed to the primer faster than it
// encodes them are primed one after the other in the order they came, so
// the first answer can be made of them; after stop, none is taken.
func TestListPrimerKeepsOrder(t *testing.T) {
	recs := firstStartRecords(400)
	lists := new(listCache)
	p := &listPrimer{lists: lists}
	for lo := 0; lo < len(recs); lo += 40 {
		p.prime(recs[lo : lo+40])
	}
	p.stop()
	p.prime(realisticRecordsFrom(1000, 5)) // ignored: the pass is over
	lists.mu.Lock()
	var got []*session.Record
	for _, b := range lists.primed {
		got = append(got, b.recs...)
	}
	lists.mu.Unlock()
	if !slices.Equal(got, recs) {
		t.Fatalf("primed %d records, not the %d handed over in their order", len(got), len(recs))
	}
	checkList(t, lists, recs, "after the primer")
	if len(lists.all) != 2*10+1 {
		t.Errorf("the first answer has %d parts, want the 10 batches framed", len(lists.all))
	}
}

// realisticRecordsFrom returns n realistic records from the i-th on.
func realisticRecordsFrom(i, n int) []*session.Record {
	out := make([]*session.Record, n)
	for k := range out {
		out[k] = realisticRecord(i + k)
	}
	return out
}

// TestListCacheForgetsWhenIdle: a cache no list used for the idle time
// drops every encoding (and the records they were kept by), one used
// since keeps them, and a list after a drop answers a fresh encoding's
// bytes again; forgetWhenIdle does it on its own and tells.
func TestListCacheForgetsWhenIdle(t *testing.T) {
	recs := firstStartRecords(120)
	var c listCache
	if c.forget(time.Now().Add(time.Hour), time.Minute) {
		t.Fatal("an unused, empty cache was dropped")
	}
	checkList(t, &c, recs, "first lists")
	used := c.used
	if c.forget(used.Add(59*time.Second), time.Minute) {
		t.Fatal("dropped 59 s after a list, idle time 1 min")
	}
	if cachedRecords(&c) != len(recs) {
		t.Fatal("a kept cache lost encodings")
	}
	if !c.forget(used.Add(time.Minute), time.Minute) {
		t.Fatal("not dropped a minute after the last list")
	}
	if n := cachedRecords(&c); n != 0 || c.built || c.all != nil || c.snap != nil {
		t.Fatalf("after the drop: %d encodings, built %v", n, c.built)
	}
	if c.forget(used.Add(time.Hour), time.Minute) {
		t.Fatal("an empty cache was dropped twice")
	}
	changed := slices.Clone(recs)
	changed[7] = recs[7].Clone()
	changed[7].Title = "changed while forgotten"
	checkList(t, &c, changed, "lists after the drop")

	// The loop, with a short idle time: it drops the cache once, and not
	// again until a list fills it.
	drops := make(chan struct{}, 4)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.forgetWhenIdle(ctx, 40*time.Millisecond, func() { drops <- struct{}{} })
	}()
	select {
	case <-drops:
	case <-time.After(10 * time.Second):
		t.Fatal("forgetWhenIdle did not drop an idle cache")
	}
	if n := cachedRecords(&c); n != 0 {
		t.Fatalf("forgetWhenIdle dropped, but %d encodings are left", n)
	}
	all := listFilter{all: true, words: []string{""}}
	if got, err := c.body(recs, &all); err != nil || !bytes.Equal(got.joined(), freshList(recs, url.Values{"all": {"true"}})) {
		t.Fatalf("a list after the loop's drop differs from a fresh encoding (%v)", err)
	}
	select {
	case <-drops:
	case <-time.After(10 * time.Second):
		t.Fatal("forgetWhenIdle did not drop the cache filled again")
	}
	cancel()
	<-done
	if len(drops) != 0 {
		t.Fatalf("%d more drops than lists", len(drops))
	}
}
