package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/actions"
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/launch"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
	"github.com/sessiond/sessiond/tracker"
)

// maxBody bounds request bodies: nothing sessiond accepts is larger.
const maxBody = 1 << 20

// handlerTimeout bounds every handler but the event stream.
const handlerTimeout = 30 * time.Second

// heartbeat is how often an idle event stream sends a comment line, so
// clients and proxies can tell a quiet stream from a dead one.
var heartbeat = 15 * time.Second

type serverConfig struct {
	store    *state.Store
	launcher *launch.Launcher
	// launchers, repairers and aborters are the adapters that can start,
	// repair and abort their agent's sessions, by name.
	launchers map[string]adapters.Launcher
	repairers map[string]adapters.Repairer
	aborters  map[string]adapters.Aborter
	// prompters hand a prompt to an idle session through its agent's API.
	prompters map[string]adapters.Prompter
	// hookReaders read the hooks of the agents that run them, by name;
	// ancestors lists a hook caller and its ancestors, nearest first.
	hookReaders map[string]adapters.HookReader
	ancestors   func(pid, max int) ([]proc.Identity, error)
	// toolVars names, by agent, the variable its tools carry their
	// session's id in (adapters.ToolMarker); markerEnv reads a process's
	// marker variables. A hook from a tool of another session is refused.
	toolVars   map[string]string
	markerEnv  func(pid int) (map[string]string, error)
	terminator *actions.Terminator
	tracker    *tracker.Tracker
	log        *zap.Logger
	version    string
	started    time.Time
	socket     string
	uid        int
	// lists keeps the encoded sessions for GET /v1/sessions (newServer
	// makes one if the startup pass did not prime one).
	lists *listCache
}

// server is the /v1 API over the store and the tracker. It reads the store
// and never changes a status itself.
type server struct {
	serverConfig
	metrics *metrics
	// sendQueue delivers queued prompts once runBackground runs it.
	sendQueue *sendQueue
	// acting lets one action at a time act on a session (acting.go).
	acting actionLocks
	// hookTurn lets one hook at a time be taken (hooks.go).
	hookTurn chan struct{}
	// reactions runs hooks.d and notifications once runBackground
	// follows the log for it; nil in tests that build a bare server.
	reactions *reactionFeed

	stopOnce sync.Once
	stopping chan struct{}
}

func newServer(c serverConfig) *server {
	s := &server{serverConfig: c, stopping: make(chan struct{}), hookTurn: make(chan struct{}, 1)}
	if s.lists == nil {
		s.lists = new(listCache)
	}
	s.metrics = newMetrics(c.store, c.tracker)
	if c.log != nil {
		s.sendQueue = newSendQueue(s, c.log.Named("send"))
	}
	return s
}

// stop ends the event streams so a graceful shutdown need not wait on them.
func (s *server) stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// route is one entry of the route table; openapi_test checks each against
// the committed OpenAPI document.
type route struct {
	pattern string // Go 1.22 ServeMux pattern: "METHOD /path"
	handler http.HandlerFunc
	// stream routes are not wrapped in the handler timeout.
	stream bool
	// bounded routes are not wrapped either: the handler bounds its own
	// work by handlerTimeout (within) and then writes an answer it holds
	// whole, which http.TimeoutHandler would copy into a buffer first
	// (8 MB at 10,000 sessions, per request).
	bounded bool
}

