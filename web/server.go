// Package web serves sessionctl web: a dashboard of the sessions of one
// or more sessiond, live from their event streams, that acts through the
// same API as sessionctl. It is a separate process on purpose: sessiond's
// own surface stays a Unix socket.
//
// Security: every request needs the token, first given in the URL
// (?token=, once) and kept from then on in an HttpOnly, SameSite=Strict
// cookie; its Host header must name the listen address, localhost, or a
// name allowed explicitly (no DNS rebinding); a request that changes
// anything is a POST carrying the token in a header too, with an Origin
// that matches its Host (no cross-site request forgery).
package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/view"
)

// CookieName is the cookie that carries the token after the first visit.
const CookieName = "sessiond_web"

// TokenHeader carries the token on every POST, besides the cookie: a
// cross-site form can make the browser send the cookie, never a header.
const TokenHeader = "X-Sessiond-Token"

//go:embed assets
var assets embed.FS

// Host is one sessiond the dashboard shows: Name as --host gave it ("" for
// the local socket), and its client.
type Host struct {
	Name   string
	Client *api.Client
}

// Options configure a Server.
type Options struct {
	Hosts []Host
	// Listen is the address the server listens on (host:port); requests
	// must name its host, localhost, or one of AllowHosts.
	Listen     string
	AllowHosts []string
	// Token is the secret of the URL; empty makes a fresh random one.
	Token  string
	Logger *zap.Logger
	// Retry is how long a host whose event stream broke waits before
	// trying again (1s when zero).
	Retry time.Duration
}

// Server is the dashboard's HTTP handler and the hub that follows every
// host's events.
type Server struct {
	o       Options
	token   string
	allowed map[string]bool
	clients map[string]*api.Client
	hub     *hub
	mux     *http.ServeMux
	page    *template.Template
	log     *zap.Logger
}

// NewToken returns a fresh random token: 32 bytes, hex.
func NewToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// New makes a server for o.Hosts; Run follows their events.
func New(o Options) (*Server, error) {
	if len(o.Hosts) == 0 {
		return nil, errors.New("web: no host to show")
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("web: listen address %q: %w", o.Listen, err)
	}
	s := &Server{o: o, token: o.Token, log: o.Logger, clients: map[string]*api.Client{},
		allowed: map[string]bool{"localhost": true, strings.ToLower(host): true}}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.token == "" {
		if s.token, err = NewToken(); err != nil {
			return nil, err
		}
	}
	for _, h := range o.AllowHosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if hh, _, err := net.SplitHostPort(h); err == nil {
			h = hh
		}
		if h != "" {
			s.allowed[strings.Trim(h, "[]")] = true
		}
	}
	for _, h := range o.Hosts {
		s.clients[h.Name] = h.Client
	}
	if s.page, err = template.ParseFS(assets, "assets/page.html"); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	s.hub = newHub(o.Hosts, o.Retry, s.log)
	s.routes()
	return s, nil
}

// Token is the server's secret, for the URL printed once.
func (s *Server) Token() string { return s.token }

// URL is the address to open: the listen address with the token.
func (s *Server) URL(addr string) string {
	return "http://" + addr + "/?token=" + url.QueryEscape(s.token)
}

// Run follows every host's event stream until ctx ends.
func (s *Server) Run(ctx context.Context) { s.hub.run(ctx) }

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	files := http.FileServerFS(static)
	m.Handle("GET /static/", http.StripPrefix("/static/", files))
	m.HandleFunc("GET /manifest.webmanifest", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/manifest+json")
		b, _ := assets.ReadFile("assets/manifest.webmanifest")
		w.Write(b)
	})
	m.HandleFunc("GET /{$}", s.servePage("list"))
	m.HandleFunc("GET /session", s.servePage("session"))
	m.HandleFunc("GET /events", s.serveEvents)
	m.HandleFunc("GET /api/sessions", s.serveSessions)
	m.HandleFunc("GET /api/events", s.serveSessionEvents)
	m.HandleFunc("POST /api/send", s.post(s.doSend))
	m.HandleFunc("POST /api/action", s.post(s.doAction))
	s.mux = m
}

