package opencodetest

import (
	"database/sql"
	"encoding/json"
	"fmt"
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

// Pending is a pending question or permission request, served in the
// shape of OpenCode 1.18.33's PermissionRequest and QuestionRequest (its
// /doc).
type Pending struct {
	ID        string `json:"id"`
	SessionID string `json:"sessionID"`
	// Directory limits the item to requests for that directory ("" = all).
	Directory string `json:"-"`
	// Permission and Patterns are a permission's kind ("bash", "edit")
	// and what it is for (the command, the file).
	Permission string   `json:"-"`
	Patterns   []string `json:"-"`
	// Question is a question's text.
	Question string `json:"-"`
}

// wire is p as the server lists it.
func (p Pending) wire(permission bool) map[string]any {
	out := map[string]any{"id": p.ID, "sessionID": p.SessionID}
	if permission {
		patterns := p.Patterns
		if patterns == nil {
			patterns = []string{}
		}
		out["permission"], out["patterns"], out["metadata"], out["always"] = p.Permission, patterns, map[string]any{}, []string{}
		return out
	}
	out["questions"] = []map[string]any{{"question": p.Question, "header": "Q", "options": []map[string]any{{"label": "Yes", "description": "yes"}}}}
	return out
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
	// OnRequest, when set, is called with each request's method and path
	// before it is answered (without the lock held): a test changes the
	// world at an exact point of a conversation.
	OnRequest func(method, path string)
	// Credentials counts requests that carried an Authorization header
	// (whether or not it was right): a server sessiond must not trust
	// should never see one.
	Credentials int

	// Messages are the sessions' messages with their parts, by session id,
	// in order (AddMessage), for GET /session/:id/message[/:mid] and
	// PATCH /session/:id/message/:mid/part/:pid.
	Messages map[string][]*FakeMessage
	// StuckUntilPatched names sessions that stay busy after POST
	// /session/:id/abort until no tool part of theirs is pending or running
	// (a tool that ignores the abort signal). Other sessions go idle on
	// abort, without touching their parts (the restart shape).
	StuckUntilPatched map[string]bool
	// Aborted counts POST /session/:id/abort by session; Rejected lists
	// the ids of questions rejected and permissions replied "reject".
	Aborted  map[string]int
	Rejected []string

	// subscribers are the open GET /global/event streams.
	subscribers map[chan []byte]bool
	closing     chan struct{}
}

// FakeMessage is one message as the server returns it: info and parts,
// each the JSON object OpenCode sends (with ids).
type FakeMessage struct {
	Info  map[string]any   `json:"info"`
	Parts []map[string]any `json:"parts"`
}

// LoadFromDB makes the server show sessions as `opencode serve` on that
// database would: their messages and parts, read from the file.
func (f *FakeServer) LoadFromDB(dbPath string, sessionIDs ...string) error {
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, sid := range sessionIDs {
		msgs, err := loadMessages(db, sid)
		if err != nil {
			return fmt.Errorf("load %s from %s: %w", sid, dbPath, err)
		}
		f.Messages[sid] = msgs
		f.Sessions[sid] = true
	}
	return nil
}

func loadMessages(db *sql.DB, sid string) ([]*FakeMessage, error) {
	rows, err := db.Query("SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id", sid)
	if err != nil {
		return nil, err
	}
	var msgs []*FakeMessage
	for rows.Next() {
		var id, data string
		if err := rows.Scan(&id, &data); err != nil {
			rows.Close()
			return nil, err
		}
		info := decode(data)
		info["id"], info["sessionID"] = id, sid
		msgs = append(msgs, &FakeMessage{Info: info})
	}
	rows.Close()
	for _, m := range msgs {
		rows, err := db.Query("SELECT id, data FROM part WHERE message_id = ? ORDER BY id", m.Info["id"])
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id, data string
			if err := rows.Scan(&id, &data); err != nil {
				rows.Close()
				return nil, err
			}
			p := decode(data)
			p["id"], p["sessionID"], p["messageID"] = id, sid, m.Info["id"]
			m.Parts = append(m.Parts, p)
		}
		rows.Close()
	}
	return msgs, nil
}

// PartState returns state.status of a part the server holds ("" if none).
func (f *FakeServer) PartState(sessionID, partID string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.Messages[sessionID] {
		for _, p := range m.Parts {
			if p["id"] == partID {
				st, _ := p["state"].(map[string]any)
				s, _ := st["status"].(string)
				return s
			}
		}
	}
	return ""
}

