package web

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
)

// daemonStub answers sessiond's API on a real Unix socket and records
// each request that reached it: what the security rules refuse must never
// get there. (The browser tests run real daemons.)
type daemonStub struct {
	mu   sync.Mutex
	reqs []string
}

func (d *daemonStub) reached() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.reqs...)
}

func startDaemonStub(t *testing.T) (*daemonStub, string) {
	dir, err := os.MkdirTemp("/tmp", "wb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemonStub{}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/health":
			io.WriteString(w, `{"last_event_seq":0}`)
			return
		case r.URL.Path == "/v1/sessions":
			io.WriteString(w, `{"sessions":[{"id":"5e55000000aa","agent":"claude","status":"running","activity":"idle","pid":1}]}`)
			return
		case r.URL.Path == "/v1/events":
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		b, _ := io.ReadAll(r.Body)
		d.mu.Lock()
		d.reqs = append(d.reqs, r.Method+" "+r.URL.Path+" "+string(b))
		d.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/send") {
			io.WriteString(w, `{"delivered":true,"via":"tmux","session":{"id":"5e55000000aa"}}`)
			return
		}
		io.WriteString(w, `{"action":"stop","applied":true,"steps":[],"session":{"id":"5e55000000aa"}}`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return d, sock
}

const testToken = "0123456789abcdef0123456789abcdef"

// startWeb serves the dashboard over a daemon stub on 127.0.0.1.
func startWeb(t *testing.T, allow ...string) (*httptest.Server, *daemonStub) {
	d, sock := startDaemonStub(t)
	ts := httptest.NewUnstartedServer(nil)
	s, err := New(Options{Hosts: []Host{{Name: "", Client: api.NewClient(sock)}}, Listen: ts.Listener.Addr().String(),
		AllowHosts: allow, Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go s.Run(ctx)
	ts.Config.Handler = s
	ts.Config.BaseContext = func(net.Listener) context.Context { return ctx }
	ts.Start()
	t.Cleanup(func() { cancel(); ts.Close() })
	return ts, d
}

type req struct {
	method, path string
	host         string // the Host header; "" for the server's own
	cookie       string
	header       string // the token header
	origin       string
	body         string
}

func do(t *testing.T, ts *httptest.Server, r req) (*http.Response, string) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	hr, err := http.NewRequest(r.method, ts.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if r.host != "" {
		hr.Host = r.host
	}
	if r.cookie != "" {
		hr.AddCookie(&http.Cookie{Name: CookieName, Value: r.cookie})
	}
	if r.header != "" {
		hr.Header.Set(TokenHeader, r.header)
	}
	if r.origin != "" {
		hr.Header.Set("Origin", r.origin)
	}
	client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, string(b)
}

// Every path needs the token: without it, or with a wrong one, 401.
func TestEveryRequestNeedsTheToken(t *testing.T) {
	ts, d := startWeb(t)
	for _, path := range []string{"/", "/session?host=&id=5e55000000aa", "/events", "/api/sessions", "/api/events?host=&id=x",
		"/static/app.js", "/static/style.css", "/manifest.webmanifest", "/nothing-here"} {
		for _, cookie := range []string{"", "wrong", testToken[:10]} {
			resp, body := do(t, ts, req{method: "GET", path: path, cookie: cookie})
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET %s with cookie %q: %d, want 401: %s", path, cookie, resp.StatusCode, body)
			}
		}
	}
	resp, body := do(t, ts, req{method: "GET", path: "/?token=wrong"})
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("a wrong token in the URL: %d, cookie %q: %s", resp.StatusCode, resp.Header.Get("Set-Cookie"), body)
	}
	resp, body = do(t, ts, req{method: "POST", path: "/api/send", header: testToken, origin: ts.URL,
		body: `{"id":"5e55000000aa","prompt":"hi"}`})
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a POST with the header but no cookie: %d, want 401: %s", resp.StatusCode, body)
	}
	if got := d.reached(); len(got) != 0 {
		t.Errorf("requests without the token reached sessiond: %q", got)
	}
}

