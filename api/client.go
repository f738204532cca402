package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client talks to sessiond over its Unix socket. The zero value is not
// usable; call NewClient.
type Client struct {
	// Socket is the path of sessiond's socket (on the far side, for a
	// client over ssh; "" there means its default).
	Socket string
	// Host names the sessiond as --host did ("" for the default local
	// socket).
	Host string
	// Origin, when set, is sent with every request (OriginHeader): the
	// session on whose behalf a tool acts (sessionctl mcp), which
	// sessiond writes into the events of the actions it carries out.
	Origin string
	remote bool
	http   *http.Client
}

// OriginHeader names the session a request acts for (Client.Origin).
const OriginHeader = "Sessiond-Origin"

// NewClient returns a client for the daemon listening at socket.
func NewClient(socket string) *Client {
	c := newClient(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	})
	c.Socket = socket
	return c
}

func newClient(dial func(ctx context.Context) (net.Conn, error)) *Client {
	tr := &http.Transport{
		DialContext:         func(ctx context.Context, _, _ string) (net.Conn, error) { return dial(ctx) },
		MaxIdleConnsPerHost: 4,
	}
	return &Client{http: &http.Client{Transport: tr}}
}

// Remote reports whether the client reaches its sessiond through ssh.
func (c *Client) Remote() bool { return c.remote }

// UnreachableError means no sessiond answered on the socket. Its message
// says how to start one.
type UnreachableError struct {
	Socket string
	// Host is set for a host reached through ssh: Err (a *HostError)
	// says why then.
	Host string
	Err  error
}

func (e *UnreachableError) Error() string {
	if e.Host != "" {
		return fmt.Sprintf("sessiond is not reachable: %v", e.Err)
	}
	return fmt.Sprintf("sessiond is not reachable at %s (%v); start it with `sessiond` (or `systemctl --user start sessiond`), or point SESSIOND_SOCKET at its socket", e.Socket, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// StatusError is an error answer from the daemon.
type StatusError struct {
	StatusCode int
	Body       Error
}

func (e *StatusError) Error() string { return e.Body.Error }

// IsNotFound reports whether err is a not_found or ambiguous answer.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && (se.Body.Code == CodeNotFound || se.Body.Code == CodeAmbiguous)
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://sessiond"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Origin != "" {
		req.Header.Set(OriginHeader, c.Origin)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return c.wrapDial(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	if out == nil {
		return nil
	}
	if raw, ok := out.(*json.RawMessage); ok {
		// Bytes as sent, unchecked: the caller passes them on.
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("read answer of %s %s: %w", method, path, err)
		}
		*raw = bytes.TrimRight(b, "\n")
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of %s %s: %w", method, path, err)
	}
	return nil
}

func (c *Client) wrapDial(err error) error {
	var he *HostError
	if errors.As(err, &he) {
		return &UnreachableError{Socket: c.Socket, Host: c.Host, Err: he}
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return &UnreachableError{Socket: c.Socket, Err: oe.Err}
	}
	return err
}

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	se := &StatusError{StatusCode: resp.StatusCode}
	if err := json.Unmarshal(b, &se.Body); err != nil || se.Body.Error == "" {
		se.Body.Error = fmt.Sprintf("sessiond answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	return se
}

// Health returns the daemon's health.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	return &h, c.do(ctx, "GET", "/v1/health", nil, &h)
}

// Hook posts a hook's payload, as the agent gave it, for the agent.
func (c *Client) Hook(ctx context.Context, agent string, payload json.RawMessage) (*HookResult, error) {
	var res HookResult
	return &res, c.do(ctx, "POST", "/v1/hooks/"+url.PathEscape(agent), payload, &res)
}

// ListOptions filters GET /v1/sessions. By default every stopped session
// is left out, whatever its age, so the list shows what may need a look
// (interrupted sessions are listed: they may need a repair). Status, a
// comma-separated list, selects exactly those statuses, stopped included;
// All includes every session.
type ListOptions struct {
	Agent  string
	Status string
	All    bool
}

// Sessions lists sessions.
func (c *Client) Sessions(ctx context.Context, opts ListOptions) ([]Session, error) {
	var l SessionList
	if err := c.do(ctx, "GET", sessionsPath(opts), nil, &l); err != nil {
		return nil, err
	}
	return l.Sessions, nil
}

// SessionsJSON returns the list as the daemon sent it: a SessionList's
// compact JSON, not decoded. A tool that only prints or forwards the list
// (sessionctl ls --json) spares decoding thousands of sessions into
// structs and encoding them again.
func (c *Client) SessionsJSON(ctx context.Context, opts ListOptions) ([]byte, error) {
	var raw json.RawMessage
	if err := c.do(ctx, "GET", sessionsPath(opts), nil, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

func sessionsPath(opts ListOptions) string {
	q := url.Values{}
	if opts.Agent != "" {
		q.Set("agent", opts.Agent)
	}
	if opts.Status != "" {
		q.Set("status", opts.Status)
	}
	if opts.All {
		q.Set("all", "true")
	}
	path := "/v1/sessions"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return path
}

// Session returns one session by id, upstream id, or a unique prefix.
func (c *Client) Session(ctx context.Context, ref string) (*Session, error) {
	var s Session
	return &s, c.do(ctx, "GET", "/v1/sessions/"+url.PathEscape(ref), nil, &s)
}

// EventsOptions selects events to stream.
type EventsOptions struct {
	// Since streams events with a sequence number above it.
	Since uint64
	// Follow keeps the stream open for new events; otherwise it ends after
	// the events already recorded.
	Follow bool
}

// Events streams events to fn until the stream ends, ctx is done, or fn
// returns an error (which Events returns). It parses Server-Sent Events.
func (c *Client) Events(ctx context.Context, opts EventsOptions, fn func(Event) error) error {
	q := url.Values{}
	q.Set("since", strconv.FormatUint(opts.Since, 10))
	if !opts.Follow {
		q.Set("follow", "false")
	}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://sessiond/v1/events?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		return c.wrapDial(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	return ReadSSE(resp.Body, func(id, data string) error {
		if data == "" {
			return nil // heartbeat
		}
		var ev Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("decode event %s: %w", id, err)
		}
		return fn(ev)
	})
}

// ReadSSE reads a Server-Sent Events stream and calls fn with each event's
// id and data. Comment lines (heartbeats) are skipped.
func ReadSSE(r io.Reader, fn func(id, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	var id string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				if err := fn(id, strings.Join(data, "\n")); err != nil {
					return err
				}
			}
			id, data = "", nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id:"):
			id = strings.TrimSpace(line[3:])
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(line[5:], " "))
		}
	}
	if err := sc.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// WaitReady polls the socket until the daemon answers /v1/health or the
// timeout passes. Useful for scripts and tests that start sessiond.
func (c *Client) WaitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := c.Health(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}
