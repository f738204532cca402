package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/api"
)

// EnvHost lists the hosts of every command, comma-separated, when no
// --host is given.
const EnvHost = "SESSIOND_HOST"

// resolveHosts reads --host (or SESSIOND_HOST) into a.hosts. No host
// means the local socket (--socket), as before hosts existed.
func (a *app) resolveHosts() error {
	var hosts []api.Host
	for _, s := range a.hostFlags {
		h, err := api.ParseHost(s)
		if err != nil {
			return usageError{err}
		}
		hosts = append(hosts, h)
	}
	if len(a.hostFlags) == 0 {
		var err error
		if hosts, err = api.ParseHosts(os.Getenv(EnvHost)); err != nil {
			return usageError{fmt.Errorf("%s: %w", EnvHost, err)}
		}
	}
	a.hosts = nil
	seen := map[string]bool{}
	for _, h := range hosts {
		if !seen[h.Name] {
			seen[h.Name] = true
			a.hosts = append(a.hosts, h)
		}
	}
	return nil
}

// hostClient is one host's client, with the name its rows carry.
type hostClient struct {
	name string
	c    *api.Client
}

// hostClients are the clients of every host named or, when none is, of
// the local socket: a list of one host without a name. Every read is
// asked of this list, one host or many. Made once, so the command's
// requests to a host share its connections (one ssh login each).
func (a *app) hostClients() []hostClient {
	if a.hcs != nil {
		return a.hcs
	}
	hosts := a.hosts
	if len(hosts) == 0 {
		hosts = []api.Host{{Socket: a.socket}}
	}
	a.hcs = make([]hostClient, len(hosts))
	for i, h := range hosts {
		a.hcs[i] = hostClient{h.Name, api.NewHostClient(h)}
	}
	return a.hcs
}

// hostsNamed reports whether the hosts asked have names: the user named
// them, and what is printed says which host each row is on (a HOST
// column, a list per host). The local socket alone has none.
func (a *app) hostsNamed() bool { return a.hostClients()[0].name != "" }

// oneHost is the client of a command that acts on exactly one host, when
// the user named at most one.
func (a *app) oneHost(cmd *cobra.Command) (*api.Client, error) {
	if hcs := a.hostClients(); len(hcs) > 1 {
		return nil, usageError{fmt.Errorf("%s acts on one host: give one --host (got %d)", cmd.Name(), len(hcs))}
	}
	return a.client(), nil
}

// hostAnswer is one host's answer to a read.
type hostAnswer[T any] struct {
	host string
	val  T
	err  error
}

// askHosts asks every host at once and returns their answers in the
// order the hosts were named.
func askHosts[T any](ctx context.Context, hcs []hostClient, ask func(context.Context, *api.Client) (T, error)) []hostAnswer[T] {
	out := make([]hostAnswer[T], len(hcs))
	var wg sync.WaitGroup
	for i, hc := range hcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The connection stays for the command's next request to the
			// same host (an ssh login each, else); it ends with sessionctl.
			v, err := ask(ctx, hc.c)
			out[i] = hostAnswer[T]{host: hc.name, val: v, err: err}
		}()
	}
	wg.Wait()
	return out
}

// reportFailures names each host that failed on stderr and returns an
// error only when every host failed (the first one's, so its exit code
// holds: 3 when none was reachable).
func reportFailures[T any](a *app, answers []hostAnswer[T]) error {
	var first error
	failed := 0
	for _, ans := range answers {
		if ans.err == nil {
			continue
		}
		failed++
		if first == nil {
			first = ans.err
		}
		if len(answers) > 1 {
			fmt.Fprintf(a.stderr, "sessionctl: %s\n", hostErr(ans.host, ans.err))
		}
	}
	if failed == len(answers) && first != nil {
		if len(answers) > 1 {
			return allFailedError{first}
		}
		return hostError{answers[0].host, first}
	}
	return nil
}

// hostError is a host's error with the host named (unless its message
// names it already); its exit code is the error's own.
type hostError struct {
	host string
	err  error
}

func (e hostError) Error() string { return hostErr(e.host, e.err) }
func (e hostError) Unwrap() error { return e.err }