// The token in the URL becomes an HttpOnly, SameSite=Strict cookie and
// leaves the address; the cookie then opens every page.
func TestTheTokenBecomesACookie(t *testing.T) {
	ts, _ := startWeb(t)
	resp, body := do(t, ts, req{method: "GET", path: "/session?host=&id=5e55000000aa&token=" + testToken})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the URL with the token: %d, want 303: %s", resp.StatusCode, body)
	}
	loc := resp.Header.Get("Location")
	if strings.Contains(loc, "token") || !strings.HasPrefix(loc, "/session?") || !strings.Contains(loc, "id=5e55000000aa") {
		t.Errorf("redirected to %q: want the same page without the token", loc)
	}
	var c *http.Cookie
	for _, x := range resp.Cookies() {
		if x.Name == CookieName {
			c = x
		}
	}
	if c == nil || c.Value != testToken || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
		t.Fatalf("cookie %+v: want the token, HttpOnly, SameSite=Strict, Path=/", c)
	}
	for _, path := range []string{"/", "/session?host=&id=5e55000000aa", "/static/app.js", "/manifest.webmanifest", "/api/sessions"} {
		resp, body := do(t, ts, req{method: "GET", path: path, cookie: testToken})
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s with the cookie: %d: %s", path, resp.StatusCode, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s: CSP %q", path, csp)
		}
	}
	_, page := do(t, ts, req{method: "GET", path: "/", cookie: testToken})
	if !strings.Contains(page, `name="sessiond-token" content="`+testToken+`"`) || !strings.Contains(page, `rel="manifest"`) {
		t.Errorf("the page lacks the token for its POSTs or the manifest:\n%s", page)
	}
}

// The Host header must be the listen address, localhost or an allowed
// name, whatever the port (a tunnel forwards another): DNS rebinding gets
// 403 even with the cookie.
func TestForeignHostIsRefused(t *testing.T) {
	ts, d := startWeb(t, "laptop.tail1234.ts.net")
	u, _ := url.Parse(ts.URL)
	_, port, _ := net.SplitHostPort(u.Host)
	for host, want := range map[string]int{
		u.Host:                        200,
		"localhost:" + port:           200,
		"localhost:9000":              200, // ssh -L 9000:localhost:port
		"LOCALHOST":                   200,
		"laptop.tail1234.ts.net":      200,
		"laptop.tail1234.ts.net:443":  200,
		"evil.example":                403,
		"evil.example:" + port:        403,
		"127.0.0.1.evil.example":      403,
		"localhost.evil.example":      403,
		"ts.net":                      403,
		"[::1]:" + port:               403,
		"192.168.1.10:" + port:        403,
		"tail1234.ts.net":             403,
		"laptop.tail1234.ts.net.evil": 403,
	} {
		resp, body := do(t, ts, req{method: "GET", path: "/api/sessions", host: host, cookie: testToken})
		if resp.StatusCode != want {
			t.Errorf("Host %q: %d, want %d: %s", host, resp.StatusCode, want, body)
		}
		resp, body = do(t, ts, req{method: "POST", path: "/api/send", host: host, cookie: testToken, header: testToken,
			origin: "http://" + host, body: `{"id":"5e55000000aa","prompt":"hi"}`})
		if want == 403 && resp.StatusCode != 403 {
			t.Errorf("POST with Host %q: %d, want 403: %s", host, resp.StatusCode, body)
		}
		resp, _ = do(t, ts, req{method: "GET", path: "/?token=" + testToken, host: host})
		if want == 403 && (resp.StatusCode != 403 || resp.Header.Get("Set-Cookie") != "") {
			t.Errorf("the token URL with Host %q: %d, cookie %q; want 403 and no cookie", host, resp.StatusCode, resp.Header.Get("Set-Cookie"))
		}
	}
	for _, r := range d.reached() {
		if strings.Contains(r, "evil") {
			t.Errorf("a request for a foreign host reached sessiond: %s", r)
		}
	}
}

