package fakemodel

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// sseEvent is one server-sent event: its name (empty for OpenAI's unnamed
// events) and its data.
type sseEvent struct {
	Name string
	Data string
}

func post(t *testing.T, url string, header map[string]string, body any) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func readSSE(t *testing.T, resp *http.Response) []sseEvent {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q, want text/event-stream", ct)
	}
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Name != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	return out
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return m
}

var anthropicHeaders = map[string]string{"x-api-key": "sk-ant-secret", "anthropic-version": "2023-06-01"}

func bashTool() []any {
	return []any{map[string]any{"name": "Bash", "description": "run", "input_schema": map[string]any{"type": "object"}}}
}

// The Anthropic stream a tool call makes, event by event, as Claude Code
// parses it; the follow-up with the tool result gets the next scripted
// reply, and both requests are recorded with their conversation.
func TestAnthropicStreamingToolCallThenText(t *testing.T) {
	s := New(t)
	s.Enqueue(RunCommand("python3 -c 'print(1)'", "print one", 5*time.Minute), Say("All done."))

	resp := post(t, s.URL+"/v1/messages?beta=true", anthropicHeaders, map[string]any{
		"model": "claude-sonnet-4-5", "stream": true, "max_tokens": 100, "tools": bashTool(),
		"system":   []any{map[string]any{"type": "text", "text": "You are Claude Code"}},
		"messages": []any{map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "run it"}}}},
	})
	evs := readSSE(t, resp)
	var names []string
	for _, e := range evs {
		names = append(names, e.Name)
		if typ := decode(t, e.Data)["type"]; typ != e.Name {
			t.Errorf("event %s carries type %v", e.Name, typ)
		}
	}
	want := "message_start ping content_block_start content_block_delta content_block_stop message_delta message_stop"
	if strings.Join(names, " ") != want {
		t.Fatalf("events %v, want %s", names, want)
	}
	block := decode(t, evs[2].Data)["content_block"].(map[string]any)
	if block["type"] != "tool_use" || block["name"] != "Bash" || !strings.HasPrefix(block["id"].(string), "toolu_") {
		t.Fatalf("tool_use block %v", block)
	}
	delta := decode(t, evs[3].Data)["delta"].(map[string]any)
	var input map[string]any
	if delta["type"] != "input_json_delta" || json.Unmarshal([]byte(delta["partial_json"].(string)), &input) != nil {
		t.Fatalf("delta %v", delta)
	}
	if input["command"] != "python3 -c 'print(1)'" || input["timeout"] != float64(300000) {
		t.Fatalf("tool input %v", input)
	}
	if stop := decode(t, evs[5].Data)["delta"].(map[string]any)["stop_reason"]; stop != "tool_use" {
		t.Fatalf("stop_reason %v", stop)
	}
	callID := block["id"].(string)

	resp = post(t, s.URL+"/v1/messages", anthropicHeaders, map[string]any{
		"model": "claude-sonnet-4-5", "stream": true, "tools": bashTool(),
		"messages": []any{
			map[string]any{"role": "user", "content": "run it"},
			map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": callID, "name": "Bash", "input": input}}},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": callID, "content": "1"}}},
		},
	})
	evs = readSSE(t, resp)
	var text strings.Builder
	for _, e := range evs {
		if e.Name == "content_block_delta" {
			text.WriteString(decode(t, e.Data)["delta"].(map[string]any)["text"].(string))
		}
		if e.Name == "message_delta" && decode(t, e.Data)["delta"].(map[string]any)["stop_reason"] != "end_turn" {
			t.Errorf("final stop_reason: %s", e.Data)
		}
	}
	if text.String() != "All done." {
		t.Fatalf("text %q", text.String())
	}

	turns := s.Turns()
	if len(turns) != 2 || s.pending() != 0 {
		t.Fatalf("%d turns recorded, %d replies pending", len(turns), s.pending())
	}
	first, second := turns[0], turns[1]
	if first.API != Anthropic || first.Query != "beta=true" || first.System != "You are Claude Code" || !first.Stream ||
		len(first.Tools) != 1 || first.LastUserText() != "run it" {
		t.Errorf("first request recorded as %+v", first)
	}
	if first.Reply == nil || len(first.Reply.ToolCalls) != 1 || first.Reply.ToolCalls[0].ID != callID || first.Reply.ToolCalls[0].Name != "Bash" {
		t.Errorf("first reply recorded as %+v, streamed id %s", first.Reply, callID)
	}
	if got := first.Header.Get("X-Api-Key"); got != "REDACTED" {
		t.Errorf("the API key was recorded as %q", got)
	}
	if len(second.Messages) != 3 || second.Messages[1].ToolCalls[0].ID != callID || second.Messages[2].ToolResults[0].Content != "1" {
		t.Errorf("second conversation %+v", second.Messages)
	}
	if txt := second.Text(); !strings.Contains(txt, "print(1)") || !strings.Contains(txt, "run it") {
		t.Errorf("Text() of the follow-up lacks the history:\n%s", txt)
	}
}