// hostErr prefixes err with its host unless it already names it.
func hostErr(host string, err error) string {
	msg := err.Error()
	if host == "" || strings.Contains(msg, host) {
		return msg
	}
	return "host " + host + ": " + msg
}

// allFailedError is every host failing: each was named on stderr already.
type allFailedError struct{ first error }

func (e allFailedError) Error() string { return "no host answered" }
func (e allFailedError) Unwrap() error { return e.first }

// clientForID finds the one host that has the session ref names. With
// several hosts, a session found on more than one is ambiguous (exit 4),
// like an id prefix that matches two sessions.
func (a *app) clientForID(ctx context.Context, ref string) (*api.Client, error) {
	c, _, err := a.sessionOnHosts(ctx, ref)
	return c, err
}

// sessionOnHosts is clientForID with the session as that host answered,
// when it had to ask (several hosts); with one host, the session can only
// be there: the session is nil and the caller asks its host.
func (a *app) sessionOnHosts(ctx context.Context, ref string) (*api.Client, *api.Session, error) {
	hcs := a.hostClients()
	if len(hcs) == 1 {
		return hcs[0].c, nil, nil
	}
	answers := askHosts(ctx, hcs, func(ctx context.Context, c *api.Client) (*api.Session, error) { return c.Session(ctx, ref) })
	var found []int
	var firstErr error
	for i, ans := range answers {
		var se *api.StatusError
		switch {
		case ans.err == nil:
			found = append(found, i)
		case errors.As(ans.err, &se) && se.Body.Code == api.CodeAmbiguous:
			// A prefix that names several sessions on one host is
			// ambiguous whatever the other hosts hold.
			return nil, nil, hostError{ans.host, ans.err}
		case api.IsNotFound(ans.err):
		default:
			fmt.Fprintf(a.stderr, "sessionctl: %s\n", hostErr(ans.host, ans.err))
			if firstErr == nil {
				firstErr = ans.err
			}
		}
	}
	switch {
	case len(found) == 1:
		return hcs[found[0]].c, answers[found[0]].val, nil
	case len(found) > 1:
		var where []string
		for _, i := range found {
			where = append(where, answers[i].host+" ("+answers[i].val.ID+")")
		}
		return nil, nil, &api.StatusError{StatusCode: 409, Body: api.Error{Code: api.CodeAmbiguous,
			Error:      fmt.Sprintf("%q names a session on %d hosts: give one --host", ref, len(found)),
			Candidates: where}}
	case firstErr != nil:
		return nil, nil, fmt.Errorf("session %q is on none of the hosts that answered: %w", ref, firstErr)
	}
	return nil, nil, &api.StatusError{StatusCode: 404, Body: api.Error{Code: api.CodeNotFound,
		Error: fmt.Sprintf("no session %q on any of the %d hosts", ref, len(hcs))}}
}

