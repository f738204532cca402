// Package fakemodel is a scripted fake LLM server on 127.0.0.1 for tests
// that drive the real agent CLIs offline: Claude Code talks the Anthropic
// Messages API to it (ANTHROPIC_BASE_URL), OpenCode the OpenAI
// chat-completions API (an @ai-sdk/openai-compatible provider whose baseURL
// is URL+"/v1"), Codex the OpenAI Responses API (a model provider with
// wire_api = "responses" and base_url URL+"/v1").
//
// A test scripts the conversation's replies in order (Enqueue: "run this
// command", "say this"), or answers each request with a function
// (SetHandler), and afterwards asserts on what the agent sent: every
// request is recorded with its method, path, headers (secrets redacted) and
// decoded body, with the conversation normalized across both APIs
// (Request.Messages, Request.Text) so a test can check, say, that a resumed
// session carried its earlier turns.
//
// Routes (every API on one server):
//
//	POST /v1/messages[?beta=true]        Anthropic Messages, streaming SSE or not
//	POST /v1/messages/count_tokens       Anthropic token counting
//	POST /v1/chat/completions            OpenAI chat completions, streaming or not
//	POST /v1/responses                   OpenAI Responses, streaming or not
//	POST /v1beta/models/{m}:{method}     Gemini generateContent, streamGenerateContent (SSE), countTokens
//	GET  /v1/models[/{id}]               a model list both clients accept
//	anything else                        404 with an error body, recorded
//
// Requests that are not the conversation itself — Claude Code's title and
// topic calls on its small model, quota probes, token counting — are told
// apart (Request.Kind) and answered by Server.Aux without consuming the
// script, so a script lists only the turns a test cares about.
package fakemodel

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// API names the wire protocol a request used.
type API string

// The protocols the server speaks.
const (
	Anthropic API = "anthropic"
	OpenAI    API = "openai"
	Responses API = "responses"
)

// Kind says what a request was for, so the script is consumed only by the
// conversation's own turns.
type Kind string

// Request kinds.
const (
	// KindTurn is a conversation turn: a request that offers tools, or any
	// request the server cannot tell to be auxiliary. It consumes the script.
	KindTurn Kind = "turn"
	// KindAux is a side request (title generation, a one-token quota probe,
	// a request without tools on the agent's small model). Answered by Aux.
	KindAux Kind = "aux"
	// KindCountTokens is POST /v1/messages/count_tokens.
	KindCountTokens Kind = "count_tokens"
	// KindModels is GET /v1/models or /v1/models/{id}.
	KindModels Kind = "models"
	// KindOther is any other route (answered 404).
	KindOther Kind = "other"
)

// ToolCall is one tool call the model makes, or one the agent reports back
// in a later request's history.
type ToolCall struct {
	// ID is the call id; generated ("toolu_…" / "call_…") when empty.
	ID string
	// Name is the tool's name. Empty means the agent's shell tool: the
	// request's tool whose name is "bash" in any case (Claude Code's
	// "Bash", OpenCode's "bash"), else Codex's "exec_command".
	Name string
	// Input is the tool's arguments.
	Input map[string]any
	// Namespace is the Responses API namespace of the tool, "" for none
	// (Codex offers each MCP server's tools in one, "mcp__<server>").
	Namespace string
}

// Reply is what the model answers to one request: text, tool calls, or an
// HTTP error.
type Reply struct {
	// Text is the assistant's text, sent before any tool call.
	Text string
	// ToolCalls are made after the text; with any, the stop reason is
	// tool_use (Anthropic) / tool_calls (OpenAI).
	ToolCalls []ToolCall
	// Status, when not 0 or 200, answers with this HTTP status and an
	// error body (for example 529 overloaded) instead of a message.
	Status int
	// Delay holds the reply back this long after the stream started (after
	// message_start / the role chunk), to simulate a slow model.
	Delay time.Duration
}

// Say is a reply with only text: a final answer that ends the turn.
func Say(text string) Reply { return Reply{Text: text} }

// RunCommand is a reply that runs command with the agent's shell tool.
// timeout, if not zero, is passed as the tool's timeout in milliseconds
// (both Claude Code's Bash and OpenCode's bash take "timeout" in ms), so a
// long command is not cut at the tool's default (2 minutes in both).
func RunCommand(command, description string, timeout time.Duration) Reply {
	in := map[string]any{"command": command, "description": description}
	if timeout > 0 {
		in["timeout"] = timeout.Milliseconds()
	}
	return Reply{ToolCalls: []ToolCall{{Input: in}}}
}

