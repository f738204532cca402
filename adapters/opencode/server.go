package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/proc"
)

// Server is a reachable OpenCode server (`opencode serve`, `web`, or any
// opencode given --port) found in the last Discover pass.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:4096".
	URL string
	// Owner is the server process.
	Owner   proc.Identity
	Version string
}

// SessionStatus is one entry of GET /session/status. OpenCode keeps it in
// memory only, per process: a session absent from the map is idle there.
type SessionStatus struct {
	// Type is "idle", "busy" or "retry".
	Type    string
	Attempt int
	Message string
	// Next is when a retry is due.
	Next time.Time
}

// server is a probed server and what it said this pass.
type server struct {
	Server
	proc *ocProc
	// status merges the answers of GET /session/status; statusDirs are the
	// directories it answered for ("" = its default directory).
	status     map[string]SessionStatus
	statusDirs map[string]bool
	// questions and permissions name sessions with a pending request;
	// askedDirs are the directories whose lists were read.
	questions   map[string]bool
	permissions map[string]bool
	askedDirs   map[string]bool
}

// answeredFor reports whether the server gave its status for dir.
func (s *server) answeredFor(dir string) bool { return s.statusDirs[dir] }

// httpError is a non-2xx answer.
type httpError struct {
	Code int
	Name string // OpenCode's error name ("NotFoundError")
}

func (e *httpError) Error() string {
	if e.Name != "" {
		return fmt.Sprintf("HTTP %d (%s)", e.Code, e.Name)
	}
	return fmt.Sprintf("HTTP %d", e.Code)
}

// maxBody bounds a server answer sessiond reads.
const maxBody = 4 << 20

// get fetches base+path (with the directory as query and header when set)
// into v, with HTTP Basic auth when a password is configured.
func (a *Adapter) get(ctx context.Context, base, path, dir string, v any) error {
	return a.do(ctx, http.MethodGet, base, path, dir, nil, v)
}