// PartObject returns a copy of a part the server holds (nil if none).
func (f *FakeServer) PartObject(sessionID, partID string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.Messages[sessionID] {
		for _, p := range m.Parts {
			if p["id"] == partID {
				b, _ := json.Marshal(p)
				return decode(string(b))
			}
		}
	}
	return nil
}

func decode(s string) map[string]any {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		panic(err)
	}
	return m
}

// inFlight reports whether a session still has a pending or running tool
// part. Called with mu held.
func (f *FakeServer) inFlight(sessionID string) bool {
	for _, m := range f.Messages[sessionID] {
		for _, p := range m.Parts {
			st, _ := p["state"].(map[string]any)
			if s, _ := st["status"].(string); p["type"] == "tool" && (s == "pending" || s == "running") {
				return true
			}
		}
	}
	return false
}

// setIdle drops a session's status in every directory. Called with mu held.
func (f *FakeServer) setIdle(sessionID string) {
	for _, m := range f.Statuses {
		delete(m, sessionID)
	}
}

// NewFakeServer starts a fake server on 127.0.0.1; it is closed at Close.
func NewFakeServer() *FakeServer {
	f := &FakeServer{
		Version:  Version,
		Statuses: map[string]map[string]Status{},
		Sessions: map[string]bool{},
		Fail:     map[string]int{},
		Messages: map[string][]*FakeMessage{},

		StuckUntilPatched: map[string]bool{},
		Aborted:           map[string]int{},
		subscribers:       map[chan []byte]bool{},
		closing:           make(chan struct{}),
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

// CredentialsSeen returns how many requests carried an Authorization header.
func (f *FakeServer) CredentialsSeen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.Credentials
}

// RequestLog returns a copy of the request log.
func (f *FakeServer) RequestLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.Requests...)
}

// Close ends the event streams, then the server.
func (f *FakeServer) Close() {
	f.mu.Lock()
	select {
	case <-f.closing:
	default:
		close(f.closing)
	}
	f.mu.Unlock()
	f.Server.Close()
}

// Emit sends an event to every open GET /global/event stream, as
// 1.18.33 sends them: {"directory", "payload": {"id", "type",
// "properties"}}.
func (f *FakeServer) Emit(directory, typ string, properties map[string]any) {
	b, _ := json.Marshal(map[string]any{"directory": directory, "payload": map[string]any{
		"id": fmt.Sprintf("evt_%d", time.Now().UnixNano()), "type": typ, "properties": properties}})
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subscribers {
		select {
		case ch <- b:
		default:
		}
	}
}

// Subscribers is how many event streams are open.
func (f *FakeServer) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subscribers)
}

// authorized checks r's Basic auth when Password is set, answering 401
// when it is wrong. Called with mu held.
func (f *FakeServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if f.Password == "" {
		return true
	}
	user := f.Username
	if user == "" {
		user = "opencode"
	}
	if u, p, ok := r.BasicAuth(); !ok || u != user || p != f.Password {
		w.Header().Set("WWW-Authenticate", `Basic realm="opencode"`)
		http.Error(w, "Unauthorized", http.StatusUnauthorized)
		return false
	}
	return true
}

// events serves GET /global/event until the client goes or the server
// closes; auth and injected failures apply as to any request.
func (f *FakeServer) events(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	if !f.authorized(w, r) {
		f.mu.Unlock()
		return
	}
	if code, ok := f.Fail[r.URL.Path]; ok {
		f.mu.Unlock()
		writeJSON(w, code, map[string]any{"name": "UnknownError", "data": map[string]any{"message": "injected failure"}})
		return
	}
	ch := make(chan []byte, 64)
	f.subscribers[ch] = true
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.subscribers, ch)
		f.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "data: {\"payload\":{\"id\":\"evt_0\",\"type\":\"server.connected\",\"properties\":{}}}\n\n")
	http.NewResponseController(w).Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-f.closing:
			return
		case b := <-ch:
			fmt.Fprintf(w, "data: %s\n\n", b)
			http.NewResponseController(w).Flush()
		}
	}
}