// Message is one message of a request's conversation, normalized across the
// two APIs.
type Message struct {
	// Role is system, user, assistant or tool (OpenAI tool results).
	Role string
	// Text is the message's text blocks joined by newlines.
	Text string
	// ToolCalls are the assistant's tool calls (tool_use / tool_calls).
	ToolCalls []ToolCall
	// ToolResults are results sent back (tool_result blocks / tool messages).
	ToolResults []ToolResult
}

// ToolResult is a tool's result the agent sent back to the model.
type ToolResult struct {
	ID      string
	Content string
	IsError bool
}

// Request is one recorded request.
type Request struct {
	// Seq numbers requests from 1 in arrival order.
	Seq  int
	Time time.Time
	API  API
	Kind Kind
	// Method, Path and Query are the HTTP request line's parts.
	Method, Path, Query string
	// Header is the request's headers with secrets replaced by "REDACTED".
	Header http.Header
	// Raw is the body as sent; Body the body decoded as JSON (nil if it
	// was not JSON).
	Raw  []byte
	Body map[string]any
	// Model, Stream, Tools (names) and System come from the body.
	Model  string
	Stream bool
	Tools  []string
	System string
	// Messages is the conversation the request carried.
	Messages []Message
	// Reply is what the server answered (for KindTurn and KindAux).
	Reply *Reply
}

// Text is everything the request's conversation says, system prompt
// excluded: message text, tool inputs (as JSON) and tool results, one per
// line. Tests use it to check that a turn carried earlier history.
func (r *Request) Text() string {
	var b strings.Builder
	for _, m := range r.Messages {
		if m.Text != "" {
			b.WriteString(m.Text)
			b.WriteByte('\n')
		}
		for _, c := range m.ToolCalls {
			in, _ := json.Marshal(c.Input)
			fmt.Fprintf(&b, "%s %s\n", c.Name, in)
		}
		for _, tr := range m.ToolResults {
			b.WriteString(tr.Content)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// LastUserText is the text of the conversation's last user message.
func (r *Request) LastUserText() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" && r.Messages[i].Text != "" {
			return r.Messages[i].Text
		}
	}
	return ""
}

// Handler answers a conversation turn. ok false leaves the request to the
// script queue.
type Handler func(req *Request) (reply Reply, ok bool)

// Server is a running fake model server.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:<port>, without /v1:
	// what ANTHROPIC_BASE_URL takes. OpenAI clients want URL+"/v1".
	URL string
	// Models are the model ids GET /v1/models lists.
	Models []string

	srv *httptest.Server

	mu       sync.Mutex
	reqs     []*Request
	queue    []Reply
	handler  Handler
	fallback Reply
	aux      func(*Request) Reply
	changed  chan struct{} // closed and replaced on every new request
}

// defaultModels are listed by GET /v1/models unless Server.Models is set
// before the first request.
var defaultModels = []string{"claude-sonnet-4-5", "claude-haiku-4-5", "fake-model"}

// start starts a server on 127.0.0.1 on a free port. stop stops it.
func start() (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakemodel: listen on 127.0.0.1: %w", err)
	}
	s := &Server{
		Models:   append([]string(nil), defaultModels...),
		fallback: Say("Done."),
		changed:  make(chan struct{}),
	}
	s.aux = s.defaultAux
	s.srv = &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(s.serve)}}
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

// New starts a server for a test and stops it when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s, err := start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.stop)
	return s
}

// stop stops the server, cutting open streams.
func (s *Server) stop() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// OpenAIBaseURL is the base URL an OpenAI-compatible client takes.
func (s *Server) OpenAIBaseURL() string { return s.URL + "/v1" }