// do sends one request to a server: body, when not nil, as JSON; a 2xx
// answer decoded into v (when not nil); any other answer an *httpError.
// Each request is bounded by ServerTimeout.
func (a *Adapter) do(ctx context.Context, method, base, path, dir string, body, v any) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ServerTimeout)
	defer cancel()
	u := base + path
	if dir != "" {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		u += sep + "directory=" + url.QueryEscape(dir)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if dir != "" {
		req.Header.Set("x-opencode-directory", dir)
	}
	if a.cfg.ServerPassword != "" {
		user := a.cfg.ServerUsername
		if user == "" {
			user = "opencode"
		}
		req.SetBasicAuth(user, a.cfg.ServerPassword)
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	rb, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		he := &httpError{Code: resp.StatusCode}
		var e struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(rb, &e) == nil {
			he.Name = e.Name
		}
		return he
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(rb, v); err != nil {
		return fmt.Errorf("%s %s: bad JSON: %w", method, path, err)
	}
	return nil
}

// dialHost turns a listening address into one to dial: a wildcard becomes
// loopback.
func dialHost(h string) string {
	switch h {
	case "", "0.0.0.0", "*":
		return "127.0.0.1"
	case "::", "[::]":
		return "::1"
	}
	return h
}

// candidateURLs lists where a server process may listen: its --port, else
// its listening sockets.
func (a *Adapter) candidateURLs(o *ocProc) []string {
	seen := map[string]bool{}
	var out []string
	add := func(hostport string) {
		u := "http://" + hostport
		if !seen[u] {
			seen[u] = true
			out = append(out, u)
		}
	}
	if o.args.PortSet && o.args.Port > 0 {
		add(net.JoinHostPort(dialHost(o.args.Hostname), strconv.Itoa(o.args.Port)))
	}
	for _, l := range listeners(a.cfg.ProcRoot, o.p.Identity.PID, o.sockets) {
		add(l)
	}
	sort.Strings(out)
	return out
}

// maxStatusDirs bounds the directories asked per server per pass.
const maxStatusDirs = 16

// probeServers finds the reachable servers among the opencode processes
// and asks each for its session statuses in its default directory and in
// the given directories (those with work in flight first), in parallel and
// with short timeouts.
func (a *Adapter) probeServers(ctx context.Context, procs []*ocProc, dirs []string) []*server {
	if len(dirs) > maxStatusDirs {
		dirs = dirs[:maxStatusDirs]
	}
	var (
		mu  sync.Mutex
		out []*server
		wg  sync.WaitGroup
	)
	for _, o := range procs {
		if !o.server() {
			continue
		}
		wg.Add(1)
		go func(o *ocProc) {
			defer wg.Done()
			if s := a.probeServer(ctx, o, dirs); s != nil {
				mu.Lock()
				out = append(out, s)
				mu.Unlock()
			}
		}(o)
	}
	wg.Wait()
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out
}

func (a *Adapter) probeServer(ctx context.Context, o *ocProc, dirs []string) *server {
	for _, base := range a.candidateURLs(o) {
		var h struct {
			Healthy bool   `json:"healthy"`
			Version string `json:"version"`
		}
		if err := a.get(ctx, base, "/global/health", "", &h); err != nil {
			a.noteServerError(base, err)
			continue
		}
		if !h.Healthy {
			continue
		}
		s := &server{
			Server: Server{URL: base, Owner: o.id(), Version: h.Version}, proc: o,
			status: map[string]SessionStatus{}, statusDirs: map[string]bool{},
			questions: map[string]bool{}, permissions: map[string]bool{}, askedDirs: map[string]bool{},
		}
		for _, dir := range append([]string{""}, dirs...) {
			st, err := a.sessionStatus(ctx, base, dir)
			if err != nil {
				a.noteServerError(base, err)
				continue
			}
			s.statusDirs[dir] = true
			if dir == "" {
				for _, d := range o.dirs[:min(1, len(o.dirs))] {
					s.statusDirs[d] = true
				}
			}
			busy := false
			for id, v := range st {
				if v.Type != "" && v.Type != "idle" {
					s.status[id] = v
					busy = true
				}
			}
			// Pending questions and permissions matter where something is
			// busy, or where the data shows a question waiting.
			if busy || dir != "" {
				a.pending(ctx, s, dir)
			}
		}
		return s
	}
	return nil
}

// sessionStatus reads GET /session/status for a directory.
func (a *Adapter) sessionStatus(ctx context.Context, base, dir string) (map[string]SessionStatus, error) {
	var raw map[string]struct {
		Type    string `json:"type"`
		Attempt int    `json:"attempt"`
		Message string `json:"message"`
		Next    jsTime `json:"next"`
	}
	if err := a.get(ctx, base, "/session/status", dir, &raw); err != nil {
		return nil, err
	}
	out := make(map[string]SessionStatus, len(raw))
	for id, v := range raw {
		out[id] = SessionStatus{Type: v.Type, Attempt: v.Attempt, Message: v.Message, Next: v.Next.t}
	}
	return out, nil
}

// pending reads the pending questions and permissions for a directory.
func (a *Adapter) pending(ctx context.Context, s *server, dir string) {
	okAll := true
	for _, ep := range []struct {
		path string
		into map[string]bool
	}{{"/question", s.questions}, {"/permission", s.permissions}} {
		var list []struct {
			SessionID string `json:"sessionID"`
		}
		if err := a.get(ctx, s.URL, ep.path, dir, &list); err != nil {
			okAll = false
			continue
		}
		for _, q := range list {
			ep.into[q.SessionID] = true
		}
	}
	if okAll {
		s.askedDirs[dir] = true
	}
}

// noteServerError logs a server that could not be asked, once per URL and
// error text, so a wrong password is reported without flooding the log.
func (a *Adapter) noteServerError(base string, err error) {
	key := base + " " + err.Error()
	a.mu.Lock()
	seen := a.loggedServerErrs[key]
	a.loggedServerErrs[key] = true
	a.mu.Unlock()
	if seen {
		return
	}
	var he *httpError
	if errors.As(err, &he) && he.Code == http.StatusUnauthorized {
		a.log.Warn("OpenCode server wants a password; set OPENCODE_SERVER_PASSWORD (and OPENCODE_SERVER_USERNAME) for sessiond",
			zap.String("url", base))
		return
	}
	a.log.Debug("OpenCode server did not answer", zap.String("url", base), zap.Error(err))
}
