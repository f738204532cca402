package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// decodeAnthropic fills the request's model, stream flag, tools, system
// prompt and messages from an Anthropic Messages body.
func decodeAnthropic(r *Request) {
	b := r.Body
	if b == nil {
		return
	}
	r.Model = str(b, "model")
	r.Stream, _ = b["stream"].(bool)
	if tools, ok := b["tools"].([]any); ok {
		for _, t := range tools {
			if m, ok := t.(map[string]any); ok {
				r.Tools = append(r.Tools, str(m, "name"))
			}
		}
	}
	r.System = contentText(b["system"])
	msgs, _ := b["messages"].([]any)
	for _, m := range msgs {
		mm, ok := m.(map[string]any)
		if !ok {
			continue
		}
		msg := Message{Role: str(mm, "role")}
		switch c := mm["content"].(type) {
		case string:
			msg.Text = c
		case []any:
			var texts []string
			for _, blk := range c {
				bm, ok := blk.(map[string]any)
				if !ok {
					continue
				}
				switch str(bm, "type") {
				case "text":
					texts = append(texts, str(bm, "text"))
				case "tool_use":
					in, _ := bm["input"].(map[string]any)
					msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: str(bm, "id"), Name: str(bm, "name"), Input: in})
				case "tool_result":
					isErr, _ := bm["is_error"].(bool)
					msg.ToolResults = append(msg.ToolResults, ToolResult{
						ID: str(bm, "tool_use_id"), Content: contentText(bm["content"]), IsError: isErr,
					})
				}
			}
			msg.Text = strings.Join(texts, "\n")
		}
		r.Messages = append(r.Messages, msg)
	}
}

// classifyAnthropic: a request that offers tools is a conversation turn;
// one without tools is a side request (Claude Code's title generation and
// one-token quota probe on its small model send none).
func classifyAnthropic(r *Request) Kind {
	if len(r.Tools) > 0 {
		return KindTurn
	}
	return KindAux
}

// anthropicBlocks turns a resolved reply into content blocks.
func anthropicBlocks(rep Reply) ([]map[string]any, string) {
	var blocks []map[string]any
	if rep.Text != "" || len(rep.ToolCalls) == 0 {
		blocks = append(blocks, map[string]any{"type": "text", "text": rep.Text})
	}
	for _, c := range rep.ToolCalls {
		in := c.Input
		if in == nil {
			in = map[string]any{}
		}
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": in})
	}
	stop := "end_turn"
	if len(rep.ToolCalls) > 0 {
		stop = "tool_use"
	}
	return blocks, stop
}

func anthropicError(w http.ResponseWriter, status int) {
	typ := map[int]string{
		400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
		404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
		500: "api_error", 529: "overloaded_error",
	}[status]
	if typ == "" {
		typ = "api_error"
	}
	writeJSON(w, status, map[string]any{
		"type": "error", "error": map[string]any{"type": typ, "message": "fakemodel: scripted " + typ},
	})
}

// replyAnthropic answers POST /v1/messages, streamed when the request asked
// for it: message_start, per block content_block_start / one delta
// (text_delta or input_json_delta) / content_block_stop, message_delta with
// the stop reason, message_stop.
func (s *Server) replyAnthropic(w http.ResponseWriter, hr *http.Request, r *Request, rep Reply) {
	if rep.Status != 0 && rep.Status != http.StatusOK {
		anthropicError(w, rep.Status)
		return
	}
	model := r.Model
	if model == "" {
		model = "fake-model"
	}
	blocks, stop := anthropicBlocks(rep)
	id := newID("msg_")
	inTok := estimateTokens(r.Raw)
	outTok := 1
	for _, b := range blocks {
		j, _ := json.Marshal(b)
		outTok += len(j) / 4
	}
	usage := map[string]any{"input_tokens": inTok, "output_tokens": outTok,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	if !r.Stream {
		wait(hr.Context(), rep.Delay)
		writeJSON(w, http.StatusOK, map[string]any{
			"id": id, "type": "message", "role": "assistant", "model": model,
			"content": blocks, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		})
		return
	}
	e := newSSE(w)
	e.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inTok, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}})
	e.event("ping", map[string]any{"type": "ping"})
	wait(hr.Context(), rep.Delay)
	for i, b := range blocks {
		switch b["type"] {
		case "text":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "text", "text": ""}})
			if t, _ := b["text"].(string); t != "" {
				e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
					"delta": map[string]any{"type": "text_delta", "text": t}})
			}
		case "tool_use":
			e.event("content_block_start", map[string]any{"type": "content_block_start", "index": i,
				"content_block": map[string]any{"type": "tool_use", "id": b["id"], "name": b["name"], "input": map[string]any{}}})
			in, _ := json.Marshal(b["input"])
			e.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": i,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(in)}})
		}
		e.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": i})
	}
	e.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": outTok}})
	e.event("message_stop", map[string]any{"type": "message_stop"})
}