// Enqueue appends replies to the script: each conversation turn takes the
// next one. When the script is empty, turns get the fallback (Say("Done.")
// unless setFallback changed it).
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// pending is the number of scripted replies not yet taken.
func (s *Server) pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// SetHandler answers turns with h before the script is consulted; h returns
// ok false to leave a request to the script. nil removes it.
func (s *Server) SetHandler(h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// setFallback sets the reply turns get when the script is empty.
func (s *Server) setFallback(r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fallback = r
}

// defaultAux answers side requests. OpenCode's title generator wants the
// bare title (it stores the answer verbatim); Claude Code's asks for JSON
// {"title": …}; other side requests take any short text.
func (s *Server) defaultAux(r *Request) Reply {
	if r.API == OpenAI || r.API == Responses {
		return Say("Fake session")
	}
	if strings.Contains(strings.ToLower(r.System), "title") || strings.Contains(strings.ToLower(r.System), "json") {
		return Say(`{"title": "Fake session", "isNewTopic": false}`)
	}
	return Say("ok")
}

// requests returns every request recorded so far, in order.
func (s *Server) requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

// Turns returns the recorded conversation turns (KindTurn), in order.
func (s *Server) Turns() []*Request {
	var out []*Request
	for _, r := range s.requests() {
		if r.Kind == KindTurn {
			out = append(out, r)
		}
	}
	return out
}

// waitFor blocks until a recorded request satisfies match (requests already
// recorded count) and returns it, or fails when ctx ends.
func (s *Server) waitFor(ctx context.Context, match func(*Request) bool) (*Request, error) {
	seen := 0
	for {
		s.mu.Lock()
		reqs, ch := s.reqs[seen:], s.changed
		s.mu.Unlock()
		for _, r := range reqs {
			if match(r) {
				return r, nil
			}
		}
		seen += len(reqs)
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("fakemodel: no matching request among %d: %w", seen, ctx.Err())
		}
	}
}

// waitTurns blocks until n conversation turns have been answered.
func (s *Server) waitTurns(ctx context.Context, n int) error {
	count := 0
	_, err := s.waitFor(ctx, func(r *Request) bool {
		if r.Kind == KindTurn {
			count++
		}
		return count >= n
	})
	return err
}

// record stores r, numbers it and wakes waitFor.
func (s *Server) record(r *Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Seq = len(s.reqs) + 1
	s.reqs = append(s.reqs, r)
	close(s.changed)
	s.changed = make(chan struct{})
}

// next picks the reply for a turn or side request.
func (s *Server) next(r *Request) Reply {
	s.mu.Lock()
	h, aux := s.handler, s.aux
	s.mu.Unlock()
	if r.Kind == KindAux {
		return aux(r)
	}
	if h != nil {
		if rep, ok := h(r); ok {
			return rep
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return s.fallback
	}
	rep := s.queue[0]
	s.queue = s.queue[1:]
	return rep
}

const maxBody = 64 << 20

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	raw, _ := io.ReadAll(io.LimitReader(hr.Body, maxBody))
	r := &Request{
		Time: time.Now(), Method: hr.Method, Path: hr.URL.Path, Query: hr.URL.RawQuery,
		Header: redact(hr.Header), Raw: raw,
	}
	if len(raw) > 0 {
		var body map[string]any
		if json.Unmarshal(raw, &body) == nil {
			r.Body = body
		}
	}
	path := strings.TrimSuffix(hr.URL.Path, "/")
	switch {
	case hr.Method == http.MethodPost && path == "/v1/messages":
		r.API = Anthropic
		decodeAnthropic(r)
		r.Kind = classifyAnthropic(r)
		rep := resolve(s.next(r), r.Tools, "toolu_", "Bash")
		r.Reply = &rep
		s.record(r)
		s.replyAnthropic(w, hr, r, rep)
	case hr.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		r.API, r.Kind = Anthropic, KindCountTokens
		decodeAnthropic(r)
		s.record(r)
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": estimateTokens(raw)})
	case hr.Method == http.MethodPost && path == "/v1/chat/completions":
		r.API = OpenAI
		decodeOpenAI(r)
		r.Kind = classifyOpenAI(r)
		rep := resolve(s.next(r), r.Tools, "call_", "bash")
		r.Reply = &rep
		s.record(r)
		s.replyOpenAI(w, hr, r, rep)
	case hr.Method == http.MethodPost && path == "/v1/responses":
		r.API = Responses
		decodeResponses(r)
		r.Kind = classifyResponses(r)
		rep := resolve(s.next(r), r.Tools, "call_", codexShell)
		r.Reply = &rep
		s.record(r)
		s.replyResponses(w, hr, r, rep)
	case hr.Method == http.MethodPost && strings.HasPrefix(path, "/v1beta/models/"):
		model, method, _ := geminiRoute(path)
		s.serveGemini(w, hr, r, model, method)
	case hr.Method == http.MethodGet && (path == "/v1/models" || strings.HasPrefix(path, "/v1/models/")):
		r.Kind = KindModels
		if hr.Header.Get("anthropic-version") != "" || hr.Header.Get("x-api-key") != "" {
			r.API = Anthropic
		} else {
			r.API = OpenAI
		}
		s.record(r)
		s.models(w, strings.TrimPrefix(strings.TrimPrefix(path, "/v1/models"), "/"))
	default:
		r.Kind = KindOther
		s.record(r)
		writeJSON(w, http.StatusNotFound, map[string]any{
			"type":  "error",
			"error": map[string]any{"type": "not_found_error", "message": "fakemodel: no route " + hr.Method + " " + hr.URL.Path},
		})
	}
}

