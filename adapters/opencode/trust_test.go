package opencode

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
)

// The password every server test configures: a server sessiond must not
// trust must never see it.
const testPassword = "s3cret"

// redirectDialer stands in for the network: it records every address the
// adapter dials and connects each one to the fake server, so that dialling
// an address sessiond must never dial is both seen and answered (the way a
// listener there would answer, and collect the password).
type redirectDialer struct {
	to string

	mu      sync.Mutex
	dialled []string
}

func (d *redirectDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.dialled = append(d.dialled, addr)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, "tcp", d.to)
}

func (d *redirectDialer) addrs() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.dialled...)
}

func (d *redirectDialer) client() *http.Client {
	return &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DialContext: d.dial}}
}

// untrusted asserts that nothing was sent to the server: no dial, no
// request, no credentials, and no server reported.
func untrusted(t *testing.T, a *Adapter, d *redirectDialer, srv *opencodetest.FakeServer) {
	t.Helper()
	if got := d.addrs(); len(got) != 0 {
		t.Errorf("dialled %v", got)
	}
	if got := srv.RequestLog(); len(got) != 0 {
		t.Errorf("the server was asked %v", got)
	}
	if n := srv.CredentialsSeen(); n != 0 {
		t.Errorf("the server received the password %d times", n)
	}
	if s := a.lastServers(); len(s) != 0 {
		t.Errorf("servers %+v, want none", s)
	}
}

// busyOnServer makes a session with a tool in flight that the fake server
// reports busy: a server that is asked claims it as its owner.
func busyOnServer(f *fixture, srv *opencodetest.FakeServer) string {
	s, _ := f.db.InterruptedMidTool("/w", f.now.Add(-time.Hour))
	srv.SetStatus("", s.SessionID, opencodetest.Status{Type: "busy"})
	return s.SessionID
}

// An opencode server process of another user (or of a uid the snapshot
// could not read) is never dialled, even when its listening socket looks
// like this user's: it would receive OPENCODE_SERVER_PASSWORD and could
// claim this user's sessions by reporting them busy.
func TestServerOfAnotherUIDIsNeverDialled(t *testing.T) {
	for _, tc := range []struct {
		name string
		uid  int
	}{{"another uid", os.Getuid() + 1}, {"unknown uid", -1}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			srv := opencodetest.NewFakeServer()
			defer srv.Close()
			srv.Password = testPassword
			sid := busyOnServer(f, srv)
			p := f.proc(500, time.Hour, false, "/srv", "opencode", "serve", "--port", strconv.Itoa(srv.Port()))
			p.UID = tc.uid
			if err := f.tree.Listen(500, srv.Port(), 5000); err != nil {
				t.Fatal(err)
			}
			d := &redirectDialer{to: srv.Listener.Addr().String()}
			a := f.adapter(func(c *Config) { c.ServerPassword, c.HTTPClient = testPassword, d.client() })
			o := find(t, mustDiscover(t, a, opencodetest.Snapshot(p)), sid)
			untrusted(t, a, d, srv)
			if len(o.Owners) != 0 {
				t.Errorf("another user's server claimed the session: owners %+v", o.Owners)
			}
		})
	}
}

// An argv --hostname is where the server listens, not an address to dial
// as given: a non-loopback address or a name (resolved by DNS, it may be
// anywhere) is never dialled, so the password never leaves loopback. A
// wildcard listens on loopback too and is dialled there; "localhost" is
// dialled as 127.0.0.1 or ::1, never resolved.
func TestServerArgvHostname(t *testing.T) {
	for _, tc := range []struct {
		hostname string
		want     string // the dialled host, "" for none
	}{
		{"192.0.2.10", ""},
		{"10.0.0.1", ""},
		{"2001:db8::1", ""},
		{"::ffff:192.0.2.10", ""},
		{"evil.example", ""},
		{"localhost.evil.example", ""},
		{"", "127.0.0.1"},
		{"127.0.0.1", "127.0.0.1"},
		{"127.1.2.3", "127.1.2.3"},
		{"0.0.0.0", "127.0.0.1"},
		{"::", "::1"},
		{"[::1]", "::1"},
		{"::ffff:127.0.0.1", "127.0.0.1"},
		{"localhost", "127.0.0.1"},
	} {
		t.Run("hostname="+tc.hostname, func(t *testing.T) {
			f := newFixture(t)
			srv := opencodetest.NewFakeServer()
			defer srv.Close()
			srv.Password = testPassword
			busyOnServer(f, srv)
			port := srv.Port()
			argv := []string{"opencode", "serve", "--port", strconv.Itoa(port)}
			if tc.hostname != "" {
				argv = append(argv, "--hostname", tc.hostname)
			}
			// Open files unreadable (no fd directory): only the argv says
			// where it listens. This user listens on every address of the
			// port, so only the address decides.
			p := opencodetest.Proc(510, 1510, "/srv", argv...)
			for i, l := range []string{"0.0.0.0", "::"} {
				if err := f.tree.ListenOn(0, netip.AddrPortFrom(netip.MustParseAddr(l), uint16(port)), os.Getuid(), uint64(5100+i)); err != nil {
					t.Fatal(err)
				}
			}
			d := &redirectDialer{to: srv.Listener.Addr().String()}
			a := f.adapter(func(c *Config) { c.ServerPassword, c.HTTPClient = testPassword, d.client() })
			mustDiscover(t, a, opencodetest.Snapshot(p))
			if tc.want == "" {
				untrusted(t, a, d, srv)
				return
			}
			want := net.JoinHostPort(tc.want, strconv.Itoa(port))
			if got := d.addrs(); len(got) == 0 || got[0] != want {
				t.Fatalf("dialled %v, want %s first", got, want)
			}
			if s := a.lastServers(); len(s) != 1 || s[0].URL != "http://"+want {
				t.Fatalf("servers %+v, want http://%s", s, want)
			}
		})
	}
}

// Every request goes to a loopback address: a URL that is anything else
// (from any path that may build one) is refused before it is dialled.
func TestRequestsOnlyToLoopback(t *testing.T) {
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	srv.Password = testPassword
	d := &redirectDialer{to: srv.Listener.Addr().String()}
	a := New(Config{DataDir: t.TempDir(), ServerPassword: testPassword, HTTPClient: d.client()})
	for _, base := range []string{"http://192.0.2.1:4096", "http://evil.example:4096", "http://localhost:4096", "http://[2001:db8::1]:4096", "http://[::ffff:192.0.2.1]:4096"} {
		err := a.get(context.Background(), base, "/global/health", "", nil)
		if err == nil {
			t.Errorf("GET %s: no error", base)
		}
	}
	untrusted(t, a, d, srv)
	if err := a.get(context.Background(), "http://127.0.0.1:"+strconv.Itoa(srv.Port()), "/global/health", "", nil); err != nil {
		t.Errorf("loopback: %v", err)
	}
}
