package opencode

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// serverInfo is a reachable OpenCode server (`opencode serve`, `web`, or any
// opencode given --port) of sessiond's uid, found in the last Discover
// pass. It is checked again before it is used later (checkServer).
type serverInfo struct {
	// URL is the base URL, always a loopback address: "http://127.0.0.1:4096".
	URL string
	// Owner is the server process.
	Owner   proc.Identity
	Version string
}

// statusEntry is one entry of GET /session/status. OpenCode keeps it in
// memory only, per process: a session absent from the map is idle there.
type statusEntry struct {
	// Type is "idle", "busy" or "retry".
	Type    string
	Attempt int
	Message string
	// Next is when a retry is due.
	Next time.Time
}

// server is a probed server and what it said this pass.
type server struct {
	serverInfo
	proc *ocProc
	// status merges the answers of GET /session/status; statusDirs are the
	// directories it answered for ("" = its default directory).
	status     map[string]statusEntry
	statusDirs map[string]bool
	// questions and permissions are what sessions with a pending request
	// wait for; askedDirs are the directories whose lists were read.
	questions   map[string]*session.WaitingFor
	permissions map[string]*session.WaitingFor
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

// authorize adds the server password, when sessiond has one, to req
// (HTTP Basic auth, user "opencode" unless configured).
func (a *Adapter) authorize(req *http.Request) {
	if a.cfg.ServerPassword == "" {
		return
	}
	user := a.cfg.ServerUsername
	if user == "" {
		user = "opencode"
	}
	req.SetBasicAuth(user, a.cfg.ServerPassword)
}

// do sends one request to a server: body, when not nil, as JSON; a 2xx
// answer decoded into v (when not nil); any other answer an *httpError.
// Each request is bounded by ServerTimeout. A base that is not a loopback
// address is refused before anything is dialled: requests carry the
// password.
func (a *Adapter) do(ctx context.Context, method, base, path, dir string, body, v any) error {
	if _, err := loopbackAddr(base); err != nil {
		return fmt.Errorf("%s %s: refused: %w", method, path, err)
	}
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
	a.authorize(req)
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

// candidateURLs lists where sessiond may ask a server process (of its own
// uid): the loopback addresses of its --port and of its own listening
// sockets, each checked against the listening sockets (table) where the
// platform lists them. See trust.go.
func (a *Adapter) candidateURLs(o *ocProc, table []proc.Listener) []string {
	var cands []netip.AddrPort
	if o.args.PortSet && o.args.Port > 0 {
		addrs := hostnameAddrs(o.args.Hostname)
		if len(addrs) == 0 {
			a.logOnce("hostname "+o.id().String()+" "+o.args.Hostname, "OpenCode server not probed: --hostname is not a loopback address, and sessiond sends its password to loopback only",
				zap.Int("pid", o.id().PID), zap.String("hostname", o.args.Hostname))
		}
		for _, ip := range addrs {
			cands = append(cands, netip.AddrPortFrom(ip, uint16(o.args.Port)))
		}
	}
	for _, l := range table {
		if !o.sockets[l.Inode] {
			continue
		}
		if ip, ok := dialAddr(l.Addr.Addr()); ok {
			cands = append(cands, netip.AddrPortFrom(ip, l.Addr.Port()))
		} else {
			a.logOnce("listen "+o.id().String()+" "+l.Addr.String(), "OpenCode server socket not probed: it listens off loopback, and sessiond sends its password to loopback only",
				zap.Int("pid", o.id().PID), zap.Stringer("listen", l.Addr))
		}
	}
	seen := map[string]bool{}
	var out []string
	for _, ap := range cands {
		u := serverURL(ap)
		if seen[u] {
			continue
		}
		seen[u] = true
		if proc.ListenersKnown {
			if err := checkListener(table, ap, a.uid); err != nil {
				a.logOnce("check "+o.id().String()+" "+u, "OpenCode server not probed: its listener is not trusted",
					zap.Int("pid", o.id().PID), zap.String("url", u), zap.Error(err))
				continue
			}
		}
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// maxStatusDirs bounds the directories asked per server per pass.
const maxStatusDirs = 16

// probeServers finds the reachable servers among the opencode processes
// of sessiond's uid (trust.go) and asks each for its session statuses in
// its default directory and in the given directories (those with work in
// flight first), in parallel and with short timeouts.
func (a *Adapter) probeServers(ctx context.Context, procs []*ocProc, dirs []string) []*server {
	if len(dirs) > maxStatusDirs {
		dirs = dirs[:maxStatusDirs]
	}
	var (
		mu    sync.Mutex
		out   []*server
		wg    sync.WaitGroup
		table []proc.Listener
		read  bool
	)
	for _, o := range procs {
		if !o.server() {
			continue
		}
		if o.p.UID != a.uid {
			a.logOnce("uid "+o.id().String(), "OpenCode server not probed: it runs as another user, who would receive sessiond's password",
				zap.Int("pid", o.id().PID), zap.Int("uid", o.p.UID), zap.Int("sessiond_uid", a.uid))
			continue
		}
		if proc.ListenersKnown && !read {
			read = true
			var err error
			if table, err = a.host.Listeners(); err != nil {
				// Nothing can be checked, so nothing is dialled.
				a.logOnce("listeners "+err.Error(), "OpenCode servers not probed: listening sockets unreadable", zap.Error(err))
			}
		}
		urls := a.candidateURLs(o, table)
		if len(urls) == 0 {
			continue
		}
		wg.Add(1)
		go func(o *ocProc) {
			defer wg.Done()
			if s := a.probeServer(ctx, o, urls, dirs); s != nil {
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

// probeServer asks the first of urls that answers healthy.
func (a *Adapter) probeServer(ctx context.Context, o *ocProc, urls, dirs []string) *server {
	for _, base := range urls {
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
			serverInfo: serverInfo{URL: base, Owner: o.id(), Version: h.Version}, proc: o,
			status: map[string]statusEntry{}, statusDirs: map[string]bool{},
			questions: map[string]*session.WaitingFor{}, permissions: map[string]*session.WaitingFor{}, askedDirs: map[string]bool{},
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
func (a *Adapter) sessionStatus(ctx context.Context, base, dir string) (map[string]statusEntry, error) {
	var raw map[string]struct {
		Type    string `json:"type"`
		Attempt int    `json:"attempt"`
		Message string `json:"message"`
		Next    jsTime `json:"next"`
	}
	if err := a.get(ctx, base, "/session/status", dir, &raw); err != nil {
		return nil, err
	}
	out := make(map[string]statusEntry, len(raw))
	for id, v := range raw {
		out[id] = statusEntry{Type: v.Type, Attempt: v.Attempt, Message: v.Message, Next: v.Next.t}
	}
	return out, nil
}

// pending reads the pending questions and permissions for a directory:
// for each session, what it waits for in the words of the request
// (1.18.33's PermissionRequest: the permission and its patterns, the
// command or the file; QuestionRequest: its questions). A session's
// first request is the one shown.
func (a *Adapter) pending(ctx context.Context, s *server, dir string) {
	okAll := true
	var questions []struct {
		SessionID string `json:"sessionID"`
		Questions []struct {
			Question string `json:"question"`
		} `json:"questions"`
	}
	if err := a.get(ctx, s.URL, "/question", dir, &questions); err != nil {
		okAll = false
	}
	for _, q := range questions {
		if s.questions[q.SessionID] == nil {
			w := &session.WaitingFor{Kind: session.WaitingQuestion}
			if len(q.Questions) > 0 {
				w.Question = oneline.Cut(q.Questions[0].Question, waitingTextMax)
			}
			s.questions[q.SessionID] = w
		}
	}
	var permissions []struct {
		SessionID  string   `json:"sessionID"`
		Permission string   `json:"permission"`
		Patterns   []string `json:"patterns"`
	}
	if err := a.get(ctx, s.URL, "/permission", dir, &permissions); err != nil {
		okAll = false
	}
	for _, p := range permissions {
		if s.permissions[p.SessionID] == nil {
			s.permissions[p.SessionID] = &session.WaitingFor{Kind: session.WaitingPermission, Tool: p.Permission,
				Input: oneline.Cut(strings.Join(p.Patterns, " "), waitingTextMax)}
		}
	}
	if okAll {
		s.askedDirs[dir] = true
	}
}

// waitingTextMax bounds the words kept of a question or a permission's
// patterns.
const waitingTextMax = 120

// maxLogged bounds the keys remembered by firstTime; past it they are
// forgotten and a message may be logged once more.
const maxLogged = 1024

// firstTime reports whether key is new, remembering it: a refusal or a
// server error repeats every pass and would flood the log.
func (a *Adapter) firstTime(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.loggedServerErrs[key] {
		return false
	}
	if len(a.loggedServerErrs) >= maxLogged {
		clear(a.loggedServerErrs)
	}
	a.loggedServerErrs[key] = true
	return true
}

// logOnce logs msg at debug level the first time key is seen.
func (a *Adapter) logOnce(key, msg string, fields ...zap.Field) {
	if a.firstTime(key) {
		a.log.Debug(msg, fields...)
	}
}

// noteServerError logs a server that could not be asked, once per URL and
// error text, so a wrong password is reported without flooding the log.
func (a *Adapter) noteServerError(base string, err error) {
	if !a.firstTime(base + " " + err.Error()) {
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