// ServeHTTP checks the Host, then the token, before anything is served.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !s.hostAllowed(r.Host) {
		s.log.Warn("refused a request for a foreign host", zap.String("host", r.Host), zap.String("remote", r.RemoteAddr))
		httpError(w, http.StatusForbidden, "this server answers to its own address only, not "+r.Host+" (sessionctl web --allow-host NAME allows another name)")
		return
	}
	if tok := r.URL.Query().Get("token"); tok != "" && r.Method == http.MethodGet {
		if !s.tokenOK(tok) {
			httpError(w, http.StatusUnauthorized, "wrong token: open the URL sessionctl web printed")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: CookieName, Value: s.token, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
		// The token leaves the address bar and the history at once.
		q := r.URL.Query()
		q.Del("token")
		u := *r.URL
		u.RawQuery = q.Encode()
		http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
		return
	}
	c, err := r.Cookie(CookieName)
	if err != nil || !s.tokenOK(c.Value) {
		httpError(w, http.StatusUnauthorized, "no token: open the URL sessionctl web printed")
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) tokenOK(t string) bool {
	return subtle.ConstantTimeCompare([]byte(t), []byte(s.token)) == 1
}

// hostAllowed reports whether a Host header names this server: the
// listen address's host, localhost, or an allowed name; any port (a
// tunnel forwards another one).
func (s *Server) hostAllowed(hostport string) bool {
	h := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		h = hh
	}
	h = strings.Trim(strings.ToLower(h), "[]")
	return h != "" && s.allowed[h]
}