// Side requests (no tools: title generation, quota probes) and token
// counting never consume the script.
func TestAuxRequestsDoNotConsumeTheScript(t *testing.T) {
	s := New(t)
	s.Enqueue(Say("the scripted turn"))
	resp := post(t, s.URL+"/v1/messages", anthropicHeaders, map[string]any{
		"model": "claude-haiku-4-5", "max_tokens": 50,
		"system":   "Generate a concise title. Return JSON with a title field.",
		"messages": []any{map[string]any{"role": "user", "content": "hello"}},
	})
	var msg map[string]any
	json.NewDecoder(resp.Body).Decode(&msg)
	content := msg["content"].([]any)[0].(map[string]any)
	if !strings.Contains(content["text"].(string), `"title"`) || msg["stop_reason"] != "end_turn" {
		t.Fatalf("title reply %v", msg)
	}
	resp = post(t, s.URL+"/v1/messages/count_tokens", anthropicHeaders, map[string]any{"messages": []any{}})
	var ct map[string]any
	json.NewDecoder(resp.Body).Decode(&ct)
	if ct["input_tokens"] == nil {
		t.Fatalf("count_tokens answered %v", ct)
	}
	if s.pending() != 1 || len(s.Turns()) != 0 {
		t.Fatalf("side requests took the script: %d pending, %d turns", s.pending(), len(s.Turns()))
	}
	kinds := []Kind{}
	for _, r := range s.requests() {
		kinds = append(kinds, r.Kind)
	}
	if len(kinds) != 2 || kinds[0] != KindAux || kinds[1] != KindCountTokens {
		t.Fatalf("kinds %v", kinds)
	}
}

