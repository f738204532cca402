package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/sshtest"
	"github.com/sessiond/sessiond/session"
)

// hostsWorld is two sessiond daemons on two sockets, standing for two
// machines, and a real sshd on localhost through which the client
// reaches both, as it would reach two machines.
type hostsWorld struct {
	srv    *sshtest.Server
	a, b   *env
	bd     *daemontest.Daemon // b's sessiond
	client *env               // where sessionctl runs: its own HOME, no daemon
	owners []*exec.Cmd
}

func newHostsWorld(t *testing.T) *hostsWorld {
	srv := sshtest.Start(t)
	w := &hostsWorld{srv: srv, a: newEnv(t), b: newEnv(t), client: newEnv(t)}
	at := time.Now().Add(-time.Hour)
	stopped := func(id, up, cwd string) *session.Record {
		return &session.Record{ID: id, Agent: "claude", UpstreamID: up, Status: session.StatusStopped, Cwd: cwd, CreatedAt: at}
	}
	// On a: three live sessions (their owners killed later make events)
	// and a stopped one; on b: two stopped ones. Both have one session
	// whose id is the same (dup…): ambiguous across hosts.
	var recs []*session.Record
	for i := range 3 {
		owner, id := daemontest.StartOwner(t)
		w.owners = append(w.owners, owner)
		recs = append(recs, &session.Record{ID: fmt.Sprintf("a1ve0000000%d", i), Agent: "claude",
			UpstreamID: fmt.Sprintf("1111111%d-2222-4333-8444-555555555555", i), Status: session.StatusRunning,
			Activity: session.ActivityIdle, Owner: &id, Cwd: filepath.Join(w.a.Home, "live"), CreatedAt: at})
	}
	recs = append(recs, stopped("a5t0a0000001", "aaaaaaaa-2222-4333-8444-555555555555", "/src/on-a"),
		stopped("d0bb1e000001", "dddddddd-2222-4333-8444-55555555555a", "/src/dup-a"))
	w.a.Seed(recs...)
	w.b.Seed(stopped("b5t0b0000001", "bbbbbbbb-2222-4333-8444-555555555555", "/src/on-b"),
		stopped("b5t0b0000002", "bbbbbbbc-2222-4333-8444-555555555555", "/src/on-b2"),
		stopped("d0bb1e000001", "dddddddd-2222-4333-8444-55555555555b", "/src/dup-b"))
	w.a.StartDaemon()
	w.bd = w.b.StartDaemon()
	// The client's ssh reaches the test's sshd with the test's key; the
	// far sessionctl is the one just built (not on sshd's PATH).
	w.client.Extra = append(w.client.Extra,
		api.EnvSSHCommand+"="+srv.Command,
		api.EnvRemoteSessionctl+"="+w.a.Sessionctl)
	return w
}

func (w *hostsWorld) hostA() string { return w.srv.URL(w.a.Socket) }
func (w *hostsWorld) hostB() string { return w.srv.URL(w.b.Socket) }