// post guards a state-changing request: the token in its header as well
// as the cookie, and an Origin that is this very page's.
func (s *Server) post(fn func(*http.Request) (any, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.tokenOK(r.Header.Get(TokenHeader)) {
			httpError(w, http.StatusForbidden, "a POST needs the token in its "+TokenHeader+" header")
			return
		}
		origin := r.Header.Get("Origin")
		u, err := url.Parse(origin)
		if origin == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || !strings.EqualFold(u.Host, r.Host) {
			s.log.Warn("refused a POST from a foreign origin", zap.String("origin", origin), zap.String("host", r.Host))
			httpError(w, http.StatusForbidden, fmt.Sprintf("a POST must come from this page (Origin %q is not %q)", origin, r.Host))
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		v, err := fn(r)
		if err != nil {
			var se *api.StatusError
			var be badRequest
			switch {
			case errors.As(err, &se):
				writeJSON(w, se.StatusCode, se.Body)
			case errors.As(err, &be):
				httpError(w, http.StatusBadRequest, be.Error())
			default:
				httpError(w, http.StatusBadGateway, err.Error())
			}
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

type badRequest struct{ error }

func httpError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, api.Error{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}

// client is the client of the host named, or an error a person reads.
func (s *Server) client(host string) (*api.Client, error) {
	c, ok := s.clients[host]
	if !ok {
		return nil, badRequest{fmt.Errorf("no host %q here", host)}
	}
	return c, nil
}

// pageData is what the page's template fills in.
type pageData struct {
	View  string
	Token string
	Host  string
	ID    string
	// The list's first rows, in top's order, and their summary; All:
	// stopped sessions older than a day too (?all=1).
	RowsHTML template.HTML
	Summary  string
	All      bool
}

func (s *Server) servePage(page string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		d := pageData{View: page, Token: s.token}
		if page == "list" {
			d.All = r.URL.Query().Get("all") == "1"
			if ss, loaded := s.hub.list(); loaded {
				now := time.Now()
				shown := view.Order(ss, now, d.All, nil)
				named := len(s.o.Hosts) > 1 || s.o.Hosts[0].Name != ""
				// A screenful or two in the HTML; the script adds the
				// rest from its snapshot.
				d.RowsHTML = rowsHTML(shown[:min(len(shown), firstRows)], now, named)
				if more := len(shown) - firstRows; more > 0 {
					d.RowsHTML += template.HTML(fmt.Sprintf(`<div class="empty more">and %d more…</div>`, more))
				}
				d.Summary = summary(shown)
			}
		}
		if page == "session" {
			d.Host, d.ID = r.URL.Query().Get("host"), r.URL.Query().Get("id")
			if _, ok := s.clients[d.Host]; !ok || d.ID == "" {
				httpError(w, http.StatusNotFound, "no such host or session")
				return
			}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if err := s.page.Execute(w, d); err != nil {
			s.log.Warn("render the page", zap.Error(err))
		}
	}
}

// serveSessions is every host's sessions as the hub has them now, with
// each host's state.
func (s *Server) serveSessions(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.hub.snapshot())
}

// firstRows is how many rows the first page's HTML has: more than a tall
// screen shows; 2,000 rows of HTML took the browser half a second.
const firstRows = 150

// recentEvents is how far back in a host's log a session's page looks.
const recentEvents = 5000

// serveSessionEvents is a session's recent events: those among the last
// recentEvents of its host's log, the newest last, at most 50.
func (s *Server) serveSessionEvents(w http.ResponseWriter, r *http.Request) {
	c, err := s.client(r.URL.Query().Get("host"))
	if err != nil {
		httpError(w, http.StatusBadRequest, err.Error())
		return
	}
	id := r.URL.Query().Get("id")
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	h, err := c.Health(ctx)
	if err != nil {
		httpError(w, http.StatusBadGateway, err.Error())
		return
	}
	var since uint64
	if h.LastEventSeq > recentEvents {
		since = h.LastEventSeq - recentEvents
	}
	evs := []api.Event{}
	err = c.Events(ctx, api.EventsOptions{Since: since}, func(ev api.Event) error {
		if ev.SessionID == id {
			evs = append(evs, ev)
			if len(evs) > 50 {
				evs = evs[1:]
			}
		}
		return nil
	})
	if err != nil {
		httpError(w, http.StatusBadGateway, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, evs)
}

// sendBody is the page's POST /api/send.
type sendBody struct {
	Host     string `json:"host"`
	ID       string `json:"id"`
	Prompt   string `json:"prompt"`
	WhenIdle bool   `json:"when_idle"`
}

func (s *Server) doSend(r *http.Request) (any, error) {
	var b sendBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		return nil, badRequest{fmt.Errorf("the request is not JSON: %w", err)}
	}
	if strings.TrimSpace(b.Prompt) == "" || b.ID == "" {
		return nil, badRequest{errors.New("send needs a session and a prompt")}
	}
	c, err := s.client(b.Host)
	if err != nil {
		return nil, err
	}
	s.log.Info("send", zap.String("host", b.Host), zap.String("session", b.ID), zap.Bool("when_idle", b.WhenIdle))
	return c.Send(r.Context(), b.ID, api.SendRequest{Prompt: b.Prompt, WhenIdle: b.WhenIdle})
}

// actionBody is the page's POST /api/action: repair and reap are a dry
// run without apply, stop and abort always act (the page showed their
// plan and asked first).
type actionBody struct {
	Host   string `json:"host"`
	ID     string `json:"id"`
	Action string `json:"action"`
	Apply  bool   `json:"apply"`
}

func (s *Server) doAction(r *http.Request) (any, error) {
	var b actionBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		return nil, badRequest{fmt.Errorf("the request is not JSON: %w", err)}
	}
	switch b.Action {
	case "repair", "reap", "stop", "abort":
	default:
		return nil, badRequest{fmt.Errorf("no action %q (repair, reap, stop, abort)", b.Action)}
	}
	if b.ID == "" {
		return nil, badRequest{errors.New("an action needs a session")}
	}
	if (b.Action == "stop" || b.Action == "abort") && !b.Apply {
		// sessiond carries these out as soon as asked: the page asks
		// its user first and says so with apply.
		return nil, badRequest{fmt.Errorf("%s acts at once: confirm it (apply)", b.Action)}
	}
	c, err := s.client(b.Host)
	if err != nil {
		return nil, err
	}
	s.log.Info("action", zap.String("host", b.Host), zap.String("session", b.ID), zap.String("action", b.Action), zap.Bool("apply", b.Apply))
	return c.Action(r.Context(), b.ID, b.Action, api.ActionRequest{Apply: b.Apply})
}

// serveEvents is the page's live feed: server-sent events, a snapshot of
// every session first, then each change.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		httpError(w, http.StatusInternalServerError, "streaming is not supported here")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	ch, cancel := s.hub.subscribe()
	defer cancel()
	// A comment now and then keeps tunnels and proxies from closing an
	// idle stream.
	keep := time.NewTicker(25 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case b, ok := <-ch:
			if !ok {
				return
			}
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
			fl.Flush()
		case <-keep.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		}
	}
}
