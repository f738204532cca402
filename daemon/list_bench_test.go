package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// realisticRecord is record i of a store shaped like the standard home's:
// most sessions stopped Claude sessions with their resume cursor (~850
// bytes of JSON, as state's BenchmarkLoad10k), one in ten running with an
// owner, one in twenty interrupted with its problems, one in seven an
// OpenCode session.
func realisticRecord(i int) *session.Record {
	t0 := time.Date(2026, 10, 26, 15, 3, 23, 635e6, time.UTC)
	created := t0.Add(time.Duration(i) * time.Second)
	agent := "claude"
	if i%7 == 3 {
		agent = "opencode"
	}
	up := fmt.Sprintf("%08x-d346-4af2-ac71-8cb82c66a88f", i)
	cwd := fmt.Sprintf("/home/u/src/project-%03d", i%150)
	r := &session.Record{
		Agent: agent, UpstreamID: up, Status: session.StatusStopped,
		StatusReason: "no owner process, and the data has been still for the grace period",
		Cwd:          cwd, Title: "please run the tests <and> fix & commit", Source: "/home/u/.claude/projects/" + cwd,
		Problems: []session.Problem{}, StoppedAt: &t0, LastActivityAt: &created, CreatedAt: created,
		Resume: &session.ResumeCursor{SchemaVersion: 1, Agent: agent, UpstreamID: up, Cwd: cwd, Root: "/home/u/.claude"},
	}
	switch {
	case i%10 == 0:
		r.Status, r.Activity, r.StoppedAt = session.StatusRunning, session.ActivityBusy, nil
		r.StatusReason = "the owner process lives"
		r.Owner = &proc.Identity{BootID: "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f", PID: 40000 + i, StartTicks: uint64(1e6 + i)}
		r.OwnerEvidence = "registry entry names pid"
	case i%20 == 5:
		r.Status, r.Activity = session.StatusInterrupted, session.ActivityUnknown
		r.StatusReason = "the owner died mid tool call"
		r.Problems = []session.Problem{{Kind: "orphaned_tool_call", Detail: "Bash call toolu_01 has no result", Since: t0, Key: "toolu_01"}}
	case i%50 == 7:
		r.Status, r.Activity, r.StoppedAt = session.StatusUnknown, session.ActivityUnknown, nil
		r.OwnerInferred = true
		r.Candidates = []proc.Identity{{BootID: "b", PID: 100 + i, StartTicks: 1}, {BootID: "b", PID: 200 + i, StartTicks: 2}}
	}
	return r
}

// listStore opens a store in dir holding n realistic records.
func listStore(tb testing.TB, dir string, n int) *state.Store {
	tb.Helper()
	st, err := state.Open(filepath.Join(dir, "sessiond.db"), state.Options{Logger: zap.NewNop()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	for start := 0; start < n; start += 1000 {
		err := st.Batch(func(tx *state.Tx) error {
			for i := start; i < min(n, start+1000); i++ {
				r := realisticRecord(i)
				if err := tx.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
	}
	return st
}

// listServer is the API over st, as the daemon builds it but without a
// tracker (the list handler does not use one).
func listServer(st *state.Store) *server {
	return newServer(serverConfig{store: st, log: zap.NewNop(), version: "bench", started: time.Now(), uid: os.Getuid()})
}

// countingWriter is a ResponseWriter that keeps nothing but the size, so
// a benchmark measures the handler and not a recorder's buffer.
type countingWriter struct {
	h    http.Header
	code int
	n    int
}

func (w *countingWriter) Header() http.Header { return w.h }
func (w *countingWriter) WriteHeader(c int)   { w.code = c }
func (w *countingWriter) Write(b []byte) (int, error) {
	w.n += len(b)
	return len(b), nil
}

// BenchmarkListSessions10k: GET /v1/sessions over a real store of 10,000
// realistic records, through the daemon's whole handler (authorization,
// the mux, the handler timeout), into a writer that only counts
// ("handler"), and over a real Unix socket to a client that reads the
// whole body ("socket"), with ?all=true (9 MB of JSON) and the default
// view (the sessions that are not stopped); and the cache's cost when
// the store changed ("cache").
//
//	go test -run='^$' -bench=BenchmarkListSessions10k -benchmem ./daemon/
func BenchmarkListSessions10k(b *testing.B) {
	st := listStore(b, b.TempDir(), 10000)
	s := listServer(st)
	h := s.handler()
	views := []struct{ name, path string }{
		{"all", "/v1/sessions?all=true"},
		{"default", "/v1/sessions"},
		{"status", "/v1/sessions?status=running,interrupted&agent=claude"},
	}
	for _, v := range views {
		b.Run("handler/"+v.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", "http://sessiond"+v.path, nil)
			req = req.WithContext(context.WithValue(req.Context(), peerKey, peer{uid: os.Getuid()}))
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				w := &countingWriter{h: http.Header{}}
				h.ServeHTTP(w, req)
				if w.code != http.StatusOK {
					b.Fatalf("status %d", w.code)
				}
				n = w.n
			}
			b.ReportMetric(float64(n), "bytes/op")
		})
	}

	// The cache's own costs with ?all=true: a snapshot in which one
	// record changed since the last list (what a list pays after a
	// commit), and a cache that holds nothing (the first list after a
	// restart encodes every session).
	recs, err := st.ListShared()
	if err != nil {
		b.Fatal(err)
	}
	all := listFilter{all: true, words: []string{""}}
	b.Run("cache/one-changed", func(b *testing.B) {
		var c listCache
		c.body(recs, &all)
		snaps := [2][]*session.Record{slices.Clone(recs), slices.Clone(recs)}
		snaps[1][5000] = recs[5000].Clone()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			c.body(snaps[i%2], &all)
			i++
		}
	})
	b.Run("cache/cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var c listCache
			c.body(recs, &all)
		}
	})

	dir, err := os.MkdirTemp("/tmp", "sdb")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnContext: connContext}
	go srv.Serve(ln)
	defer srv.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	for _, v := range views {
		b.Run("socket/"+v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.Get("http://sessiond" + v.path)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatal(resp.StatusCode, err)
				}
			}
		})
	}
}
