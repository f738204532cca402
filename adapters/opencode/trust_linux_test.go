//go:build linux

package opencode

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/session"
)

func loopback(port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port))
}

// A server process of this user whose port is held by another user's
// listener is never dialled: the argv says where opencode meant to listen,
// the listening socket says who answers there. `opencode run --port N`
// opens no port at all, so N may be anyone's.
func TestServerListenerOfAnotherUIDIsNeverDialled(t *testing.T) {
	other := os.Getuid() + 1
	for _, tc := range []struct {
		name  string
		setup func(f *fixture, port int) error
		argv  []string
	}{
		{"argv port, open files unreadable", func(f *fixture, port int) error {
			return f.tree.ListenOn(0, loopback(port), other, 6000)
		}, []string{"opencode", "serve"}},
		{"argv port, the process listens nowhere", func(f *fixture, port int) error {
			if err := f.tree.OpenFiles(600, "/dev/null"); err != nil {
				return err
			}
			return f.tree.ListenOn(0, loopback(port), other, 6000)
		}, []string{"opencode", "run", "go"}},
		{"its own wildcard socket, and another user's on 127.0.0.1", func(f *fixture, port int) error {
			if err := f.tree.ListenOn(600, netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), os.Getuid(), 6000); err != nil {
				return err
			}
			return f.tree.ListenOn(0, loopback(port), other, 6001)
		}, []string{"opencode", "serve"}},
		{"a socket it holds that another user opened", func(f *fixture, port int) error {
			return f.tree.ListenOn(600, loopback(port), other, 6000)
		}, []string{"opencode", "web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			srv := opencodetest.NewFakeServer()
			defer srv.Close()
			srv.Password = testPassword
			sid := busyOnServer(f, srv)
			if err := tc.setup(f, srv.Port()); err != nil {
				t.Fatal(err)
			}
			p := opencodetest.Proc(600, 1600, "/srv", append(tc.argv, "--port", strconv.Itoa(srv.Port()))...)
			d := &redirectDialer{to: srv.Listener.Addr().String()}
			a := f.adapter(func(c *Config) { c.ServerPassword, c.HTTPClient = testPassword, d.client() })
			o := find(t, mustDiscover(t, a, opencodetest.Snapshot(p)), sid)
			untrusted(t, a, d, srv)
			if len(o.Owners) != 0 {
				t.Errorf("owners %+v", o.Owners)
			}
		})
	}
}

// The process's own listening sockets: one on a wildcard is dialled on
// loopback; one on a non-loopback address is never dialled; one listed
// only in the process's own network namespace (a container's loopback is
// not this one) is never dialled.
func TestServerListeningSockets(t *testing.T) {
	for _, tc := range []struct {
		name   string
		listen func(tree opencodetest.ProcTree, port int) error
		want   string // dialled host, "" for none
	}{
		{"non-loopback address", func(tree opencodetest.ProcTree, port int) error {
			return tree.ListenOn(700, netip.AddrPortFrom(netip.MustParseAddr("192.0.2.10"), uint16(port)), os.Getuid(), 7000)
		}, ""},
		{"another network namespace", func(tree opencodetest.ProcTree, port int) error {
			return tree.ListenInOwnNamespace(700, loopback(port), os.Getuid(), 7000)
		}, ""},
		{"0.0.0.0", func(tree opencodetest.ProcTree, port int) error {
			return tree.ListenOn(700, netip.AddrPortFrom(netip.IPv4Unspecified(), uint16(port)), os.Getuid(), 7000)
		}, "127.0.0.1"},
		{"::", func(tree opencodetest.ProcTree, port int) error {
			return tree.ListenOn(700, netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(port)), os.Getuid(), 7000)
		}, "::1"},
		{"::1", func(tree opencodetest.ProcTree, port int) error {
			return tree.ListenOn(700, netip.AddrPortFrom(netip.IPv6Loopback(), uint16(port)), os.Getuid(), 7000)
		}, "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			srv := opencodetest.NewFakeServer()
			defer srv.Close()
			srv.Password = testPassword
			busyOnServer(f, srv)
			if err := tc.listen(f.tree, srv.Port()); err != nil {
				t.Fatal(err)
			}
			p := f.proc(700, time.Hour, false, "/srv", "opencode", "web")
			d := &redirectDialer{to: srv.Listener.Addr().String()}
			a := f.adapter(func(c *Config) { c.ServerPassword, c.HTTPClient = testPassword, d.client() })
			mustDiscover(t, a, opencodetest.Snapshot(p))
			if tc.want == "" {
				untrusted(t, a, d, srv)
				return
			}
			want := net.JoinHostPort(tc.want, strconv.Itoa(srv.Port()))
			if got := d.addrs(); len(got) == 0 || got[0] != want {
				t.Fatalf("dialled %v, want %s", got, want)
			}
		})
	}
}