// TestHostsOverSSH: sessionctl --host ssh:// through a real sshd, to two
// daemons standing for two machines: a merged listing, show, an id on
// both hosts (ambiguous), a host that fails beside one that answers, a
// wrong socket path on the far side, and an action on the one host that
// has the session.
func TestHostsOverSSH(t *testing.T) {
	w := newHostsWorld(t)
	c := w.client
	hosts := []string{"--host", w.hostA(), "--host", w.hostB()}

	// One host over ssh: the daemon's own shape, each with its host.
	var oneList api.SessionList
	c.CtlJSON(&oneList, "--host", w.hostB(), "ls", "--all")
	if one := oneList.Sessions; len(one) != 3 || one[0].Host != w.hostB() {
		t.Fatalf("ls over ssh to b: %d sessions, %+v", len(one), one)
	}

	// Both: merged, each with its host, in the order the hosts were
	// named.
	var allList api.SessionList
	c.CtlJSON(&allList, append(hosts, "ls", "--all")...)
	all := allList.Sessions
	on := map[string][]string{}
	for _, s := range all {
		on[s.Host] = append(on[s.Host], s.ID)
	}
	if len(all) != 8 || len(on[w.hostA()]) != 5 || len(on[w.hostB()]) != 3 || all[0].Host != w.hostA() || all[7].Host != w.hostB() {
		t.Fatalf("ls over both hosts: %v", on)
	}
	out, errs, code := c.Ctl(append(hosts, "ls", "--all")...)
	if code != 0 || !strings.HasPrefix(out, "HOST ") || !strings.Contains(out, "localhost:") || !strings.Contains(out, "b5t0b0000002") || !strings.Contains(out, "a1ve00000002") {
		t.Fatalf("ls table over both (exit %d, %s):\n%s", code, errs, out)
	}
	t.Logf("ls over two hosts:\n%s", out)

	// The same from SESSIOND_HOST, comma-separated.
	c.Extra = append(c.Extra, "SESSIOND_HOST="+w.hostA()+","+w.hostB())
	var fromEnv api.SessionList
	c.CtlJSON(&fromEnv, "ls", "--all")
	c.Extra = c.Extra[:len(c.Extra)-1]
	if len(fromEnv.Sessions) != 8 {
		t.Errorf("ls with SESSIOND_HOST: %d sessions, want 8", len(fromEnv.Sessions))
	}

	// show finds the host that has the session; an id both have is
	// ambiguous (exit 4) and names both.
	var s api.Session
	c.CtlJSON(&s, append(hosts, "show", "b5t0b0000002")...)
	if s.Host != w.hostB() || s.Cwd != "/src/on-b2" {
		t.Errorf("show b5t0b0000002 over both: %+v", s)
	}
	out, errs, code = c.Ctl(append(hosts, "show", "d0bb1e000001")...)
	if code != 4 || !strings.Contains(errs, "2 hosts") || !strings.Contains(errs, w.hostA()) || !strings.Contains(errs, w.hostB()) {
		t.Errorf("show of an id on both hosts: exit %d, want 4 naming both: %s %s", code, out, errs)
	}
	// A prefix ambiguous on one host is ambiguous, whatever the other
	// holds.
	if _, errs, code := c.Ctl(append(hosts, "stop", "a1ve")...); code != 4 || !strings.Contains(errs, w.hostA()) {
		t.Errorf("stop of a prefix ambiguous on a: exit %d, want 4 naming a: %s", code, errs)
	}
	// An action acts on exactly one host: the id on both is refused.
	if _, errs, code := c.Ctl(append(hosts, "repair", "d0bb1e000001")...); code != 4 {
		t.Errorf("repair of an id on both hosts: exit %d, want 4: %s", code, errs)
	}
	out, errs, code = c.Ctl(append(hosts, "repair", "a5t0a0000001")...)
	if code != 0 || !strings.Contains(out, "a5t0a0000001") {
		t.Errorf("repair (a plan) on the one host that has it: exit %d: %s %s", code, out, errs)
	}
	if _, errs, code := c.Ctl(append(hosts, "launch", "--agent", "claude")...); code != 2 || !strings.Contains(errs, "one --host") {
		t.Errorf("launch with two hosts: exit %d, want 2 asking for one host: %s", code, errs)
	}

	// A wrong socket on the far side: the path is named; exit 3.
	wrong := w.srv.URL("/tmp/no-such-dir/s.sock")
	out, errs, code = c.Ctl("--host", wrong, "ls")
	if code != 3 || !strings.Contains(errs, "/tmp/no-such-dir/s.sock") {
		t.Errorf("a wrong socket on the far side: exit %d, want 3 naming the path: %s %s", code, out, errs)
	}
	t.Logf("wrong socket: %s", strings.TrimSpace(errs))
	// With a host that answers, the failing one is named and the others
	// are listed; exit 0.
	var some api.SessionList
	out, errs, code = c.Ctl("--json", "--host", wrong, "--host", w.hostB(), "ls", "--all")
	if err := json.Unmarshal([]byte(out), &some); code != 0 || err != nil || len(some.Sessions) != 3 || !strings.Contains(errs, wrong) {
		t.Errorf("one host failing beside one answering: exit %d, %d sessions, stderr %q", code, len(some.Sessions), errs)
	}
	// sessionctl not on the far side: said as such.
	c.Extra = append(c.Extra, api.EnvRemoteSessionctl+"=/nonexistent/sessionctl")
	_, errs, code = c.Ctl("--host", w.hostA(), "ls")
	c.Extra = c.Extra[:len(c.Extra)-1]
	if code != 3 || !strings.Contains(errs, "sessionctl not found on the host") {
		t.Errorf("no sessionctl on the far side: exit %d: %s", code, errs)
	}
	t.Logf("no sessionctl: %s", strings.TrimSpace(errs))

	// wait across both hosts: each session on its host, each printed
	// once with its host.
	out, errs, code = c.Ctl(append(hosts, "--json", "wait", "a5t0a0000001", "b5t0b0000001", "--until", "stopped", "--timeout", "20s")...)
	var met []api.Session
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var s api.Session
		if json.Unmarshal([]byte(l), &s) == nil {
			met = append(met, s)
		}
	}
	if code != 0 || len(met) != 2 || met[0].Host == met[1].Host {
		t.Errorf("wait across both hosts: exit %d, %d sessions met: %s %s", code, len(met), out, errs)
	}

	// health over both: one block per host.
	var hs []api.Health
	c.CtlJSON(&hs, append(hosts, "health")...)
	if len(hs) != 2 || hs[0].Host != w.hostA() || hs[1].Host != w.hostB() || hs[0].PID == hs[1].PID {
		t.Errorf("health over both: %+v", hs)
	}
}

