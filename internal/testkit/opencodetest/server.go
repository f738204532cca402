package opencodetest

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Status is one entry of GET /session/status: Type is "idle", "busy" or
// "retry" (with Attempt, Message and Next in ms since the epoch).
type Status struct {
	Type    string `json:"type"`
	Attempt int    `json:"attempt,omitempty"`
	Message string `json:"message,omitempty"`
	Next    int64  `json:"next,omitempty"`
}

// Pending is a pending question or permission request.
type Pending struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	// Directory limits the item to requests for that directory ("" = all).
	Directory string `json:"-"`
}

// FakeServer is an OpenCode server (`opencode serve`) for tests. It answers
// the endpoints sessiond uses: GET /global/health, /session/status,
// /session/:id, /question and /permission, with HTTP Basic auth when
// Password is set, and injected failures. Set its fields before use or
// under Lock.
type FakeServer struct {
	*httptest.Server

	mu sync.Mutex
	// Version is reported by /global/health.
	Version string
	// Username and Password turn on HTTP Basic auth (user default "opencode").
	Username, Password string
	// Statuses maps a directory ("" for any directory) to the status map
	// that GET /session/status returns for it.
	Statuses map[string]map[string]Status
	// Sessions are the ids GET /session/:id finds; others are 404 NotFoundError.
	Sessions map[string]bool
	// Questions and Permissions are the pending requests.
	Questions   []Pending
	Permissions []Pending
	// Fail maps a path ("/session/status", "/global/health", ...) to an
	// HTTP status to answer instead (500, 503).
	Fail map[string]int
	// Delay holds every answer this long (to test client timeouts).
	Delay time.Duration
	// Requests logs "METHOD path?query" of every request.
	Requests []string
}

// NewFakeServer starts a fake server on 127.0.0.1; it is closed at Close.
func NewFakeServer() *FakeServer {
	f := &FakeServer{
		Version:  Version,
		Statuses: map[string]map[string]Status{},
		Sessions: map[string]bool{},
		Fail:     map[string]int{},
	}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// Lock and Unlock guard the fields while the server runs.
func (f *FakeServer) Lock()   { f.mu.Lock() }
func (f *FakeServer) Unlock() { f.mu.Unlock() }

// Port is the TCP port the server listens on.
func (f *FakeServer) Port() int {
	_, p, _ := net.SplitHostPort(f.Listener.Addr().String())
	n, _ := strconv.Atoi(p)
	return n
}

// SetStatus sets one session's status for a directory ("" = any).
func (f *FakeServer) SetStatus(dir, sessionID string, st Status) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Statuses[dir] == nil {
		f.Statuses[dir] = map[string]Status{}
	}
	f.Statuses[dir][sessionID] = st
}

// RequestLog returns a copy of the request log.
func (f *FakeServer) RequestLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Requests...)
}

func (f *FakeServer) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.Requests = append(f.Requests, r.Method+" "+r.URL.RequestURI())
	delay := f.Delay
	f.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Password != "" {
		user := f.Username
		if user == "" {
			user = "opencode"
		}
		u, p, ok := r.BasicAuth()
		if !ok || u != user || p != f.Password {
			w.Header().Set("WWW-Authenticate", `Basic realm="opencode"`)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
	}
	if code, ok := f.Fail[r.URL.Path]; ok {
		writeJSON(w, code, map[string]any{"name": "UnknownError", "data": map[string]any{"message": "injected failure"}})
		return
	}
	if r.Method != http.MethodGet {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"name": "MethodNotAllowed"})
		return
	}
	dir := r.URL.Query().Get("directory")
	if dir == "" {
		dir = r.Header.Get("x-opencode-directory")
	}
	switch p := r.URL.Path; {
	case p == "/global/health":
		writeJSON(w, http.StatusOK, map[string]any{"healthy": true, "version": f.Version})
	case p == "/session/status":
		out := map[string]Status{}
		for id, st := range f.Statuses[""] {
			out[id] = st
		}
		if dir != "" {
			for id, st := range f.Statuses[dir] {
				out[id] = st
			}
		}
		writeJSON(w, http.StatusOK, out)
	case p == "/question" || p == "/permission":
		list := f.Questions
		if p == "/permission" {
			list = f.Permissions
		}
		out := []map[string]any{}
		for _, q := range list {
			if q.Directory != "" && dir != "" && q.Directory != dir {
				continue
			}
			out = append(out, map[string]any{"id": q.ID, "sessionID": q.SessionID})
		}
		writeJSON(w, http.StatusOK, out)
	case strings.HasPrefix(p, "/session/") && strings.Count(p, "/") == 2:
		id := strings.TrimPrefix(p, "/session/")
		if !f.Sessions[id] {
			writeJSON(w, http.StatusNotFound, map[string]any{"name": "NotFoundError", "data": map[string]any{"message": "Session not found: " + id}})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "title": "fake", "version": f.Version})
	default:
		writeJSON(w, http.StatusNotFound, map[string]any{"name": "NotFoundError", "data": map[string]any{"message": "no route " + p}})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
