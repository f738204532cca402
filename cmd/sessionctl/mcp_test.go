package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// mcpClient is an MCP client session on an in-process sessionctl mcp
// server over the app's socket, with what the server told it besides
// answers: progress and resource updates.
type mcpClient struct {
	*mcp.ClientSession
	mu       sync.Mutex
	progress []*mcp.ProgressNotificationParams
	updated  []string
}

func (c *mcpClient) progressCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.progress)
}

func (c *mcpClient) updatedURIs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.updated)
}

// connectMCP serves MCP over socket (read-only or not) in-process and
// connects the SDK's own client to it.
func connectMCP(t *testing.T, socket string, readOnly bool) *mcpClient {
	t.Helper()
	return connectMCPWith(t, socket, readOnly, nil)
}

// connectMCPWith is connectMCP with the server changed by edit before it
// serves.
func connectMCPWith(t *testing.T, socket string, readOnly bool, edit func(*mcpServer)) *mcpClient {
	t.Helper()
	a := &app{socket: socket, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	if err := a.resolveHosts(); err != nil {
		t.Fatal(err)
	}
	m := newMCPServer(a, readOnly)
	if edit != nil {
		edit(m)
	}
	st, ct := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	m.ctx = ctx
	ss, err := m.server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	mc := &mcpClient{}
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mc.mu.Lock()
			mc.progress = append(mc.progress, req.Params)
			mc.mu.Unlock()
		},
		ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
			mc.mu.Lock()
			mc.updated = append(mc.updated, req.Params.URI)
			mc.mu.Unlock()
		},
	})
	cs, err := client.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	mc.ClientSession = cs
	t.Cleanup(func() {
		cs.Close()
		ss.Close()
		cancel()
	})
	return mc
}

// call calls a tool and returns its result; a protocol error fails the
// test (tool errors are results with IsError).
func (c *mcpClient) call(t *testing.T, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	return c.callProgress(t, name, args, nil)
}

func (c *mcpClient) callProgress(t *testing.T, name string, args map[string]any, token any) *mcp.CallToolResult {
	t.Helper()
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if token != nil {
		p.SetProgressToken(token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := c.CallTool(ctx, p)
	if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return res
}

// ok decodes a successful result's structured content into v.
func ok(t *testing.T, res *mcp.CallToolResult, v any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %s", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("structured content %s: %v", b, err)
	}
}

// toolError is a result's error text; it fails the test unless the
// result is an error.
func toolError(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %s", text(res))
	}
	return text(res)
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func sessionIDs(list []MCPSession) []string {
	var out []string
	for _, s := range list {
		out = append(out, s.ID)
	}
	slices.Sort(out)
	return out
}

// Every tool is offered with an input and an output schema; --read-only
// offers only the reading ones, and the others are unknown to it.
func TestMCPToolsAndSchemas(t *testing.T) {
	w := newWorld(t)
	c := connectMCP(t, w.Socket, false)
	tools, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		in, _ := json.Marshal(tool.InputSchema)
		out, _ := json.Marshal(tool.OutputSchema)
		if !strings.Contains(string(in), `"type":"object"`) || tool.OutputSchema == nil || !strings.Contains(string(out), `"properties"`) {
			t.Errorf("%s: input schema %s, output schema %s", tool.Name, in, out)
		}
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
	}
	slices.Sort(names)
	want := []string{"launch_session", "list_sessions", "reap_session", "repair_session", "send_prompt", "show_session", "stop_session", "wait_for_session"}
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	for _, tool := range tools.Tools {
		in, _ := json.Marshal(tool.InputSchema)
		switch tool.Name {
		case "wait_for_session":
			if !strings.Contains(string(in), `"required":["id","until"]`) {
				t.Errorf("wait_for_session's schema does not require id and until: %s", in)
			}
		case "show_session":
			out, _ := json.Marshal(tool.OutputSchema)
			for _, f := range []string{`"upstream_id"`, `"status"`, `"activity"`, `"pid_start"`, `"self"`} {
				if !strings.Contains(string(out), f) {
					t.Errorf("show_session's output schema lacks %s: %s", f, out)
				}
			}
		}
	}
	// A bad argument is refused by the schema, with the reason.
	if msg := toolError(t, c.call(t, "wait_for_session", map[string]any{"id": runningID})); !strings.Contains(msg, "until") {
		t.Errorf("wait without until: %s", msg)
	}

	ro := connectMCP(t, w.Socket, true)
	tools, err = ro.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Annotations == nil || !tool.Annotations.ReadOnlyHint {
			t.Errorf("read-only server offers %s without readOnlyHint", tool.Name)
		}
	}
	slices.Sort(names)
	if want := []string{"list_sessions", "show_session", "wait_for_session"}; !slices.Equal(names, want) {
		t.Fatalf("--read-only tools %v, want %v", names, want)
	}
	_, err = ro.CallTool(context.Background(), &mcp.CallToolParams{Name: "stop_session", Arguments: map[string]any{"id": victimID}})
	if err == nil || !strings.Contains(err.Error(), "stop_session") {
		t.Fatalf("--read-only stop_session: %v", err)
	}
	if s := w.Show(victimID); s.Status != session.StatusRunning {
		t.Fatalf("the read-only server stopped %s: %s", victimID, s.Status)
	}
}

