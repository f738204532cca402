package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// decodeOpenAI fills the request's model, stream flag, tools, system prompt
// and messages from a chat-completions body.
func decodeOpenAI(r *Request) {
	b := r.Body
	if b == nil {
		return
	}
	r.Model = str(b, "model")
	r.Stream, _ = b["stream"].(bool)
	if tools, ok := b["tools"].([]any); ok {
		for _, t := range tools {
			if m, ok := t.(map[string]any); ok {
				if f, ok := m["function"].(map[string]any); ok {
					r.Tools = append(r.Tools, str(f, "name"))
				}
			}
		}
	}
	msgs, _ := b["messages"].([]any)
	var system []string
	for _, m := range msgs {
		mm, ok := m.(map[string]any)
		if !ok {
			continue
		}
		msg := Message{Role: str(mm, "role"), Text: contentText(mm["content"])}
		if calls, ok := mm["tool_calls"].([]any); ok {
			for _, c := range calls {
				cm, _ := c.(map[string]any)
				f, _ := cm["function"].(map[string]any)
				var in map[string]any
				json.Unmarshal([]byte(str(f, "arguments")), &in)
				msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: str(cm, "id"), Name: str(f, "name"), Input: in})
			}
		}
		if msg.Role == "tool" {
			msg.ToolResults = []ToolResult{{ID: str(mm, "tool_call_id"), Content: msg.Text}}
			msg.Text = ""
		}
		if msg.Role == "system" || msg.Role == "developer" {
			system = append(system, msg.Text)
		}
		r.Messages = append(r.Messages, msg)
	}
	r.System = strings.Join(system, "\n")
}

// classifyOpenAI: a request that offers tools is a turn. OpenCode's title
// generation sends no tools; so does a plain completion from a test, which
// then counts as a turn when it is not a title request.
func classifyOpenAI(r *Request) Kind {
	if len(r.Tools) > 0 {
		return KindTurn
	}
	sys := strings.ToLower(r.System)
	if strings.Contains(sys, "title") {
		return KindAux
	}
	return KindTurn
}

// replyOpenAI answers POST /v1/chat/completions. Streamed: a role chunk, a
// content chunk, per tool call a chunk with id/name and one with the
// arguments, a finish chunk (finish_reason tool_calls or stop), a usage
// chunk when stream_options.include_usage asked for it, then data: [DONE].
func (s *Server) replyOpenAI(w http.ResponseWriter, hr *http.Request, r *Request, rep Reply) {
	if openAIError(w, rep) {
		return
	}
	model := modelOf(r)
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	id := newID("chatcmpl-")
	created := time.Now().Unix()
	inTok := estimateTokens(r.Raw)
	outTok := len(rep.Text)/4 + 1
	usage := map[string]any{"prompt_tokens": inTok, "completion_tokens": outTok, "total_tokens": inTok + outTok}
	args := func(c ToolCall) string {
		in := c.Input
		if in == nil {
			in = map[string]any{}
		}
		b, _ := json.Marshal(in)
		return string(b)
	}
	if !r.Stream {
		wait(hr.Context(), rep.Delay)
		msg := map[string]any{"role": "assistant", "content": rep.Text}
		if len(rep.ToolCalls) > 0 {
			var calls []map[string]any
			for _, c := range rep.ToolCalls {
				calls = append(calls, map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": args(c)}})
			}
			msg["tool_calls"] = calls
		}
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
			"usage":   usage,
		})
		return
	}
	e := newSSE(w)
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	e.event("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	wait(hr.Context(), rep.Delay)
	if rep.Text != "" {
		e.event("", chunk(map[string]any{"content": rep.Text}, nil))
	}
	for i, c := range rep.ToolCalls {
		e.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}}}, nil))
		e.event("", chunk(map[string]any{"tool_calls": []any{map[string]any{
			"index": i, "function": map[string]any{"arguments": args(c)}}}}, nil))
	}
	e.event("", chunk(map[string]any{}, finish))
	if so, ok := r.Body["stream_options"].(map[string]any); ok {
		if inc, _ := so["include_usage"].(bool); inc {
			e.event("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created,
				"model": model, "choices": []any{}, "usage": usage})
		}
	}
	e.raw("data: [DONE]\n\n")
}

// openAIError answers a scripted HTTP error in the body both OpenAI APIs
// use, and reports whether it did.
func openAIError(w http.ResponseWriter, rep Reply) bool {
	if rep.Status == 0 || rep.Status == http.StatusOK {
		return false
	}
	writeJSON(w, rep.Status, map[string]any{"error": map[string]any{
		"message": "fakemodel: scripted error", "type": "server_error", "code": rep.Status}})
	return true
}

// modelOf is the model the request asked for, "fake-model" when none.
func modelOf(r *Request) string {
	if r.Model == "" {
		return "fake-model"
	}
	return r.Model
}