func (f *FakeServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/global/event" {
		f.mu.Lock()
		f.Requests = append(f.Requests, r.Method+" "+r.URL.RequestURI())
		f.mu.Unlock()
		f.events(w, r)
		return
	}
	f.mu.Lock()
	f.Requests = append(f.Requests, r.Method+" "+r.URL.RequestURI())
	if r.Header.Get("Authorization") != "" {
		f.Credentials++
	}
	delay, hook := f.Delay, f.OnRequest
	f.mu.Unlock()
	if hook != nil {
		hook(r.Method, r.URL.Path)
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.authorized(w, r) {
		return
	}
	if code, ok := f.Fail[r.URL.Path]; ok {
		writeJSON(w, code, map[string]any{"name": "UnknownError", "data": map[string]any{"message": "injected failure"}})
		return
	}
	if r.Method != http.MethodGet {
		f.write(w, r)
		return
	}
	dir := r.URL.Query().Get("directory")
	if dir == "" {
		dir = r.Header.Get("x-opencode-directory")
	}
	seg := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch p := r.URL.Path; {
	case len(seg) == 3 && seg[0] == "session" && seg[2] == "message":
		out := []*FakeMessage{}
		out = append(out, f.Messages[seg[1]]...)
		writeJSON(w, http.StatusOK, out)
	case len(seg) == 4 && seg[0] == "session" && seg[2] == "message":
		for _, m := range f.Messages[seg[1]] {
			if m.Info["id"] == seg[3] {
				writeJSON(w, http.StatusOK, m)
				return
			}
		}
		writeJSON(w, http.StatusNotFound, map[string]any{"name": "NotFoundError", "data": map[string]any{"message": "Message not found: " + seg[3]}})
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
			out = append(out, q.wire(p == "/permission"))
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

// write answers the POST and PATCH endpoints sessiond's abort and repair
// use, as OpenCode 1.18.33 does. Called with mu held.
func (f *FakeServer) write(w http.ResponseWriter, r *http.Request) {
	seg := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	notFound := func(what string) {
		writeJSON(w, http.StatusNotFound, map[string]any{"name": "NotFoundError", "data": map[string]any{"message": what + " not found"}})
	}
	switch {
	case r.Method == http.MethodPost && len(seg) == 3 && seg[0] == "session" && seg[2] == "abort":
		f.Aborted[seg[1]]++
		if !f.StuckUntilPatched[seg[1]] {
			f.setIdle(seg[1])
		}
		writeJSON(w, http.StatusOK, true)
	case r.Method == http.MethodPost && len(seg) == 3 && seg[0] == "question" && seg[2] == "reject",
		r.Method == http.MethodPost && len(seg) == 3 && seg[0] == "permission" && seg[2] == "reply":
		if seg[0] == "permission" {
			var body struct {
				Reply string `json:"reply"`
			}
			if json.NewDecoder(r.Body).Decode(&body) != nil || body.Reply == "" {
				writeJSON(w, http.StatusBadRequest, map[string]any{"name": "BadRequest"})
				return
			}
			if body.Reply != "reject" {
				writeJSON(w, http.StatusOK, true)
				return
			}
		}
		list := &f.Questions
		if seg[0] == "permission" {
			list = &f.Permissions
		}
		for i, q := range *list {
			if q.ID == seg[1] {
				*list = append((*list)[:i:i], (*list)[i+1:]...)
				f.Rejected = append(f.Rejected, q.ID)
				writeJSON(w, http.StatusOK, true)
				return
			}
		}
		notFound(seg[0] + " " + seg[1])
	case r.Method == http.MethodPatch && len(seg) == 6 && seg[0] == "session" && seg[2] == "message" && seg[4] == "part":
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || body["id"] != seg[5] {
			writeJSON(w, http.StatusBadRequest, map[string]any{"name": "BadRequest", "data": map[string]any{"message": "body must be the whole part"}})
			return
		}
		for _, m := range f.Messages[seg[1]] {
			if m.Info["id"] != seg[3] {
				continue
			}
			for i, p := range m.Parts {
				if p["id"] == seg[5] {
					m.Parts[i] = body
					if f.StuckUntilPatched[seg[1]] && !f.inFlight(seg[1]) {
						f.setIdle(seg[1])
					}
					writeJSON(w, http.StatusOK, body)
					return
				}
			}
		}
		notFound("part " + seg[5])
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]any{"name": "MethodNotAllowed"})
	}
}
