package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// shortDir returns a short temporary directory: Unix socket paths are
// limited to 104 bytes on macOS (108 on Linux), and t.TempDir() is long.
func shortDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

type running struct {
	cfg    Config
	client *api.Client
	cancel context.CancelFunc
	done   chan error
}

// start runs a daemon in-process and waits until it serves.
func start(t *testing.T, dir string) *running {
	t.Helper()
	return startConfig(t, Config{
		StateDir: filepath.Join(dir, "state"), Socket: filepath.Join(dir, "run", "s.sock"),
		Interval: 100 * time.Millisecond, Version: "test", Logger: zaptest.NewLogger(t),
	})
}

// startConfig runs a daemon in-process with cfg (its Ready set here) and
// waits until it serves; the test's end stops it.
func startConfig(t testing.TB, cfg Config) *running {
	t.Helper()
	ready := make(chan struct{})
	cfg.Ready = ready
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cfg: cfg, client: api.NewClient(cfg.Socket), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg) }()
	select {
	case <-ready:
	case err := <-r.done:
		t.Fatalf("daemon exited before ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("daemon not ready after 10s")
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("daemon stopped with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("daemon did not stop within 10s")
	}
}

// seed writes records into a store that no daemon holds.
func seed(t testing.TB, stateDir string, recs ...*session.Record) {
	t.Helper()
	st, err := state.Open(storeFile(stateDir), state.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, r := range recs {
		if err := st.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServesHealthAndStopsCleanly(t *testing.T) {
	r := start(t, shortDir(t))
	ctx := context.Background()
	h, err := r.client.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != "test" || h.StorePath != storeFile(r.cfg.StateDir) {
		t.Errorf("health = %+v", h)
	}
	fi, err := os.Stat(r.cfg.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(filepath.Dir(r.cfg.Socket)); di.Mode().Perm() != 0o700 {
		t.Errorf("socket dir mode %v, want 0700", di.Mode().Perm())
	}
	r.stop(t)
	// The store lock is released and the socket file is gone.
	st, err := state.Open(storeFile(r.cfg.StateDir), state.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("store not released after stop: %v", err)
	}
	st.Close()
	if _, err := os.Stat(r.cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}

func TestSecondDaemonRefused(t *testing.T) {
	dir := shortDir(t)
	first := start(t, dir)
	cfg := first.cfg
	cfg.Ready = nil
	cfg.Socket = filepath.Join(dir, "other.sock")
	err := Run(context.Background(), cfg)
	var already *AlreadyRunningError
	if !errors.As(err, &already) {
		t.Fatalf("second daemon on the same state dir: %v", err)
	}
	if !strings.Contains(err.Error(), "another sessiond is already running") {
		t.Errorf("message: %v", err)
	}
	// Same socket, other state dir: the socket answers, so it is refused too.
	cfg.StateDir, cfg.Socket = filepath.Join(dir, "state2"), first.cfg.Socket
	if err := Run(context.Background(), cfg); !errors.As(err, &already) {
		t.Fatalf("second daemon on the same socket: %v", err)
	}
	if _, err := first.client.Health(context.Background()); err != nil {
		t.Fatalf("first daemon hurt by the second: %v", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	dir := shortDir(t)
	sock := filepath.Join(dir, "run", "s.sock")
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	// A listener that is closed without unlinking leaves a dead socket file,
	// as a killed daemon does.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("no stale socket: %v", err)
	}
	r := start(t, dir)
	if _, err := r.client.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestLookupAnswers(t *testing.T) {
	dir := shortDir(t)
	now := time.Now()
	seed(t, filepath.Join(dir, "state"),
		&session.Record{ID: "aaaa11112222", Agent: "claude", UpstreamID: "3ab8568e-0000-4000-8000-000000000001", Status: session.StatusStopped, CreatedAt: now},
		&session.Record{ID: "aaaa33334444", Agent: "claude", UpstreamID: "3ab8568e-0000-4000-8000-000000000002", Status: session.StatusStopped, CreatedAt: now},
	)
	r := start(t, dir)
	ctx := context.Background()
	if s, err := r.client.Session(ctx, "aaaa1"); err != nil || s.ID != "aaaa11112222" {
		t.Fatalf("unique prefix: %v %v", s, err)
	}
	if s, err := r.client.Session(ctx, "3ab8568e-0000-4000-8000-000000000002"); err != nil || s.ID != "aaaa33334444" {
		t.Fatalf("upstream id: %v %v", s, err)
	}
	_, err := r.client.Session(ctx, "aaaa")
	var se *api.StatusError
	if !errors.As(err, &se) || se.StatusCode != 409 || len(se.Body.Candidates) != 2 {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if _, err := r.client.Session(ctx, "zzz"); !errors.As(err, &se) || se.StatusCode != 404 || se.Body.Code != api.CodeNotFound {
		t.Fatalf("unknown: %v", err)
	}
	list, err := r.client.Sessions(ctx, api.ListOptions{})
	if err != nil || len(list) != 0 {
		t.Fatalf("default list hides stopped: %v %v", list, err)
	}
	if list, _ = r.client.Sessions(ctx, api.ListOptions{All: true}); len(list) != 2 {
		t.Fatalf("all: %d", len(list))
	}
	if _, err := r.client.Sessions(ctx, api.ListOptions{Status: "bogus"}); !errors.As(err, &se) || se.StatusCode != 400 {
		t.Fatalf("bad status filter: %v", err)
	}
}

// A client that reconnects with Last-Event-ID receives every event exactly
// once.
func TestEventStreamResumesExactlyOnce(t *testing.T) {
	dir := shortDir(t)
	now := time.Now()
	var recs []*session.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &session.Record{Agent: "claude", UpstreamID: fmt.Sprintf("up-%02d", i), Status: session.StatusStopped, CreatedAt: now})
	}
	seed(t, filepath.Join(dir, "state"), recs...)
	r := start(t, dir)
	ctx := context.Background()

	seen := map[uint64]int{}
	var last uint64
	read := func(limit int) {
		t.Helper()
		n := 0
		errStop := errors.New("stop")
		err := r.client.Events(ctx, api.EventsOptions{Since: last, Follow: false}, func(ev api.Event) error {
			seen[ev.Seq]++
			if ev.Seq <= last {
				t.Errorf("event %d after %d", ev.Seq, last)
			}
			last = ev.Seq
			n++
			if n == limit {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			t.Fatal(err)
		}
	}
	read(7)  // disconnect after 7
	read(11) // reconnect from the last id
	read(0)  // and the rest
	want, _ := r.client.Health(ctx)
	if uint64(len(seen)) != want.LastEventSeq {
		t.Fatalf("saw %d distinct events, store has %d", len(seen), want.LastEventSeq)
	}
	for seq, n := range seen {
		if n != 1 {
			t.Errorf("event %d seen %d times", seq, n)
		}
	}

	// The raw protocol: Last-Event-ID header, SSE ids are sequence numbers.
	req, _ := http.NewRequest("GET", "http://sessiond/v1/events?follow=false", nil)
	req.Header.Set("Last-Event-ID", fmt.Sprint(want.LastEventSeq-2))
	resp, err := unixHTTP(r.cfg.Socket).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ids []string
	api.ReadSSE(resp.Body, func(id, data string) error { ids = append(ids, id); return nil })
	if len(ids) != 2 || ids[1] != fmt.Sprint(want.LastEventSeq) {
		t.Fatalf("Last-Event-ID resume gave ids %v", ids)
	}
}

func unixHTTP(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// A follower sees new events as they are committed, and the stream ends
// when the daemon stops (it does not hold shutdown).
func TestEventStreamFollowsAndEndsOnStop(t *testing.T) {
	dir := shortDir(t)
	r := start(t, dir)
	got := make(chan api.Event, 10)
	done := make(chan error, 1)
	go func() {
		done <- r.client.Events(context.Background(), api.EventsOptions{Follow: true}, func(ev api.Event) error {
			got <- ev
			return nil
		})
	}()
	time.Sleep(100 * time.Millisecond)
	// Write through a second handle is impossible (the daemon holds the
	// lock), so stop and check the stream ends promptly instead.
	start := time.Now()
	r.stop(t)
	select {
	case err := <-done:
		if err != nil {
			t.Logf("stream ended with %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("event stream still open 3s after stop")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stop took %s with a follower attached", d)
	}
}

func TestHundredConcurrentClients(t *testing.T) {
	dir := shortDir(t)
	seed(t, filepath.Join(dir, "state"), &session.Record{ID: "c0ffee000001", Agent: "claude", UpstreamID: "u", Status: session.StatusStopped, CreatedAt: time.Now()})
	r := start(t, dir)
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c := api.NewClient(r.cfg.Socket)
			for j := 0; j < 5; j++ {
				var err error
				switch (i + j) % 3 {
				case 0:
					_, err = c.Health(context.Background())
				case 1:
					_, err = c.Sessions(context.Background(), api.ListOptions{All: true})
				case 2:
					_, err = c.Session(context.Background(), "c0ffee")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMetricsAndOpenAPI(t *testing.T) {
	r := start(t, shortDir(t))
	c := unixHTTP(r.cfg.Socket)
	resp, err := c.Get("http://sessiond/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"sessiond_reconcile_duration_seconds", "sessiond_events_total", "sessiond_probes_total"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	resp, err = c.Get("http://sessiond/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = c.Get("http://sessiond/v1/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown route: %d", resp.StatusCode)
	}
}

// Every route in the table is documented in the committed OpenAPI document,
// and every documented path is served.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	s := &server{}
	served := map[string]bool{}
	for _, r := range s.routes() {
		method, path, _ := strings.Cut(r.pattern, " ")
		served[strings.ToLower(method)+" "+path] = true
		ops, ok := doc.Paths[path]
		if !ok {
			t.Errorf("route %s is not in openapi.json", r.pattern)
			continue
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("route %s: method not in openapi.json", r.pattern)
		}
	}
	for path, ops := range doc.Paths {
		for method := range ops {
			if !served[method+" "+path] {
				t.Errorf("openapi.json documents %s %s, which is not served", method, path)
			}
		}
	}
}
