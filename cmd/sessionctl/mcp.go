package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/lib/buildinfo"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// The MCP server: sessionctl mcp serves sessiond's sessions to an agent
// over the Model Context Protocol on stdin and stdout, through the same
// API calls (and the same --host clients) as the other commands.

const (
	// mcpCallTimeout bounds every request but a wait: a sessiond that
	// accepts and never answers ends a tool call with an error, not a
	// hang.
	mcpCallTimeout = 30 * time.Second
	// mcpWaitDefault and mcpWaitMax bound wait_for_session.
	mcpWaitDefault = 300 * time.Second
	mcpWaitMax     = 3600 * time.Second
	// mcpProgressEvery is how often a wait reports progress when nothing
	// happens.
	mcpProgressEvery = 10 * time.Second
	// mcpDownGrace is how long a wait waits out a sessiond that stopped
	// answering (a restart) before it ends with the error.
	mcpDownGrace = 10 * time.Second
	// sessionURIPrefix is a session resource's URI before its id.
	sessionURIPrefix = "sessiond://session/"
)

func newMCP(a *app) *cobra.Command {
	var readOnly bool
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve sessiond's sessions to an agent as an MCP server on stdio",
		Long: `mcp is a Model Context Protocol server on stdin and stdout: an agent that
takes it as a tool server (Claude Code, Codex, OpenCode) can list the
sessions sessiond tracks, wait for one, hand it a prompt, launch, stop,
repair and reap, with the same answers as sessionctl --json.

The agent's own session (the one whose owner process is an ancestor of this
server) is marked "self" in every answer; stop_session and send_prompt
refuse it unless called with self: true. Every action carries that session
as its origin into sessiond's event log (sessionctl events). --read-only
offers only list_sessions, show_session and wait_for_session.

Resources: sessiond://session/<id>, one per session; a client that
subscribes is told when the session changes.

sessionctl mcp install claude|codex|opencode writes the server into an
agent's configuration. See docs/mcp.md.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			srv := newMCPServer(a, readOnly)
			return srv.server.Run(cmd.Context(), &mcp.StdioTransport{})
		},
	}
	cmd.Flags().BoolVar(&readOnly, "read-only", false, "offer only the tools that read: list_sessions, show_session, wait_for_session")
	cmd.AddCommand(mcpInstallCommands(a)...)
	return cmd
}

// mcpServer is one MCP server over the app's hosts.
type mcpServer struct {
	a        *app
	server   *mcp.Server
	readOnly bool
	// ancestry is this process's chain of ancestors, itself first, as
	// identities (pid and start time): the caller's session is the one
	// whose owner is among them. Nil when it could not be read.
	ancestry []proc.Identity

	mu   sync.Mutex
	subs map[string][]string // subscribed session id -> the URIs it was subscribed by
	// following is set once the event stream of each host is followed
	// for the subscriptions.
	following bool
	// ctx bounds the followers of the subscriptions: the process, in
	// sessionctl mcp; the test, in tests.
	ctx context.Context
}

func newMCPServer(a *app, readOnly bool) *mcpServer {
	m := &mcpServer{a: a, readOnly: readOnly, subs: map[string][]string{}, ctx: context.Background()}
	if anc, err := proc.NewHost().Ancestors(os.Getpid(), 64); err == nil {
		m.ancestry = anc
	}
	opts := &mcp.ServerOptions{
		Instructions: mcpInstructions,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		SubscribeHandler: func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return m.subscribe(ctx, req.Params.URI)
		},
		UnsubscribeHandler: func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			m.mu.Lock()
			for id, uris := range m.subs {
				if m.subs[id] = slices.DeleteFunc(uris, func(u string) bool { return u == req.Params.URI }); len(m.subs[id]) == 0 {
					delete(m.subs, id)
				}
			}
			m.mu.Unlock()
			return nil
		},
	}
	m.server = mcp.NewServer(&mcp.Implementation{Name: "sessiond", Title: "sessiond", Version: buildinfo.Version(version)}, opts)
	m.addTools()
	m.server.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "session",
		Title:       "A session sessiond tracks",
		Description: "One session as sessionctl show --json prints it; subscribe to hear when it changes.",
		MIMEType:    "application/json",
		URITemplate: sessionURIPrefix + "{id}",
	}, m.readResource)
	return m
}

const mcpInstructions = `sessiond tracks AI coding-agent sessions (Claude Code, Codex, OpenCode, ...) on this machine: whether each really runs (its owner process is alive), and whether it is busy, idle or waiting for a permission or an answer. Use list_sessions to see them, wait_for_session to block until one is idle or done instead of polling, send_prompt to give an idle one its next prompt. Your own session is marked "self": true.`

// MCPSession is a session as the tools answer it: the API's object (the
// fields of sessionctl --json) and whether it is the caller's own.
type MCPSession struct {
	api.Session
	// Self marks the caller's own session: the one whose owner process
	// is an ancestor of this server.
	Self bool `json:"self,omitempty" jsonschema:"true for the session of the agent calling this tool"`
}

// ---- inputs and outputs ----

type listIn struct {
	Agent    string `json:"agent,omitempty" jsonschema:"only sessions of this agent: claude, codex, opencode, ..."`
	Status   string `json:"status,omitempty" jsonschema:"only these statuses, comma-separated: starting, running, stopped, interrupted, unknown (stopped sessions are left out unless named here or all is set)"`
	Activity string `json:"activity,omitempty" jsonschema:"only these activities, comma-separated: busy, idle, waiting"`
	Cwd      string `json:"cwd,omitempty" jsonschema:"only sessions working in this directory or under it"`
	Host     string `json:"host,omitempty" jsonschema:"only sessions on this host (one of the hosts sessionctl mcp was given with --host)"`
	All      bool   `json:"all,omitempty" jsonschema:"include every stopped session too"`
}

type listOut struct {
	Sessions []MCPSession `json:"sessions" jsonschema:"the sessions, as sessionctl ls --json lists them"`
	// Self is the caller's own session id, when sessiond tracks it.
	Self string `json:"self,omitempty" jsonschema:"the id of the caller's own session, when sessiond tracks it"`
	// HostErrors names each host that did not answer.
	HostErrors []string `json:"host_errors,omitempty" jsonschema:"hosts that did not answer, and why"`
}

type idIn struct {
	ID string `json:"id" jsonschema:"the session: its id, upstream id, or a unique prefix of either"`
}

type waitIn struct {
	ID             string  `json:"id" jsonschema:"the session: its id, upstream id, or a unique prefix of either"`
	Until          string  `json:"until" jsonschema:"idle: running and idle; waiting: waiting for its user (a permission, a question); stopped: its owner is gone; done: idle, waiting or stopped; change: its status, activity or what it waits for changed"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"give up after this many seconds (default 300, at most 3600); the result then says timed_out"`
}

type waitOut struct {
	Session  MCPSession `json:"session" jsonschema:"the session as it is when the wait ended"`
	Until    string     `json:"until"`
	Reached  bool       `json:"reached" jsonschema:"true when the session got to the state asked for"`
	TimedOut bool       `json:"timed_out" jsonschema:"true when the timeout passed first"`
	Waited   float64    `json:"waited_seconds"`
}

type sendIn struct {
	ID       string `json:"id" jsonschema:"the session: its id, upstream id, or a unique prefix of either"`
	Prompt   string `json:"prompt" jsonschema:"the prompt, as its user would type it"`
	WhenIdle bool   `json:"when_idle,omitempty" jsonschema:"if the session is busy or waiting, queue the prompt and deliver it once it is idle; otherwise such a send is refused"`
	Tmux     bool   `json:"tmux,omitempty" jsonschema:"a stopped session is resumed in tmux, not headless"`
	Self     bool   `json:"self,omitempty" jsonschema:"allow sending to the caller's own session"`
}

type sendOut struct {
	api.SendResponse
	Self bool `json:"self,omitempty"`
}

type launchIn struct {
	Agent  string   `json:"agent" jsonschema:"the agent to start: claude, codex, opencode, ..."`
	Cwd    string   `json:"cwd" jsonschema:"the directory it works in (absolute)"`
	Prompt string   `json:"prompt,omitempty" jsonschema:"its first prompt"`
	Mode   string   `json:"mode,omitempty" jsonschema:"headless (default) or tmux"`
	Args   []string `json:"args,omitempty" jsonschema:"extra arguments for the agent"`
	Host   string   `json:"host,omitempty" jsonschema:"the host to launch on (default: the first)"`
}

type stopIn struct {
	ID             string  `json:"id" jsonschema:"the session: its id, upstream id, or a unique prefix of either"`
	Force          bool    `json:"force,omitempty" jsonschema:"SIGKILL at once rather than SIGTERM first"`
	TimeoutSeconds float64 `json:"timeout_seconds,omitempty" jsonschema:"seconds between SIGTERM and SIGKILL (default 10, at most 25)"`
	Self           bool    `json:"self,omitempty" jsonschema:"allow stopping the caller's own session"`
}

type planIn struct {
	ID     string `json:"id" jsonschema:"the session: its id, upstream id, or a unique prefix of either"`
	Apply  bool   `json:"apply,omitempty" jsonschema:"carry the plan out; needs plan_id from an earlier call without apply"`
	PlanID string `json:"plan_id,omitempty" jsonschema:"the plan_id an earlier call without apply returned"`
}

type actionOut struct {
	api.ActionResult
	// PlanID names the plan (repair, reap): apply it by calling again
	// with apply and this id.
	PlanID string `json:"plan_id,omitempty"`
	Self   bool   `json:"self,omitempty"`
}

func (m *mcpServer) addTools() {
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(m.server, &mcp.Tool{Name: "list_sessions", Title: "List sessions",
		Description: "List the agent sessions sessiond tracks, with their status (running, stopped, interrupted) and activity (busy, idle, waiting). Stopped sessions are left out unless asked for.",
		Annotations: ro}, m.listSessions)
	mcp.AddTool(m.server, &mcp.Tool{Name: "show_session", Title: "Show a session",
		Description: "Show one session by id, upstream id or a unique prefix.", Annotations: ro}, m.showSession)
	mcp.AddTool(m.server, &mcp.Tool{Name: "wait_for_session", Title: "Wait for a session",
		Description: "Block until a session is idle, waiting, stopped, done (any of those) or changed, or until the timeout; sends progress notifications while it waits.",
		Annotations: ro}, m.waitForSession)
	if m.readOnly {
		return
	}
	f := false
	mcp.AddTool(m.server, &mcp.Tool{Name: "send_prompt", Title: "Send a prompt",
		Description: "Give a session a prompt: delivered now if it is idle (a stopped one is resumed with it); refused if it is busy or waiting, unless when_idle queues it. Refused for your own session unless self is true.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f}}, m.sendPrompt)
	mcp.AddTool(m.server, &mcp.Tool{Name: "launch_session", Title: "Launch a session",
		Description: "Start a new agent session in a directory, with an optional first prompt; returns the session.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &f}}, m.launchSession)
	mcp.AddTool(m.server, &mcp.Tool{Name: "stop_session", Title: "Stop a session",
		Description: "Stop a session's owner process: SIGTERM, then SIGKILL after the timeout. Refused for your own session unless self is true."}, m.stopSession)
	mcp.AddTool(m.server, &mcp.Tool{Name: "repair_session", Title: "Repair a dead session",
		Description: "Plan a repair of what a dead session's agent left behind (stale busy markers, tool calls left in flight). Without apply it only returns the plan and its plan_id; call again with apply: true and that plan_id to carry it out."}, m.planTool("repair"))
	mcp.AddTool(m.server, &mcp.Tool{Name: "reap_session", Title: "Reap a dead session's orphans",
		Description: "Plan the termination of tool processes a dead session left running. Without apply it only returns the plan and its plan_id; call again with apply: true and that plan_id to carry it out."}, m.planTool("reap"))
}

// ---- the caller's own session ----

// selfIDs are the ids of the caller's own sessions on the local host: the
// running sessions whose owner (pid and start time) is an ancestor of
// this process. Remote hosts have none.
func (m *mcpServer) selfIDs(list []api.Session) map[string]bool {
	out := map[string]bool{}
	for _, s := range list {
		if s.PID <= 0 || s.Host != "" && m.remoteHost(s.Host) {
			continue
		}
		for _, id := range m.ancestry {
			if id.PID == s.PID && id.StartTicks == s.PIDStart && (s.BootID == "" || id.BootID == "" || s.BootID == id.BootID) {
				out[s.ID] = true
			}
		}
	}
	return out
}

func (m *mcpServer) remoteHost(name string) bool {
	for _, hc := range m.a.hostClients() {
		if hc.name == name {
			return hc.c.Remote()
		}
	}
	return false
}

// localClient is the client of the first host reached without ssh, or
// nil.
func (m *mcpServer) localClient() *api.Client {
	for _, hc := range m.a.hostClients() {
		if !hc.c.Remote() {
			return hc.c
		}
	}
	return nil
}

// self is the caller's own session id ("" when sessiond tracks none).
func (m *mcpServer) self(ctx context.Context) string {
	c := m.localClient()
	if c == nil || len(m.ancestry) == 0 {
		return ""
	}
	list, err := c.Sessions(ctx, api.ListOptions{Status: string(session.StatusRunning) + "," + string(session.StatusStarting)})
	if err != nil {
		return ""
	}
	for _, s := range list {
		if m.selfIDs([]api.Session{s})[s.ID] {
			return s.ID
		}
	}
	return ""
}

// acting returns c with the caller's session as the origin of what it
// does, and that session's id.
func (m *mcpServer) acting(ctx context.Context, c *api.Client) (*api.Client, string) {
	self := m.self(ctx)
	origin := self
	if origin == "" {
		origin = fmt.Sprintf("mcp (pid %d)", os.Getpid())
	} else {
		origin = "session " + origin
	}
	cc := *c
	cc.Origin = origin
	return &cc, self
}

func (m *mcpServer) mark(s api.Session, self string) MCPSession {
	return MCPSession{Session: s, Self: self != "" && s.ID == self}
}

// ---- tools ----

// toolErr is an error as the model reads it: the daemon's words, and the
// candidates of an ambiguous prefix.
func toolErr(err error) error {
	var se *api.StatusError
	if errors.As(err, &se) {
		// The daemon's words, and its stable code for a program.
		msg := fmt.Sprintf("%s [%s]", err, se.Body.Code)
		if len(se.Body.Candidates) > 0 {
			msg += " candidates: " + strings.Join(se.Body.Candidates, ", ")
		}
		return errors.New(msg)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("sessiond did not answer within %s: %w", mcpCallTimeout, err)
	}
	return err
}

// find resolves ref on the hosts: the client of its host and the session.
func (m *mcpServer) find(ctx context.Context, ref string) (*api.Client, *api.Session, error) {
	if strings.TrimSpace(ref) == "" {
		return nil, nil, errors.New("id is empty: give a session id, upstream id or a unique prefix")
	}
	c, s, err := m.a.sessionOnHosts(ctx, ref)
	if err == nil && s == nil {
		s, err = c.Session(ctx, ref)
	}
	if err != nil {
		return nil, nil, toolErr(err)
	}
	s.Host = c.Host
	return c, s, nil
}

func (m *mcpServer) listSessions(ctx context.Context, _ *mcp.CallToolRequest, in listIn) (*mcp.CallToolResult, listOut, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	hcs := m.a.hostClients()
	if in.Host != "" {
		var only []hostClient
		for _, hc := range hcs {
			if hc.name == in.Host {
				only = append(only, hc)
			}
		}
		if len(only) == 0 {
			var names []string
			for _, hc := range hcs {
				names = append(names, orLocal(hc.name))
			}
			return nil, listOut{}, fmt.Errorf("host %q is not one this server was given (%s)", in.Host, strings.Join(names, ", "))
		}
		hcs = only
	}
	opts := api.ListOptions{Agent: in.Agent, Status: in.Status, All: in.All}
	answers := askHosts(ctx, hcs, func(ctx context.Context, c *api.Client) ([]api.Session, error) { return c.Sessions(ctx, opts) })
	out := listOut{Sessions: []MCPSession{}}
	var all []api.Session
	failed := 0
	var first error
	for _, ans := range answers {
		if ans.err != nil {
			failed++
			if first == nil {
				first = ans.err
			}
			out.HostErrors = append(out.HostErrors, hostErr(ans.host, ans.err))
			continue
		}
		for _, s := range ans.val {
			s.Host = ans.host
			all = append(all, s)
		}
	}
	if failed == len(answers) {
		return nil, listOut{}, toolErr(first)
	}
	self := m.selfIDs(all)
	acts := splitList(in.Activity)
	for _, s := range all {
		if len(acts) > 0 && !slices.Contains(acts, string(s.Activity)) {
			continue
		}
		if in.Cwd != "" && !underDir(s.Cwd, in.Cwd) {
			continue
		}
		ms := MCPSession{Session: s, Self: self[s.ID]}
		if ms.Self {
			out.Self = s.ID
		}
		out.Sessions = append(out.Sessions, ms)
	}
	if out.Self == "" {
		for id := range self {
			out.Self = id
		}
	}
	return nil, out, nil
}

func orLocal(name string) string {
	if name == "" {
		return "the local socket"
	}
	return name
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// underDir reports whether path is dir or under it.
func underDir(path, dir string) bool {
	dir = strings.TrimRight(dir, "/")
	return path == dir || strings.HasPrefix(path, dir+"/") || dir == ""
}

func (m *mcpServer) showSession(ctx context.Context, _ *mcp.CallToolRequest, in idIn) (*mcp.CallToolResult, MCPSession, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	_, s, err := m.find(ctx, in.ID)
	if err != nil {
		return nil, MCPSession{}, err
	}
	return nil, m.mark(*s, m.selfOf(ctx, s)), nil
}

// selfOf is s's id when s is the caller's own session, else "".
func (m *mcpServer) selfOf(_ context.Context, s *api.Session) string {
	if m.selfIDs([]api.Session{*s})[s.ID] {
		return s.ID
	}
	return ""
}

func (m *mcpServer) waitForSession(ctx context.Context, req *mcp.CallToolRequest, in waitIn) (*mcp.CallToolResult, waitOut, error) {
	cond, ok := waitConds[in.Until]
	if !ok {
		return nil, waitOut{}, fmt.Errorf("until %q: want one of idle, waiting, stopped, done, change", in.Until)
	}
	timeout := mcpWaitDefault
	if in.TimeoutSeconds > 0 {
		timeout = time.Duration(in.TimeoutSeconds * float64(time.Second))
	}
	if timeout > mcpWaitMax {
		return nil, waitOut{}, fmt.Errorf("timeout_seconds %g: at most %d", in.TimeoutSeconds, int(mcpWaitMax/time.Second))
	}
	rctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	c, start, err := m.find(rctx, in.ID)
	cancel()
	if err != nil {
		return nil, waitOut{}, err
	}
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	token := req.Params.GetProgressToken()
	progress := func(last api.Session, msg string) {
		if token == nil || req.Session == nil {
			return
		}
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
			Progress: time.Since(began).Seconds(), Total: timeout.Seconds(), Message: msg})
	}
	last, reached, err := followUntil(wctx, c, *start, cond.met, progress)
	out := waitOut{Until: in.Until, Reached: reached, Waited: time.Since(began).Round(time.Millisecond).Seconds()}
	last.Host = c.Host
	out.Session = m.mark(last, m.selfOf(ctx, &last))
	switch {
	case reached:
		return nil, out, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		out.TimedOut = true
		text := fmt.Sprintf("timed out after %s: session %s is not %s yet (it is %s, %s)", timeout, last.ID, in.Until, last.Status, activityWord(last))
		b, _ := json.Marshal(out)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}, &mcp.TextContent{Text: string(b)}}}, out, nil
	case err != nil:
		return nil, waitOut{}, toolErr(err)
	}
	return nil, waitOut{}, ctx.Err()
}

// followUntil checks start's session, then follows its host's event
// stream until met holds (or ctx ends), and returns the session as it
// was last read. A sessiond that restarts is followed again.
func followUntil(ctx context.Context, c *api.Client, start api.Session, met func(s, start api.Session) bool, progress func(api.Session, string)) (api.Session, bool, error) {
	last := start
	h, err := c.Health(ctx)
	if err != nil {
		return last, false, err
	}
	since := h.LastEventSeq
	check := func() (bool, error) {
		s, err := c.Session(ctx, start.ID)
		if err != nil {
			return false, err
		}
		last = *s
		return met(last, start), nil
	}
	if ok, err := check(); ok || err != nil {
		return last, ok, err
	}
	// Progress while nothing happens: the client sees the wait alive.
	tick := time.NewTicker(mcpProgressEvery)
	defer tick.Stop()
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				progress(last, fmt.Sprintf("session %s is %s", start.ID, activityWord(last)))
			}
		}
	}()
	progress(last, fmt.Sprintf("waiting: session %s is %s", start.ID, activityWord(last)))
	errMet := errors.New("met")
	var downSince time.Time // when sessiond stopped answering
	for {
		err := c.Events(ctx, api.EventsOptions{Since: since, Follow: true}, func(ev api.Event) error {
			since = ev.Seq
			if ev.SessionID != start.ID {
				return nil
			}
			ok, err := check()
			if err != nil {
				return err
			}
			if ok {
				return errMet
			}
			progress(last, fmt.Sprintf("session %s is now %s", start.ID, activityWord(last)))
			return nil
		})
		var se *api.StatusError
		switch {
		case errors.Is(err, errMet):
			return last, true, nil
		case ctx.Err() != nil:
			return last, false, ctx.Err()
		case errors.As(err, &se):
			return last, false, err
		}
		// The stream ended: sessiond restarted, or is gone. A restart
		// is waited out; a sessiond down for longer ends the wait
		// with the reason, not a hang until the timeout.
		select {
		case <-ctx.Done():
			return last, false, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		ok, err := check()
		switch {
		case ok || err != nil && !isUnreachable(err):
			return last, ok, err
		case err == nil:
			downSince = time.Time{}
		case downSince.IsZero():
			downSince = time.Now()
		case time.Since(downSince) > mcpDownGrace:
			return last, false, fmt.Errorf("sessiond stopped answering while waiting (for %s): %w", mcpDownGrace, err)
		}
	}
}

// refuseSelf is the error of an action on the caller's own session.
func refuseSelf(what, id string) error {
	return fmt.Errorf("refused: session %s is your own session (the agent calling this tool); %s it only with self: true", id, what)
}

func (m *mcpServer) sendPrompt(ctx context.Context, _ *mcp.CallToolRequest, in sendIn) (*mcp.CallToolResult, sendOut, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	if in.Prompt == "" {
		return nil, sendOut{}, errors.New("prompt is empty")
	}
	c, s, err := m.find(ctx, in.ID)
	if err != nil {
		return nil, sendOut{}, err
	}
	c, self := m.acting(ctx, c)
	if self == s.ID && !in.Self {
		return nil, sendOut{}, refuseSelf("send to", s.ID)
	}
	req := api.SendRequest{Prompt: in.Prompt, WhenIdle: in.WhenIdle}
	if in.Tmux {
		req.Mode = "tmux"
	}
	r, err := c.Send(ctx, s.ID, req)
	if err != nil {
		return nil, sendOut{}, toolErr(err)
	}
	r.Session.Host = c.Host
	return nil, sendOut{SendResponse: *r, Self: self == s.ID}, nil
}

func (m *mcpServer) launchSession(ctx context.Context, _ *mcp.CallToolRequest, in launchIn) (*mcp.CallToolResult, api.LaunchResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	c := m.a.hostClients()[0].c
	if in.Host != "" {
		c = nil
		for _, hc := range m.a.hostClients() {
			if hc.name == in.Host {
				c = hc.c
			}
		}
		if c == nil {
			return nil, api.LaunchResponse{}, fmt.Errorf("host %q is not one this server was given", in.Host)
		}
	}
	if in.Agent == "" || in.Cwd == "" {
		return nil, api.LaunchResponse{}, errors.New("launch_session needs agent and cwd")
	}
	c, _ = m.acting(ctx, c)
	r, err := c.Launch(ctx, api.LaunchRequest{Agent: in.Agent, Cwd: in.Cwd, Prompt: in.Prompt, Mode: in.Mode, Args: in.Args})
	if err != nil {
		return nil, api.LaunchResponse{}, toolErr(err)
	}
	r.Session.Host = c.Host
	return nil, *r, nil
}

func (m *mcpServer) stopSession(ctx context.Context, _ *mcp.CallToolRequest, in stopIn) (*mcp.CallToolResult, actionOut, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout+30*time.Second)
	defer cancel()
	c, s, err := m.find(ctx, in.ID)
	if err != nil {
		return nil, actionOut{}, err
	}
	c, self := m.acting(ctx, c)
	if self == s.ID && !in.Self {
		return nil, actionOut{}, refuseSelf("stop", s.ID)
	}
	req := api.ActionRequest{Apply: true, Force: in.Force}
	if in.TimeoutSeconds > 0 {
		req.Timeout = time.Duration(in.TimeoutSeconds * float64(time.Second)).String()
	}
	r, err := c.Action(ctx, s.ID, "stop", req)
	if err != nil {
		return nil, actionOut{}, toolErr(err)
	}
	r.Session.Host = c.Host
	return nil, actionOut{ActionResult: *r, Self: self == s.ID}, nil
}

// planID names a plan by what it would do: the action, the session and
// each planned step. Applying needs the id of the plan as it is now, so a
// plan that changed since the caller read it is not carried out unseen.
func planID(action string, r *api.ActionResult) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\n", action, r.Session.Host, r.Session.ID)
	for _, s := range r.Steps {
		fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\n", s.Action, s.Target, s.Detail, s.Outcome)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func (m *mcpServer) planTool(action string) mcp.ToolHandlerFor[planIn, actionOut] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in planIn) (*mcp.CallToolResult, actionOut, error) {
		ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout+30*time.Second)
		defer cancel()
		if in.Apply && in.PlanID == "" {
			return nil, actionOut{}, fmt.Errorf("apply needs plan_id: call %s_session without apply first, read the plan, then call again with apply: true and its plan_id", action)
		}
		c, s, err := m.find(ctx, in.ID)
		if err != nil {
			return nil, actionOut{}, err
		}
		plan, err := c.Action(ctx, s.ID, action, api.ActionRequest{})
		if err != nil {
			return nil, actionOut{}, toolErr(err)
		}
		plan.Session.Host = c.Host
		id := planID(action, plan)
		if !in.Apply {
			return nil, actionOut{ActionResult: *plan, PlanID: id}, nil
		}
		if id != in.PlanID {
			return nil, actionOut{}, fmt.Errorf("the plan changed since plan %s was read (it is now %s): nothing was done; read it again (call without apply) before applying", in.PlanID, id)
		}
		c, self := m.acting(ctx, c)
		r, err := c.Action(ctx, s.ID, action, api.ActionRequest{Apply: true})
		if err != nil {
			return nil, actionOut{}, toolErr(err)
		}
		r.Session.Host = c.Host
		return nil, actionOut{ActionResult: *r, PlanID: id, Self: self == s.ID}, nil
	}
}

// ---- resources ----

func (m *mcpServer) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	uri := req.Params.URI
	id, ok := strings.CutPrefix(uri, sessionURIPrefix)
	if !ok || id == "" {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	_, s, err := m.find(ctx, id)
	if err != nil {
		if api.IsNotFound(errors.Unwrap(err)) || strings.Contains(err.Error(), "no session") {
			return nil, mcp.ResourceNotFoundError(uri)
		}
		return nil, err
	}
	b, err := json.Marshal(m.mark(*s, m.selfOf(ctx, s)))
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscribe notes a session's URI and, on the first subscription, starts
// following each host's event stream: each event of a subscribed session
// tells its subscribers the resource changed.
func (m *mcpServer) subscribe(ctx context.Context, uri string) error {
	ref, ok := strings.CutPrefix(uri, sessionURIPrefix)
	if !ok || ref == "" {
		return fmt.Errorf("%s is not a session's URI (%s<id>)", uri, sessionURIPrefix)
	}
	// A prefix or an upstream id names the session its events carry.
	ctx, cancel := context.WithTimeout(ctx, mcpCallTimeout)
	defer cancel()
	_, s, err := m.find(ctx, ref)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Contains(m.subs[s.ID], uri) {
		m.subs[s.ID] = append(m.subs[s.ID], uri)
	}
	if !m.following {
		m.following = true
		for _, hc := range m.a.hostClients() {
			go m.follow(hc.c)
		}
	}
	return nil
}

// follow passes one host's events on to the subscribers, from the
// stream's position when it starts, taking it up again when sessiond
// restarts, until the process ends.
func (m *mcpServer) follow(c *api.Client) {
	ctx := m.ctx
	var since uint64
	if h, err := c.Health(ctx); err == nil {
		since = h.LastEventSeq
	}
	for {
		err := c.Events(ctx, api.EventsOptions{Since: since, Follow: true}, func(ev api.Event) error {
			since = ev.Seq
			m.mu.Lock()
			uris := slices.Clone(m.subs[ev.SessionID])
			m.mu.Unlock()
			for _, uri := range uris {
				_ = m.server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		_ = err
		time.Sleep(time.Second)
	}
}