// A state-changing request is a POST with the token in its header and an
// Origin that is the page's own; anything less never reaches sessiond.
func TestPostNeedsHeaderAndOrigin(t *testing.T) {
	ts, d := startWeb(t)
	send := `{"host":"","id":"5e55000000aa","prompt":"hello there","when_idle":true}`
	for _, c := range []struct {
		name   string
		r      req
		status int
	}{
		{"no token header", req{header: "", origin: ts.URL}, 403},
		{"a wrong token header", req{header: "wrong", origin: ts.URL}, 403},
		{"no Origin", req{header: testToken}, 403},
		{"a foreign Origin", req{header: testToken, origin: "http://evil.example"}, 403},
		{"a foreign Origin on the same port", req{header: testToken, origin: strings.Replace(ts.URL, "127.0.0.1", "evil.example", 1)}, 403},
		{"Origin null", req{header: testToken, origin: "null"}, 403},
		{"an Origin of another port", req{header: testToken, origin: "http://127.0.0.1:1"}, 403},
		{"a file Origin", req{header: testToken, origin: "file://"}, 403},
	} {
		r := c.r
		r.method, r.path, r.cookie, r.body = "POST", "/api/send", testToken, send
		resp, body := do(t, ts, r)
		if resp.StatusCode != c.status {
			t.Errorf("%s: %d, want %d: %s", c.name, resp.StatusCode, c.status, body)
		}
	}
	for _, path := range []string{"/api/send", "/api/action"} {
		resp, body := do(t, ts, req{method: "GET", path: path + "?id=5e55000000aa&prompt=x", cookie: testToken})
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d, want 405: %s", path, resp.StatusCode, body)
		}
	}
	// stop and abort act at once in sessiond: the page says it confirmed.
	resp, body := do(t, ts, req{method: "POST", path: "/api/action", cookie: testToken, header: testToken, origin: ts.URL,
		body: `{"host":"","id":"5e55000000aa","action":"stop"}`})
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "confirm") {
		t.Errorf("stop without apply: %d, want 400: %s", resp.StatusCode, body)
	}
	if got := d.reached(); len(got) != 0 {
		t.Fatalf("refused requests reached sessiond: %q", got)
	}

	resp, body = do(t, ts, req{method: "POST", path: "/api/send", cookie: testToken, header: testToken, origin: ts.URL, body: send})
	var sr api.SendResponse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &sr) != nil || !sr.Delivered {
		t.Fatalf("a proper POST: %d: %s", resp.StatusCode, body)
	}
	resp, body = do(t, ts, req{method: "POST", path: "/api/action", cookie: testToken, header: testToken, origin: ts.URL,
		body: `{"host":"","id":"5e55000000aa","action":"stop","apply":true}`})
	if resp.StatusCode != 200 {
		t.Fatalf("a confirmed stop: %d: %s", resp.StatusCode, body)
	}
	got := d.reached()
	if len(got) != 2 || !strings.HasPrefix(got[0], "POST /v1/sessions/5e55000000aa/send ") || !strings.Contains(got[0], `"prompt":"hello there"`) ||
		!strings.Contains(got[0], `"when_idle":true`) || !strings.HasPrefix(got[1], "POST /v1/sessions/5e55000000aa/stop ") {
		t.Fatalf("sessiond got %q; want the send, then the stop", got)
	}
}

// A non-loopback listen address is the command's business; New refuses
// a listen address it cannot read.
func TestNewNeedsAListenAddress(t *testing.T) {
	if _, err := New(Options{Hosts: []Host{{Client: api.NewClient("/nonexistent")}}, Listen: "nonsense"}); err == nil {
		t.Fatal("New took a listen address without a port")
	}
	if _, err := New(Options{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("New took no host")
	}
}