func newDialStdio(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "dial-stdio",
		Short: "Connect stdin and stdout to sessiond's socket (the far end of --host ssh://)",
		Long: `dial-stdio copies bytes between its stdin and stdout and sessiond's socket
until either side closes. sessionctl --host ssh://host runs it on the far
side through ssh, as docker does with DOCKER_HOST=ssh://.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var d net.Dialer
			conn, err := d.DialContext(cmd.Context(), "unix", a.socket)
			if err != nil {
				var oe *net.OpError
				if errors.As(err, &oe) {
					err = oe.Err
				}
				return &api.UnreachableError{Socket: a.socket, Err: err}
			}
			defer conn.Close()
			uc := conn.(*net.UnixConn)
			go func() {
				// The client is done sending: sessiond sees the end of
				// its requests, and its answers still come back.
				io.Copy(uc, a.stdin)
				uc.CloseWrite()
			}()
			// sessiond's side decides the end: once it closes (an idle
			// connection, a restart, a crash), stdout is closed and
			// dial-stdio exits, so the far client sees the end at once,
			// whatever its stdin does.
			answered := make(chan error, 1)
			go func() {
				_, err := io.Copy(a.stdout, uc)
				if c, ok := a.stdout.(io.Closer); ok {
					c.Close()
				}
				answered <- err
			}()
			select {
			case err = <-answered:
			case <-cmd.Context().Done():
				return nil
			}
			if err != nil && !errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("dial-stdio %s: %w", a.socket, err)
			}
			return nil
		},
	}
}

// hostLabel is a host as the HOST column shows it: an ssh host without
// its scheme, the local socket as "local".
func hostLabel(name string) string {
	switch {
	case name == "":
		return "local"
	case strings.HasPrefix(name, "ssh://"):
		return strings.TrimPrefix(name, "ssh://")
	}
	return name
}

// listSessions lists the sessions of every host, asked at once, merged
// in the order the hosts were named; each row says its host. A host that
// fails is named on stderr and the others are still listed. The local
// socket alone has no host to add: with --json its bytes are printed as
// they came (indented for a terminal only), a list of thousands not
// decoded.
func listSessions(ctx context.Context, a *app, opts api.ListOptions) error {
	if a.json && !a.hostsNamed() {
		answers := askHosts(ctx, a.hostClients(), func(ctx context.Context, c *api.Client) ([]byte, error) {
			return c.SessionsJSON(ctx, opts)
		})
		if err := reportFailures(a, answers); err != nil {
			return err
		}
		return a.printRawJSON(answers[0].val)
	}
	all, err := sessionsOfHosts(ctx, a, opts)
	if err != nil {
		return err
	}
	if a.json {
		// The daemon's own shape, each session with its host.
		return a.printJSON(api.SessionList{Sessions: all})
	}
	printTable(a, all, time.Now())
	return nil
}

// showHealth shows each host's health, one after the other: with --json
// a list of them when hosts were named, else the local one's object.
func showHealth(ctx context.Context, a *app) error {
	answers := askHosts(ctx, a.hostClients(), func(ctx context.Context, c *api.Client) (*api.Health, error) {
		return c.Health(ctx)
	})
	all := []*api.Health{}
	for _, ans := range answers {
		if ans.err == nil {
			ans.val.Host = ans.host
			all = append(all, ans.val)
		}
	}
	if err := reportFailures(a, answers); err != nil {
		return err
	}
	if a.json {
		if !a.hostsNamed() {
			return a.printJSON(all[0])
		}
		return a.printJSON(all)
	}
	for i, h := range all {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		if err := printHealth(a, h); err != nil {
			return err
		}
	}
	return nil
}

// followEvents prints the events of every host as they come, each host's
// in its own order, each line with its host (when it has a name). A host
// whose stream fails is named on stderr when it fails, when there are
// others; they go on.
func followEvents(ctx context.Context, a *app, opts api.EventsOptions) error {
	hcs := a.hostClients()
	var mu sync.Mutex // one event printed at a time
	answers := askHosts(ctx, hcs, func(ctx context.Context, c *api.Client) (struct{}, error) {
		err := c.Events(ctx, opts, func(ev api.Event) error {
			mu.Lock()
			defer mu.Unlock()
			return printEvent(a, c.Host, ev)
		})
		if err != nil && ctx.Err() == nil && len(hcs) > 1 {
			mu.Lock()
			fmt.Fprintf(a.stderr, "sessionctl: %s\n", hostErr(c.Host, err))
			mu.Unlock()
		}
		return struct{}{}, err
	})
	if ctx.Err() != nil {
		return nil
	}
	failed := 0
	for _, ans := range answers {
		if ans.err != nil {
			failed++
		}
	}
	if failed == len(answers) {
		if len(answers) > 1 {
			return allFailedError{answers[0].err}
		}
		return hostError{answers[0].host, answers[0].err}
	}
	return nil
}

// sessionsOfHosts is every host's sessions, asked at once, in the order
// the hosts were named, each with its host; a host that fails is named on
// stderr (an error only when all did).
func sessionsOfHosts(ctx context.Context, a *app, opts api.ListOptions) ([]api.Session, error) {
	answers := askHosts(ctx, a.hostClients(), func(ctx context.Context, c *api.Client) ([]api.Session, error) {
		return c.Sessions(ctx, opts)
	})
	all := []api.Session{}
	for _, ans := range answers {
		for _, s := range ans.val {
			s.Host = ans.host
			all = append(all, s)
		}
	}
	return all, reportFailures(a, answers)
}