func (s *server) routes() []route {
	return []route{
		{pattern: "GET /v1/health", handler: s.health},
		{pattern: "GET /v1/sessions", handler: s.listSessions, bounded: true},
		{pattern: "GET /v1/sessions/{id}", handler: s.getSession},
		{pattern: "POST /v1/sessions", handler: s.launchSession},
		{pattern: "POST /v1/sessions/{id}/resume", handler: s.resumeSession},
		{pattern: "POST /v1/sessions/{id}/repair", handler: s.repairSession},
		{pattern: "POST /v1/sessions/{id}/abort", handler: s.abortSession},
		{pattern: "POST /v1/sessions/{id}/reap", handler: s.reapSession},
		{pattern: "POST /v1/sessions/{id}/stop", handler: s.stopSession},
		{pattern: "POST /v1/sessions/{id}/send", handler: s.sendSession},
		{pattern: "GET /v1/sends", handler: s.listSends},
		{pattern: "DELETE /v1/sends/{id}", handler: s.cancelSend},
		{pattern: "POST /v1/hooks/{agent}", handler: s.hook},
		{pattern: "GET /v1/events", handler: s.events, stream: true},
		{pattern: "GET /v1/openapi.json", handler: s.openapi},
		{pattern: "GET /metrics", handler: s.metrics.ServeHTTP},
	}
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes() {
		var h http.Handler = r.handler
		if !r.stream && !r.bounded {
			h = http.TimeoutHandler(h, handlerTimeout, `{"error":"handler timed out","code":"unavailable"}`)
		}
		mux.Handle(r.pattern, h)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s.authorize(mux)
}

// authorize admits only connections from the daemon's own uid, checked
// once per connection (ConnContext) and before any work.
func (s *server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := r.Context().Value(peerKey).(peer)
		if p.err != nil || p.uid != s.uid {
			s.log.Warn("refused a client of another user", zap.Int("peer_uid", p.uid), zap.Int("daemon_uid", s.uid),
				zap.NamedError("peer_error", p.err), zap.String("path", r.URL.Path))
			s.metrics.refused.Inc()
			writeError(w, http.StatusForbidden, api.CodeForbidden, "sessiond serves only its own user")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	// Compact: indenting 10,000 sessions tripled the encode time (162 ms
	// against 52 ms); sessionctl indents what it prints.
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, kind, msg string) {
	writeJSON(w, code, api.Error{Error: msg, Code: kind})
}

// lookupError answers a failed lookup: 404, 409 listing candidates, or 500.
func (s *server) lookupError(w http.ResponseWriter, ref string, err error) {
	var amb *state.AmbiguousError
	switch {
	case errors.As(err, &amb):
		writeJSON(w, http.StatusConflict, api.Error{
			Error: fmt.Sprintf("%q matches %d sessions; give more of the id", ref, len(amb.Candidates)),
			Code:  api.CodeAmbiguous, Candidates: amb.Candidates,
		})
	case errors.Is(err, state.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no session matches %q", ref))
	default:
		s.log.Error("lookup failed", zap.String("ref", ref), zap.Error(err))
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	ts := s.tracker.Stats()
	h := api.Health{
		Version: s.version, PID: os.Getpid(), StartedAt: s.started,
		Uptime:    time.Since(s.started).Truncate(time.Second).String(),
		StorePath: s.store.Path(), StoreRecovered: s.store.Recovered(), Socket: s.socket,
		LastReconcile: ts.LastPass, ReconcileTook: ts.LastDuration.String(), ReconcileError: ts.LastError,
		Sessions: map[string]int{},
	}
	if seq, err := s.store.LastSeq(); err == nil {
		h.LastEventSeq = seq
	}
	recs, err := s.store.ListShared() // read only
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	for _, rec := range recs {
		h.Sessions[string(rec.Status)]++
	}
	for _, a := range ts.Adapters {
		h.Adapters = append(h.Adapters, api.AdapterHealth{Name: a.Name, LastScan: a.LastScan, LastDuration: a.LastDuration.String(),
			Sessions: a.Sessions, LastError: a.LastError, InputErrors: a.InputErrors, InputWarnings: a.InputWarnings,
			Drift: apiDrift(a.Drift)})
	}
	if s.reactions != nil {
		h.Reactions = s.reactions.rx.Health()
	}
	writeJSON(w, http.StatusOK, h)
}

// warmLists encodes every session into the list cache, as the first
// GET /v1/sessions would. A failure is left for that request to report.
func (s *server) warmLists() {
	start := time.Now()
	recs, err := s.store.ListShared()
	var body listBody
	if err == nil {
		body, err = s.lists.body(recs, &listFilter{all: true})
	}
	if err != nil {
		s.log.Debug("could not encode the first list before serving", zap.Error(err))
		return
	}
	s.log.Debug("first list encoded", zap.Int("sessions", len(recs)), zap.Int("bytes", body.Len()), zap.Duration("took", time.Since(start)))
}

// listSessions: by default every session but the stopped ones (interrupted
// ones need attention and are shown); all=true shows everything; status
// and agent filter.
func (s *server) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	all, _ := strconv.ParseBool(q.Get("all"))
	status, agent := q.Get("status"), q.Get("agent")
	for _, st := range strings.Split(status, ",") {
		if st != "" && !session.Status(st).Valid() {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest,
				fmt.Sprintf("unknown status %q (want starting, running, stopped, interrupted or unknown)", st))
			return
		}
	}
	f := listFilter{all: all, status: status, words: strings.Split(status, ","), agent: agent}
	var (
		body listBody
		err  error
	)
	ok := within(r.Context(), handlerTimeout, func() {
		recs, lerr := s.store.ListShared() // read only
		if lerr != nil {
			err = lerr
			return
		}
		body, err = s.lists.body(recs, &f)
	})
	switch {
	case !ok:
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "handler timed out")
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	// The bytes are what writeJSON would write for the api.SessionList of
	// the sessions f keeps, sorted stably by CreatedAt (listcache.go; a
	// test holds the two to the same bytes), with their length, so the
	// answer is written as it is held (one buffer, or the few the
	// startup pass primed) and not chunked.
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	w.WriteHeader(http.StatusOK)
	_, _ = body.WriteTo(w)
}

// within runs fn and waits for it at most d, or until ctx ends: what
// http.TimeoutHandler bounds, without its buffer. It reports whether fn
// returned; if not, fn goes on alone and the caller must not read what
// it writes.
func within(ctx context.Context, d time.Duration, fn func()) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (s *server) getSession(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("id")
	rec, err := s.store.Lookup(ref)
	if err != nil {
		s.lookupError(w, ref, err)
		return
	}
	writeJSON(w, http.StatusOK, api.FromRecord(rec))
}

func (s *server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(api.OpenAPI)
}

// events streams the event log as Server-Sent Events. The SSE id is the
// store's sequence number, so a client reconnecting with Last-Event-ID (or
// ?since=) gets every later event exactly once. Events are read from the
// store, after their commit: a client never sees an uncommitted change.
func (s *server) events(w http.ResponseWriter, r *http.Request) {
	since, err := sinceOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	follow := true
	if f := r.URL.Query().Get("follow"); f != "" {
		if follow, err = strconv.ParseBool(f); err != nil {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, "follow must be true or false")
			return
		}
	}
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if first, err := s.store.FirstSeq(); err == nil && first > since+1 {
		fmt.Fprintf(w, ": events %d to %d were pruned by retention\n\n", since+1, first-1)
	}
	if err := rc.Flush(); err != nil {
		return
	}
	s.metrics.subscribers.Inc()
	defer s.metrics.subscribers.Dec()
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	for {
		// Take the change signal before reading, so a commit between the
		// read and the wait still wakes us.
		changed := s.store.Changed()
		evs, err := s.store.Events(since, 500)
		if err != nil {
			s.log.Error("read events", zap.Uint64("since", since), zap.Error(err))
			return
		}
		for _, ev := range evs {
			b, _ := json.Marshal(ev)
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, b); err != nil {
				return
			}
			since = ev.Seq
		}
		if len(evs) > 0 {
			if err := rc.Flush(); err != nil {
				return
			}
			if len(evs) == 500 {
				continue
			}
		}
		if !follow {
			return
		}
		select {
		case <-changed:
		case <-beat.C:
			if _, err := fmt.Fprint(w, ": ping\n\n"); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.stopping:
			return
		}
	}
}

func sinceOf(r *http.Request) (uint64, error) {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("Last-Event-ID %q is not an event sequence number", v)
		}
		return n, nil
	}
	if v := r.URL.Query().Get("since"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("since=%q is not an event sequence number", v)
		}
		return n, nil
	}
	return 0, nil
}

// apiDrift is an adapter's drift as GET /v1/health serves it.
func apiDrift(ds []adapters.Drift) []api.Drift {
	var out []api.Drift
	for _, d := range ds {
		e := api.Drift{Version: d.Version, Kind: string(d.Kind), Input: d.Input, Inputs: d.Inputs, Others: d.Others, Values: []api.DriftValue{}}
		for _, v := range d.Values {
			e.Values = append(e.Values, api.DriftValue{Value: v.Value, Inputs: v.Inputs})
		}
		out = append(out, e)
	}
	return out
}