// list_sessions and show_session answer what sessionctl --json does,
// with each filter applied, and the daemon's refusals as tool errors.
func TestMCPListAndShow(t *testing.T) {
	w := newWorld(t)
	c := connectMCP(t, w.Socket, false)

	var l listOut
	ok(t, c.call(t, "list_sessions", nil), &l)
	if got := sessionIDs(l.Sessions); !slices.Equal(got, []string{runningID, victimID}) {
		t.Fatalf("default list %v", got)
	}
	var cli api.SessionList
	ctlJSON(t, &cli, "ls")
	for _, s := range l.Sessions {
		for _, want := range cli.Sessions {
			if want.ID == s.ID && (want.PID != s.PID || want.PIDStart != s.PIDStart || want.UpstreamID != s.UpstreamID || want.Status != s.Status || want.Activity != s.Activity || want.Cwd != s.Cwd) {
				t.Errorf("list_sessions %+v, ls --json %+v", s.Session, want)
			}
		}
		if s.Self {
			t.Errorf("%s marked self, but no session's owner is an ancestor of the test", s.ID)
		}
	}
	for _, f := range []struct {
		args map[string]any
		want []string
	}{
		{map[string]any{"status": "stopped"}, []string{stoppedID}},
		{map[string]any{"all": true}, []string{runningID, stoppedID, victimID}},
		{map[string]any{"agent": "codex"}, nil},
		{map[string]any{"agent": "claude", "activity": "idle"}, []string{runningID, victimID}},
		{map[string]any{"activity": "busy,waiting"}, nil},
		{map[string]any{"cwd": w.proj}, []string{runningID, victimID}},
		{map[string]any{"cwd": w.Home}, []string{runningID, victimID}},
		{map[string]any{"cwd": w.proj + "x"}, nil},
	} {
		var l listOut
		ok(t, c.call(t, "list_sessions", f.args), &l)
		if got := sessionIDs(l.Sessions); !slices.Equal(got, f.want) {
			t.Errorf("list_sessions %v: %v, want %v", f.args, got, f.want)
		}
	}
	if msg := toolError(t, c.call(t, "list_sessions", map[string]any{"host": "far"})); !strings.Contains(msg, `host "far"`) {
		t.Errorf("unknown host: %s", msg)
	}

	var s MCPSession
	ok(t, c.call(t, "show_session", map[string]any{"id": "70b0"}), &s)
	if s.ID != victimID || s.Status != session.StatusRunning || s.PID != w.victim.PID {
		t.Fatalf("show 70b0: %+v", s.Session)
	}
	msg := toolError(t, c.call(t, "show_session", map[string]any{"id": "5e55"}))
	if !strings.Contains(msg, "[ambiguous]") || !strings.Contains(msg, runningID) || !strings.Contains(msg, stoppedID) {
		t.Errorf("ambiguous prefix: %s", msg)
	}
	if msg := toolError(t, c.call(t, "show_session", map[string]any{"id": "ffffffffffff"})); !strings.Contains(msg, "ffffffffffff") {
		t.Errorf("unknown id: %s", msg)
	}
	if msg := toolError(t, c.call(t, "show_session", map[string]any{"id": ""})); !strings.Contains(msg, "empty") {
		t.Errorf("empty id: %s", msg)
	}

	// A session as a resource: read, and a subscription hears its change.
	uri := sessionURIPrefix + victimID
	rr, err := c.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		t.Fatal(err)
	}
	var rs MCPSession
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &rs); err != nil || rs.ID != victimID || rr.Contents[0].URI != uri {
		t.Fatalf("read %s: %v %+v", uri, err, rr.Contents[0])
	}
	if _, err := c.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: sessionURIPrefix + "ffffffffffff"}); err == nil {
		t.Fatal("read of an unknown session's resource answered")
	}
	if err := c.Subscribe(context.Background(), &mcp.SubscribeParams{URI: uri}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the follower takes the stream's position
	if got := c.updatedURIs(); len(got) != 0 {
		t.Fatalf("updates before any change: %v", got)
	}
	if err := syscall.Kill(w.victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !slices.Contains(c.updatedURIs(), uri) {
		if time.Now().After(deadline) {
			t.Fatalf("no resource update for %s after its owner died (got %v)", uri, c.updatedURIs())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if slices.ContainsFunc(c.updatedURIs(), func(u string) bool { return u != uri }) {
		t.Fatalf("updates of sessions not subscribed: %v", c.updatedURIs())
	}
}

// wait_for_session: a state already reached returns at once; one not
// reached reports the timeout as such (a result, not an error); a death
// during the wait ends it with the session stopped, and progress came
// while it waited.
func TestMCPWait(t *testing.T) {
	w := newWorld(t)
	c := connectMCP(t, w.Socket, false)

	var out waitOut
	ok(t, c.call(t, "wait_for_session", map[string]any{"id": stoppedID, "until": "stopped"}), &out)
	if !out.Reached || out.TimedOut || out.Session.ID != stoppedID {
		t.Fatalf("already stopped: %+v", out)
	}
	res := c.call(t, "wait_for_session", map[string]any{"id": runningID, "until": "stopped", "timeout_seconds": 0.3})
	ok(t, res, &out)
	if out.Reached || !out.TimedOut || out.Waited < 0.3 || out.Session.Status != session.StatusRunning || !strings.Contains(text(res), "timed out after 300ms") {
		t.Fatalf("timeout: %+v %s", out, text(res))
	}
	if msg := toolError(t, c.call(t, "wait_for_session", map[string]any{"id": runningID, "until": "soon"})); !strings.Contains(msg, "idle, waiting, stopped, done, change") {
		t.Errorf("until soon: %s", msg)
	}
	if msg := toolError(t, c.call(t, "wait_for_session", map[string]any{"id": "5e55", "until": "idle"})); !strings.Contains(msg, "[ambiguous]") {
		t.Errorf("ambiguous: %s", msg)
	}
	if msg := toolError(t, c.call(t, "wait_for_session", map[string]any{"id": "ffffffffffff", "until": "idle"})); !strings.Contains(msg, "[not_found]") {
		t.Errorf("unknown: %s", msg)
	}

	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- c.callProgress(t, "wait_for_session", map[string]any{"id": victimID, "until": "done", "timeout_seconds": 30}, "tok-1")
	}()
	// "done" holds for an idle session at once: wait for stopped instead.
	r := <-done
	ok(t, r, &out)
	if !out.Reached || out.Session.ID != victimID {
		t.Fatalf("done on an idle session: %+v", out)
	}
	go func() {
		done <- c.callProgress(t, "wait_for_session", map[string]any{"id": victimID, "until": "stopped", "timeout_seconds": 30}, "tok-2")
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case r := <-done:
		t.Fatalf("returned before the owner died: %s", text(r))
	default:
	}
	if err := syscall.Kill(w.victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ok(t, <-done, &out)
	if !out.Reached || out.TimedOut || !out.Session.Status.Terminal() {
		t.Fatalf("after the kill: %+v", out)
	}
	if c.progressCount() == 0 {
		t.Fatal("no progress notification while it waited")
	}
	c.mu.Lock()
	p := c.progress[0]
	c.mu.Unlock()
	if p.ProgressToken != "tok-2" || !strings.Contains(p.Message, victimID) {
		t.Fatalf("progress %+v", p)
	}
}

// The actions: send refuses as sessionctl send does; stop, repair and
// reap act, repair and reap only with the plan's id; each action is in
// the event log with the server as its origin.
func TestMCPActions(t *testing.T) {
	w := newWorld(t)
	c := connectMCP(t, w.Socket, false)

	// The same refusal as sessionctl send: the session is idle but not in
	// a pane sessiond can type into.
	_, cliErr, code := ctl("send", runningID, "hello")
	if code == exitOK {
		t.Fatalf("sessionctl send to an untyped session succeeded")
	}
	msg := toolError(t, c.call(t, "send_prompt", map[string]any{"id": runningID, "prompt": "hello"}))
	if want := strings.TrimSpace(strings.TrimPrefix(cliErr, "sessionctl: ")); !strings.HasPrefix(msg, want+" [") {
		t.Errorf("send_prompt: %q, sessionctl send: %q", msg, want)
	}
	if msg := toolError(t, c.call(t, "send_prompt", map[string]any{"id": runningID, "prompt": ""})); !strings.Contains(msg, "empty") {
		t.Errorf("empty prompt: %s", msg)
	}

	// repair: the plan, then apply only with its id.
	var plan actionOut
	ok(t, c.call(t, "repair_session", map[string]any{"id": stoppedID}), &plan)
	if plan.Applied || plan.PlanID == "" || plan.Action != "repair" || plan.Session.ID != stoppedID {
		t.Fatalf("repair plan: %+v", plan)
	}
	if msg := toolError(t, c.call(t, "repair_session", map[string]any{"id": stoppedID, "apply": true})); !strings.Contains(msg, "plan_id") {
		t.Errorf("apply without plan_id: %s", msg)
	}
	if msg := toolError(t, c.call(t, "repair_session", map[string]any{"id": stoppedID, "apply": true, "plan_id": "0000000000000000"})); !strings.Contains(msg, "plan changed") {
		t.Errorf("apply with another plan's id: %s", msg)
	}
	var applied actionOut
	ok(t, c.call(t, "repair_session", map[string]any{"id": stoppedID, "apply": true, "plan_id": plan.PlanID}), &applied)
	if !applied.Applied || applied.PlanID != plan.PlanID {
		t.Fatalf("repair applied: %+v", applied)
	}
	ok(t, c.call(t, "reap_session", map[string]any{"id": stoppedID}), &plan)
	if plan.Applied || plan.PlanID == "" || plan.Action != "reap" {
		t.Fatalf("reap plan: %+v", plan)
	}
	ok(t, c.call(t, "reap_session", map[string]any{"id": stoppedID, "apply": true, "plan_id": plan.PlanID}), &applied)
	if !applied.Applied {
		t.Fatalf("reap applied: %+v", applied)
	}

	// stop: the victim's owner gets its SIGTERM.
	var stop actionOut
	ok(t, c.call(t, "stop_session", map[string]any{"id": victimID, "timeout_seconds": 2}), &stop)
	if !stop.Applied || stop.Action != "stop" {
		t.Fatalf("stop: %+v", stop)
	}
	deadline := time.Now().Add(20 * time.Second)
	for w.Show(victimID).Status == session.StatusRunning {
		if time.Now().After(deadline) {
			t.Fatal("the victim still runs after stop_session")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if msg := toolError(t, c.call(t, "stop_session", map[string]any{"id": victimID})); !strings.Contains(msg, "not") {
		t.Errorf("stop of a stopped session: %s", msg)
	}

	// launch: the fake claude, a new session.
	var l api.LaunchResponse
	ok(t, c.call(t, "launch_session", map[string]any{"agent": "claude", "cwd": w.proj, "prompt": "list the files"}), &l)
	if l.Session.ID == "" || l.Session.Agent != "claude" || !l.Session.Launched {
		t.Fatalf("launch: %+v", l)
	}
	if msg := toolError(t, c.call(t, "launch_session", map[string]any{"agent": "nosuch", "cwd": w.proj})); !strings.Contains(msg, `unknown agent "nosuch"`) {
		t.Errorf("launch nosuch: %s", msg)
	}

	// Who did it: every action's event carries the server as its origin.
	origin := fmt.Sprintf("mcp (pid %d)", os.Getpid())
	var evs []api.Event
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := api.NewClient(w.Socket).Events(ctx, api.EventsOptions{}, func(ev api.Event) error {
		if ev.Type == session.EventAction {
			evs = append(evs, ev)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Origin != origin {
			t.Errorf("action event %+v: origin %q, want %q", ev, ev.Origin, origin)
		}
		got = append(got, ev.SessionID+" "+ev.Reason)
	}
	for _, want := range []string{stoppedID + " repair", stoppedID + " reap", victimID + " stop", l.Session.ID + " launched"} {
		if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, want) }) {
			t.Errorf("no action event %q in %q", want, got)
		}
	}
	out, _, _ := ctl("events")
	if !strings.Contains(out, "(by "+origin+")") {
		t.Errorf("sessionctl events does not say who acted:\n%s", out)
	}
}

// The caller's own session is the one whose owner is an ancestor of the
// server: marked self, and stop and send on it refused unless self. The
// marking is checked on the server's real ancestry (the test process owns
// a session here, the server runs in it); the refusals on a server whose
// ancestry is a sleep's, so that a refusal that fails stops the sleep,
// not the test.
func TestMCPSelf(t *testing.T) {
	e := daemontest.NewEnv(t)
	me, err := proc.NewHost().Identify(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const selfID, sleeperID = "5e1f000000aa", "5e1f000000bb"
	_, other := daemontest.StartOwner(t)
	_, sleeper := daemontest.StartOwner(t)
	now := time.Now()
	e.Seed(
		&session.Record{ID: selfID, Agent: "claude", UpstreamID: "44444444-2222-4333-8444-555555555555",
			Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &me, Cwd: e.Home, CreatedAt: now},
		&session.Record{ID: sleeperID, Agent: "claude", UpstreamID: "55555555-2222-4333-8444-555555555555",
			Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &sleeper, Cwd: e.Home, CreatedAt: now},
		&session.Record{ID: runningID, Agent: "claude", UpstreamID: "11111111-2222-4333-8444-555555555555",
			Status: session.StatusRunning, Activity: session.ActivityIdle, Owner: &other, Cwd: e.Home, CreatedAt: now},
	)
	e.StartDaemon()
	c := connectMCP(t, e.Socket, false)

	var l listOut
	ok(t, c.call(t, "list_sessions", nil), &l)
	if l.Self != selfID {
		t.Fatalf("self %q, want %s: %+v", l.Self, selfID, l.Sessions)
	}
	for _, s := range l.Sessions {
		if s.Self != (s.ID == selfID) {
			t.Errorf("%s: self %v", s.ID, s.Self)
		}
	}
	var s MCPSession
	ok(t, c.call(t, "show_session", map[string]any{"id": selfID}), &s)
	if !s.Self {
		t.Fatalf("show_session of the caller's session: self not marked")
	}

	// The sleep as the caller: its session is the one refused.
	c = connectMCPWith(t, e.Socket, false, func(m *mcpServer) { m.ancestry = []proc.Identity{sleeper} })
	for _, tool := range []string{"stop_session", "send_prompt"} {
		args := map[string]any{"id": sleeperID}
		if tool == "send_prompt" {
			args["prompt"] = "hi"
		}
		msg := toolError(t, c.call(t, tool, args))
		if !strings.Contains(msg, "your own session") || !strings.Contains(msg, "self: true") {
			t.Errorf("%s on self: %s", tool, msg)
		}
	}
	if got := e.Show(sleeperID); got.Status != session.StatusRunning {
		t.Fatalf("the caller's session was acted on: %s", got.Status)
	}
	// With self: true the send goes to sessiond, which refuses it for
	// its own reason (no pane to type into), not as the caller's own.
	msg := toolError(t, c.call(t, "send_prompt", map[string]any{"id": sleeperID, "prompt": "hi", "self": true}))
	if strings.Contains(msg, "your own session") || !strings.Contains(msg, "[cannot_type]") {
		t.Errorf("send with self: true: %s", msg)
	}
	// An action on another session names the caller's session as origin.
	var stop actionOut
	ok(t, c.call(t, "stop_session", map[string]any{"id": runningID}), &stop)
	if stop.Self || !stop.Applied {
		t.Errorf("stop of another session: %+v", stop)
	}
	out, _, _ := e.Ctl("events")
	if !strings.Contains(out, "(by session "+sleeperID+")") {
		t.Errorf("events do not name the caller's session:\n%s", out)
	}
}

// A sessiond that is not there, or goes away during a wait: an error
// with the reason, never a hang.
func TestMCPDaemonDown(t *testing.T) {
	dir := t.TempDir()
	c := connectMCP(t, dir+"/none.sock", false)
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"list_sessions", nil},
		{"show_session", map[string]any{"id": runningID}},
		{"wait_for_session", map[string]any{"id": runningID, "until": "idle"}},
		{"stop_session", map[string]any{"id": runningID}},
	} {
		if msg := toolError(t, c.call(t, tc.tool, tc.args)); !strings.Contains(msg, "sessiond is not reachable") {
			t.Errorf("%s: %s", tc.tool, msg)
		}
	}

	e := daemontest.NewEnv(t)
	_, owner := daemontest.StartOwner(t)
	e.Seed(&session.Record{ID: runningID, Agent: "claude", Status: session.StatusRunning, Activity: session.ActivityIdle,
		Owner: &owner, Cwd: e.Home, CreatedAt: time.Now()})
	d := e.StartDaemon()
	c = connectMCP(t, e.Socket, false)
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		done <- c.call(t, "wait_for_session", map[string]any{"id": runningID, "until": "stopped", "timeout_seconds": 600})
	}()
	time.Sleep(500 * time.Millisecond)
	d.Kill()
	select {
	case r := <-done:
		if msg := toolError(t, r); !strings.Contains(msg, "sessiond stopped answering") || !strings.Contains(msg, "not reachable") {
			t.Errorf("wait when sessiond went away: %s", msg)
		}
	case <-time.After(mcpDownGrace + 20*time.Second):
		t.Fatal("wait_for_session hangs after sessiond went away")
	}
}

// Two agents that stop the same session at once: sessiond lets one act at
// a time, and the second, rechecking once it may act, finds no owner left
// to signal. A session whose owner died a moment before the call (the
// tracker has not noticed yet: its record still says running) is not
// signalled either: the owner is probed right before.
func TestMCPActsOnceAndOnlyOnTheLiveOwner(t *testing.T) {
	w := newWorld(t)
	a := connectMCP(t, w.Socket, false)
	b := connectMCP(t, w.Socket, false)

	results := make([]*mcp.CallToolResult, 2)
	var wg sync.WaitGroup
	for i, c := range []*mcpClient{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = c.call(t, "stop_session", map[string]any{"id": victimID, "timeout_seconds": 5})
		}()
	}
	wg.Wait()
	applied, refused := 0, 0
	for _, res := range results {
		if res.IsError {
			if msg := text(res); !strings.Contains(msg, "is not running") || !strings.Contains(msg, "[not_running]") {
				t.Errorf("the second stop: %s", msg)
			}
			refused++
			continue
		}
		var out actionOut
		ok(t, res, &out)
		if !out.Applied {
			t.Errorf("stop not applied: %+v", out)
		}
		applied++
	}
	if applied != 1 || refused != 1 {
		t.Fatalf("two stops at once: %d applied, %d refused; want one each", applied, refused)
	}

	// The running session's owner dies; the record still says running.
	daemontest.KillOwner(t, w.owner)
	msg := toolError(t, a.call(t, "stop_session", map[string]any{"id": runningID}))
	if !strings.Contains(msg, "is not running") {
		t.Errorf("stop of a session whose owner just died: %s", msg)
	}
	msg = toolError(t, a.call(t, "send_prompt", map[string]any{"id": runningID, "prompt": "hello"}))
	if strings.Contains(msg, "delivered") {
		t.Errorf("send to a session whose owner just died: %s", msg)
	}
}