// OpenAI chat completions, streamed as the AI SDK's openai-compatible
// provider reads them: a tool_calls delta, finish_reason tool_calls, a
// usage chunk when asked, then [DONE]; the title request is a side request.
func TestOpenAIStreamingToolCall(t *testing.T) {
	s := New(t)
	s.Enqueue(RunCommand("echo hi", "say hi", 0))
	tools := []any{map[string]any{"type": "function", "function": map[string]any{"name": "bash", "parameters": map[string]any{}}}}

	resp := post(t, s.URL+"/v1/chat/completions", map[string]string{"Authorization": "Bearer secret"}, map[string]any{
		"model": "fake-model", "stream": true,
		"messages": []any{
			map[string]any{"role": "system", "content": "You are a title generator. You output ONLY a thread title."},
			map[string]any{"role": "user", "content": "hello"},
		},
	})
	evs := readSSE(t, resp)
	if len(evs) == 0 || evs[len(evs)-1].Data != "[DONE]" || !strings.Contains(evs[1].Data, `"content":"Fake session"`) {
		t.Fatalf("title stream %v", evs)
	}
	resp = post(t, s.URL+"/v1/chat/completions", nil, map[string]any{
		"model": "fake-model", "stream": true, "tools": tools, "stream_options": map[string]any{"include_usage": true},
		"messages": []any{
			map[string]any{"role": "system", "content": "You are opencode"},
			map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "say hi"}}},
		},
	})
	evs = readSSE(t, resp)
	if evs[len(evs)-1].Data != "[DONE]" {
		t.Fatalf("no [DONE]: %v", evs)
	}
	var name, args, finish, callID string
	usage := false
	for _, e := range evs[:len(evs)-1] {
		if e.Name != "" {
			t.Errorf("OpenAI events are unnamed, got %q", e.Name)
		}
		c := decode(t, e.Data)
		if c["usage"] != nil {
			usage = true
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			if f, ok := ch["finish_reason"].(string); ok {
				finish = f
			}
			d := ch["delta"].(map[string]any)
			for _, tc := range asSlice(d["tool_calls"]) {
				tc := tc.(map[string]any)
				if id, ok := tc["id"].(string); ok {
					callID = id
				}
				f := tc["function"].(map[string]any)
				if n, ok := f["name"].(string); ok {
					name = n
				}
				args += f["arguments"].(string)
			}
		}
	}
	var in map[string]any
	if json.Unmarshal([]byte(args), &in) != nil || in["command"] != "echo hi" || name != "bash" || finish != "tool_calls" || !usage {
		t.Fatalf("tool call %q %q finish %q usage %v", name, args, finish, usage)
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[0].Kind != KindAux || reqs[1].Kind != KindTurn || reqs[1].API != OpenAI {
		t.Fatalf("recorded %d requests: %+v", len(reqs), reqs)
	}
	if reqs[1].System != "You are opencode" || reqs[1].LastUserText() != "say hi" || reqs[1].Reply.ToolCalls[0].ID != callID {
		t.Errorf("turn recorded as %+v", reqs[1])
	}
	if reqs[0].Header.Get("Authorization") != "REDACTED" {
		t.Errorf("the bearer token was recorded")
	}
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// Non-streamed answers, scripted errors, the model list, unknown routes,
// the handler, the fallback with fresh ids, and waitTurns.
func TestNonStreamedErrorsModelsAndWaiting(t *testing.T) {
	s := New(t)
	s.Enqueue(Reply{Status: 529})
	resp := post(t, s.URL+"/v1/messages", anthropicHeaders, map[string]any{"tools": bashTool(), "messages": []any{}})
	if resp.StatusCode != 529 {
		t.Fatalf("scripted 529 answered %d", resp.StatusCode)
	}
	var e map[string]any
	json.NewDecoder(resp.Body).Decode(&e)
	if e["error"].(map[string]any)["type"] != "overloaded_error" {
		t.Fatalf("error body %v", e)
	}

	s.setFallback(RunCommand("true", "", 0))
	ids := map[string]bool{}
	for i := 0; i < 2; i++ {
		resp = post(t, s.URL+"/v1/chat/completions", nil, map[string]any{"model": "m", "tools": []any{}, "messages": []any{map[string]any{"role": "user", "content": "x"}}})
		var c map[string]any
		json.NewDecoder(resp.Body).Decode(&c)
		calls := c["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["tool_calls"].([]any)
		ids[calls[0].(map[string]any)["id"].(string)] = true
	}
	if len(ids) != 2 {
		t.Fatalf("the fallback reused a tool call id: %v", ids)
	}

	s.SetHandler(func(r *Request) (Reply, bool) {
		return Say("handled: " + r.LastUserText()), strings.HasPrefix(r.LastUserText(), "h:")
	})
	resp = post(t, s.URL+"/v1/chat/completions", nil, map[string]any{"model": "m", "messages": []any{map[string]any{"role": "user", "content": "h:42"}}})
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "handled: h:42") {
		t.Fatalf("handler reply %s", body)
	}

	r, err := http.Get(s.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	json.NewDecoder(r.Body).Decode(&list)
	r.Body.Close()
	if len(list["data"].([]any)) != len(defaultModels) || list["object"] != "list" {
		t.Fatalf("models %v", list)
	}
	r, _ = http.Get(s.URL + "/v1/nope")
	r.Body.Close()
	if r.StatusCode != 404 || s.requests()[len(s.requests())-1].Kind != KindOther {
		t.Fatalf("unknown route: %d", r.StatusCode)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go func() {
		r, err := http.Post(s.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","tools":[],"messages":[]}`))
		if err == nil {
			r.Body.Close()
		}
	}()
	if err := s.waitTurns(ctx, 5); err != nil {
		t.Fatalf("waitTurns(5): %v", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	if err := s.waitTurns(short, 99); err == nil {
		t.Fatal("waitTurns(99) returned without 99 turns")
	}
}

// A Delay holds the reply after the stream started, and closing the server
// cuts a stream that is still waiting.
func TestDelayAndClose(t *testing.T) {
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	s.Enqueue(Reply{Text: "slow", Delay: 10 * time.Second})
	start := time.Now()
	resp := post(t, s.URL+"/v1/messages", anthropicHeaders, map[string]any{"stream": true, "tools": bashTool(), "messages": []any{}})
	sc := bufio.NewScanner(resp.Body)
	sc.Scan() // event: message_start arrives before the delay
	if !strings.Contains(sc.Text(), "message_start") {
		t.Fatalf("first line %q", sc.Text())
	}
	go func() { time.Sleep(100 * time.Millisecond); s.stop() }()
	io.Copy(io.Discard, resp.Body)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("stop did not cut the delayed stream (%s)", d)
	}
}