// models answers GET /v1/models with one object both clients accept: the
// Anthropic list ({data:[{type,id,display_name,created_at}],has_more,…})
// and the OpenAI list ({object:"list",data:[{id,object,created,owned_by}]}).
func (s *Server) models(w http.ResponseWriter, id string) {
	s.mu.Lock()
	ids := append([]string(nil), s.Models...)
	s.mu.Unlock()
	one := func(id string) map[string]any {
		return map[string]any{
			"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z",
			"object": "model", "created": 1735689600, "owned_by": "fakemodel",
		}
	}
	if id != "" {
		writeJSON(w, http.StatusOK, one(id))
		return
	}
	data := []map[string]any{}
	for _, id := range ids {
		data = append(data, one(id))
	}
	body := map[string]any{"object": "list", "data": data, "has_more": false}
	if len(ids) > 0 {
		body["first_id"], body["last_id"] = ids[0], ids[len(ids)-1]
	}
	writeJSON(w, http.StatusOK, body)
}

// secretHeader says whether a header's value must not be recorded.
func secretHeader(name string) bool {
	n := strings.ToLower(name)
	return n == "authorization" || n == "proxy-authorization" || n == "cookie" ||
		strings.Contains(n, "key") || strings.Contains(n, "token") || strings.Contains(n, "secret")
}

func redact(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if secretHeader(k) {
			out[k] = []string{"REDACTED"}
			continue
		}
		out[k] = append([]string(nil), v...)
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func estimateTokens(body []byte) int { return len(body)/4 + 1 }

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// str reads a string field of a decoded JSON object.
func str(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}

// resolve returns a copy of rep whose tool calls all have an id (prefix
// plus random hex) and a tool name, before the request is recorded: a
// recorded Reply is never written again, and a reply used for several
// requests (the fallback, a handler's) gets fresh ids each time.
func resolve(rep Reply, offered []string, prefix, defTool string) Reply {
	if len(rep.ToolCalls) == 0 {
		return rep
	}
	calls := make([]ToolCall, len(rep.ToolCalls))
	for i, c := range rep.ToolCalls {
		if c.ID == "" {
			c.ID = newID(prefix)
		}
		c.Name = toolName(c, offered, defTool)
		calls[i] = c
	}
	rep.ToolCalls = calls
	return rep
}

// toolName resolves a call's tool name against the tools the request
// offered: empty means the shell tool.
func toolName(c ToolCall, offered []string, def string) string {
	if c.Name != "" {
		return c.Name
	}
	for _, t := range offered {
		if strings.EqualFold(t, "bash") {
			return t
		}
	}
	return def
}

// sse writes server-sent events and flushes after each.
type sse struct {
	w http.ResponseWriter
	f http.Flusher
}

func newSSE(w http.ResponseWriter) *sse {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	f, _ := w.(http.Flusher)
	return &sse{w: w, f: f}
}

func (e *sse) event(name string, v any) {
	var buf bytes.Buffer
	if name != "" {
		fmt.Fprintf(&buf, "event: %s\n", name)
	}
	b, _ := json.Marshal(v)
	fmt.Fprintf(&buf, "data: %s\n\n", b)
	e.w.Write(buf.Bytes())
	if e.f != nil {
		e.f.Flush()
	}
}

func (e *sse) raw(s string) {
	io.WriteString(e.w, s)
	if e.f != nil {
		e.f.Flush()
	}
}

// wait sleeps d unless the client went away first.
func wait(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// contentText flattens a message's content as both APIs send it: a string,
// or an array of blocks of which the {type:"text",text} ones count.
func contentText(v any) string {
	switch c := v.(type) {
	case string:
		return c
	case []any:
		var out []string
		for _, blk := range c {
			if bm, ok := blk.(map[string]any); ok && str(bm, "type") == "text" {
				out = append(out, str(bm, "text"))
			}
		}
		return strings.Join(out, "\n")
	}
	return ""
}