// TestHostsEventsFollowOverSSH: events --follow through ssh delivers a
// remote host's events in order as they happen; killing the remote sshd
// mid-stream ends sessionctl with an error that names the host, not a
// hang.
func TestHostsEventsFollowOverSSH(t *testing.T) {
	w := newHostsWorld(t)
	c := w.client
	h, err := api.NewClient(w.a.Socket).Health(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.Sessionctl, "--json", "--host", w.hostA(), "--host", w.hostB(), "events", "--follow", "--since", fmt.Sprint(h.LastEventSeq))
	cmd.Env = c.Environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr daemontest.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(stdout)
		var obj strings.Builder
		for sc.Scan() {
			// --json prints each event indented: an object ends at a
			// line that is "}".
			obj.WriteString(sc.Text())
			if sc.Text() == "}" {
				lines <- obj.String()
				obj.Reset()
			}
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	defer cmd.Process.Kill()

	// Wait until both streams are open on the far sides (a subscriber
	// each), then kill the three owners on a, one at a time.
	deadline := time.Now().Add(15 * time.Second)
	for subscribers(w.a.Socket) < 1 || subscribers(w.b.Socket) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the event streams did not open through ssh: %s", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	start := time.Now()
	for _, o := range w.owners {
		o.Process.Kill()
		o.Wait()
		time.Sleep(150 * time.Millisecond)
	}
	type hostEvent struct {
		Host string `json:"host"`
		api.Event
	}
	var got []hostEvent
	timeout := time.After(15 * time.Second)
	for len(got) < 3 {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the stream ended after %d events: %s", len(got), stderr.String())
			}
			var ev hostEvent
			if err := json.Unmarshal([]byte(l), &ev); err != nil {
				t.Fatalf("event %q: %v", l, err)
			}
			if ev.Type == session.EventStatus && (ev.To == session.StatusStopped || ev.To == session.StatusInterrupted) {
				got = append(got, ev)
			}
		case <-timeout:
			t.Fatalf("%d of 3 status events in 15s: %s", len(got), stderr.String())
		}
	}
	t.Logf("3 deaths on host a arrived through ssh %s after the first kill", time.Since(start).Round(time.Millisecond))
	for i, ev := range got {
		if ev.Host != w.hostA() || ev.SessionID != fmt.Sprintf("a1ve0000000%d", i) || i > 0 && ev.Seq <= got[i-1].Seq {
			t.Errorf("event %d: %s seq %d on %s; want a1ve0000000%d on %s, in order", i, ev.SessionID, ev.Seq, ev.Host, i, w.hostA())
		}
	}

	// b's sessiond crashes: its stream ends at once, named on stderr
	// (the far dial-stdio closes when sessiond does), and a's goes on.
	w.bd.Kill()
	deadline = time.Now().Add(10 * time.Second)
	for !strings.Contains(stderr.String(), w.hostB()) {
		if time.Now().After(deadline) {
			t.Fatalf("b's sessiond killed: its stream's end not reported in 10s: %q", stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("after b's sessiond was killed: %s", strings.TrimSpace(stderr.String()))
	select {
	case err := <-exited:
		t.Fatalf("sessionctl events ended when one of two hosts failed: %v", err)
	default:
	}

	// The remote sshd dies mid-stream: sessionctl ends with an error that
	// says which host, and does not hang.
	killed := time.Now()
	w.srv.Stop()
	select {
	case err := <-exited:
		errs := stderr.String()
		t.Logf("after sshd was killed (%s): %v: %s", time.Since(killed).Round(time.Millisecond), err, strings.TrimSpace(errs))
		if err == nil || !strings.Contains(errs, "localhost:") {
			t.Errorf("sessionctl events ended with %v, stderr %q; want an error naming the host", err, errs)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("sessionctl events still runs 20s after sshd was killed: %s", stderr.String())
	}
}

// TestHostsSocketUnderFarHome: ssh://host/~/path names a socket under
// the far user's home, expanded on the far side with the far HOME (here
// a's directory, set by sshd; this side's HOME is another): a's socket is
// reached as ~/run/s.sock, and a wrong one is named by its far path.
func TestHostsSocketUnderFarHome(t *testing.T) {
	a := newEnv(t)
	a.Seed(&session.Record{ID: "f4a40e000001", Agent: "claude", UpstreamID: "f4a40e00-2222-4333-8444-555555555555",
		Status: session.StatusStopped, Cwd: "/src/far", CreatedAt: time.Now().Add(-time.Hour)})
	a.StartDaemon()
	if rel, err := filepath.Rel(a.Dir, a.Socket); err != nil || rel != "run/s.sock" {
		t.Fatalf("a's socket %s is not run/s.sock under %s", a.Socket, a.Dir)
	}
	srv := sshtest.Start(t, "HOME="+a.Dir)
	c := newEnv(t)
	c.Extra = append(c.Extra, api.EnvSSHCommand+"="+srv.Command, api.EnvRemoteSessionctl+"="+a.Sessionctl)

	host := srv.URL("/~/run/s.sock")
	var list api.SessionList
	c.CtlJSON(&list, "--host", host, "ls", "--all")
	if len(list.Sessions) != 1 || list.Sessions[0].ID != "f4a40e000001" || list.Sessions[0].Host != host {
		t.Fatalf("ls over %s: %+v", host, list.Sessions)
	}
	wrong := srv.URL("/~/no-such/s.sock")
	out, errs, code := c.Ctl("--host", wrong, "ls")
	if code != 3 || !strings.Contains(errs, filepath.Join(a.Dir, "no-such", "s.sock")) {
		t.Fatalf("a wrong socket under the far home: exit %d, want 3 naming %s: %s %s", code, filepath.Join(a.Dir, "no-such", "s.sock"), out, errs)
	}
	t.Logf("wrong socket under the far home: %s", strings.TrimSpace(errs))
}

// subscribers is the daemon's sessiond_event_subscribers gauge, -1 if it
// cannot be read.
func subscribers(socket string) int {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	resp, err := c.Get("http://sessiond/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "sessiond_event_subscribers "); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return int(n)
			}
		}
	}
	return -1
}

// TestHostsTopOverSSH: a real `sessionctl top` in a tmux pane over two
// hosts reached through ssh shows both hosts' sessions in one view, each
// row with its host, and a death on one host arrives by that host's
// stream.
func TestHostsTopOverSSH(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (.ci/run installs it): top not tested")
	}
	w := newHostsWorld(t)
	c := w.client
	tmux := startTop(t, c, 220, 20, fmt.Sprintf("%s --host %s --host %s top", c.Sessionctl, w.hostA(), w.hostB()))
	screen := func() string {
		out, _ := tmux("capture-pane", "-p", "-t", "top")
		return out
	}
	await := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			s := screen()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 15s; last seen:\n%s", what, s)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	labelA := strings.TrimPrefix(w.hostA(), "ssh://")
	first := await("both hosts' sessions", func(s string) bool {
		return strings.Contains(s, "HOST") && strings.Contains(s, "a1ve00000002") && strings.Contains(s, "b5t0b0000002") &&
			strings.Count(s, "d0bb1e000001") == 2
	})
	t.Logf("top over two hosts:\n%s", first)
	for _, l := range strings.Split(first, "\n") {
		if strings.Contains(l, "a1ve00000000") && !strings.HasPrefix(l, labelA) {
			t.Errorf("a's session row does not start with its host %s: %q", labelA, l)
		}
	}
	w.owners[0].Process.Kill()
	w.owners[0].Wait()
	await("the death on host a", func(s string) bool {
		for _, l := range strings.Split(s, "\n") {
			if strings.Contains(l, "a1ve00000000") && (strings.Contains(l, "stopped") || strings.Contains(l, "interrupted")) {
				return true
			}
		}
		return false
	})
	tmux("send-keys", "-t", "top", "q")
}