// A server found in a Discover pass is checked again before a repair, an
// abort or an existence check sends it anything: when its port is now
// another user's (the server exited and someone else listens there), that
// listener gets no request and no password, and nothing is written
// through it.
func TestRepairRefusesServerNowOfAnotherUID(t *testing.T) {
	f := newRepairFixture(t)
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	srv.Password = testPassword
	sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
	if err := srv.LoadFromDB(f.dbPath, sh.SessionID); err != nil {
		t.Fatal(err)
	}
	srv.SetStatus("/w/a", sh.SessionID, opencodetest.Status{Type: "busy"})
	if err := f.tree.Listen(400, srv.Port(), 4000); err != nil {
		t.Fatal(err)
	}
	a := f.adapter(func(c *Config) { c.ServerPassword = testPassword })
	mustDiscover(t, a, opencodetest.Snapshot(f.proc(400, time.Hour, false, "/srv", "opencode", "serve", "--port", strconv.Itoa(srv.Port()))))
	if len(a.lastServers()) != 1 {
		t.Fatalf("the server was not found: %+v", a.lastServers())
	}

	// It exits; another user's process listens on its port.
	if err := f.tree.ClearListeners(); err != nil {
		t.Fatal(err)
	}
	if err := f.tree.ListenOn(0, loopback(srv.Port()), os.Getuid()+1, 4001); err != nil {
		t.Fatal(err)
	}
	asked, creds := len(srv.RequestLog()), srv.CredentialsSeen()
	ctx := context.Background()
	tg := f.target(sh.SessionID, "/w/a")
	for _, op := range []struct {
		name string
		do   func(context.Context, adapters.RepairTarget) ([]session.Step, error)
	}{{"plan", a.PlanRepair}, {"abort", a.Abort}, {"apply", a.ApplyRepair}} {
		steps, err := op.do(ctx, tg)
		t.Logf("%s: %+v %v", op.name, steps, err)
	}
	// The existence check asks servers only when no database can answer.
	for _, suf := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(f.dbPath+suf, f.dbPath+suf+".gone"); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(f.dbPath, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := a.exists(ctx, sh.SessionID); got != adapters.ExistenceUnknown {
		t.Errorf("exists: %v, %v; want unknown (no database answers, no trusted server)", got, err)
	}
	if got := srv.RequestLog(); len(got) != asked {
		t.Errorf("another user's listener was asked %v", got[asked:])
	}
	if n := srv.CredentialsSeen(); n != creds {
		t.Errorf("another user's listener received the password %d times", n-creds)
	}
	if n := srv.Aborted[sh.SessionID]; n != 0 || srv.PartState(sh.SessionID, sh.ToolPartID) != "running" {
		t.Errorf("written through another user's listener: aborted %d, part %s", n, srv.PartState(sh.SessionID, sh.ToolPartID))
	}
}

// The server is checked again right before a repair writes through it, and
// again after an abort's wait: when another user has taken its port by
// then, nothing (more) is written and the password is not sent again.
func TestRepairRechecksServerBeforeWriting(t *testing.T) {
	for _, tc := range []struct {
		name string
		// swapAt: the request after which the port is another user's.
		swapAt func(sh opencodetest.Shape) (method, path string)
		// allowed: the writes made while the server was still trusted.
		allowed []string
	}{
		{"before the first write", func(sh opencodetest.Shape) (string, string) {
			return "GET", "/session/" + sh.SessionID + "/message/" + sh.AssistantMessageID
		}, nil},
		{"after the abort", func(sh opencodetest.Shape) (string, string) {
			return "POST", "/session/" + sh.SessionID + "/abort"
		}, []string{"POST /session/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRepairFixture(t)
			srv := opencodetest.NewFakeServer()
			defer srv.Close()
			srv.Password = testPassword
			sh, _ := f.db.InterruptedMidTool("/w/a", f.now.Add(-2*time.Minute))
			if err := srv.LoadFromDB(f.dbPath, sh.SessionID); err != nil {
				t.Fatal(err)
			}
			srv.SetStatus("/w/a", sh.SessionID, opencodetest.Status{Type: "busy"})
			srv.StuckUntilPatched[sh.SessionID] = true
			a := f.adapter(func(c *Config) { c.ServerPassword = testPassword })
			mustDiscover(t, a, opencodetest.Snapshot(f.server(400, time.Hour, false, "/srv", srv.Port())))
			if len(a.lastServers()) != 1 {
				t.Fatalf("the server was not found: %+v", a.lastServers())
			}
			wantMethod, wantPath := tc.swapAt(sh)
			swapped := make(chan struct{})
			srv.Lock()
			srv.OnRequest = func(method, path string) {
				if method != wantMethod || path != wantPath {
					return
				}
				select {
				case <-swapped:
					return
				default:
				}
				if err := f.tree.ClearListeners(); err != nil {
					t.Error(err)
				}
				if err := f.tree.ListenOn(0, loopback(srv.Port()), os.Getuid()+1, 4001); err != nil {
					t.Error(err)
				}
				close(swapped)
			}
			srv.Unlock()

			steps, err := a.Abort(context.Background(), f.target(sh.SessionID, "/w/a"))
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-swapped:
			default:
				t.Fatalf("the conversation never reached %s %s: %+v", wantMethod, wantPath, steps)
			}
			var writes []string
			for _, r := range srv.RequestLog() {
				if !strings.HasPrefix(r, "GET ") {
					writes = append(writes, r)
				}
			}
			if len(writes) != len(tc.allowed) {
				t.Fatalf("writes %v, want only %v", writes, tc.allowed)
			}
			for i, w := range tc.allowed {
				if !strings.HasPrefix(writes[i], w) {
					t.Fatalf("writes %v, want only %v", writes, tc.allowed)
				}
			}
			if srv.PartState(sh.SessionID, sh.ToolPartID) != "running" {
				t.Error("the part was patched through another user's listener")
			}
			last := steps[len(steps)-1]
			if last.Action != "check server" || last.Outcome != session.OutcomeFailed || !strings.Contains(last.Error, "uid") {
				t.Errorf("last step %+v, want the failed server check", last)
			}
		})
	}
}
