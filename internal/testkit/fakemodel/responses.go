package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Codex (0.169.0) speaks OpenAI's Responses API only (wire_api =
// "responses"): POST /v1/responses with stream:true. Its shell tool is
// exec_command, whose arguments are {"cmd", "yield_time_ms"}: a command
// still running after yield_time_ms (250-30000, default 10000) is left
// running in the background and the model is asked again.

// codexShell is the Responses API's shell tool as Codex offers it.
const codexShell = "exec_command"

// maxYield is the longest yield_time_ms Codex accepts.
const maxYield = 30 * time.Second

// decodeResponses fills the request's model, stream flag, tools, system
// prompt (instructions and developer messages) and conversation from a
// Responses API body, whose input is a list of items: messages,
// function_call and function_call_output.
func decodeResponses(r *Request) {
	b := r.Body
	if b == nil {
		return
	}
	r.Model = str(b, "model")
	r.Stream, _ = b["stream"].(bool)
	if tools, ok := b["tools"].([]any); ok {
		for _, t := range tools {
			if m, ok := t.(map[string]any); ok && str(m, "name") != "" {
				r.Tools = append(r.Tools, str(m, "name"))
			}
		}
	}
	var system []string
	if s := str(b, "instructions"); s != "" {
		system = append(system, s)
	}
	items, _ := b["input"].([]any)
	if s, ok := b["input"].(string); ok {
		items = []any{map[string]any{"type": "message", "role": "user", "content": s}}
	}
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			continue
		}
		switch typ := str(m, "type"); {
		case typ == "function_call":
			var in map[string]any
			json.Unmarshal([]byte(str(m, "arguments")), &in)
			r.Messages = append(r.Messages, Message{Role: "assistant",
				ToolCalls: []ToolCall{{ID: str(m, "call_id"), Name: str(m, "name"), Input: in, Namespace: str(m, "namespace")}}})
		case typ == "function_call_output":
			r.Messages = append(r.Messages, Message{Role: "tool",
				ToolResults: []ToolResult{{ID: str(m, "call_id"), Content: outputText(m["output"])}}})
		case typ == "message" || (typ == "" && str(m, "role") != ""):
			msg := Message{Role: str(m, "role"), Text: responsesText(m["content"])}
			if msg.Role == "system" || msg.Role == "developer" {
				system = append(system, msg.Text)
			}
			r.Messages = append(r.Messages, msg)
		}
	}
	r.System = strings.Join(system, "\n")
}

// responsesText flattens a Responses API message content: a string, or
// blocks of which input_text, output_text and text count.
func responsesText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	blocks, _ := v.([]any)
	var out []string
	for _, blk := range blocks {
		if bm, ok := blk.(map[string]any); ok {
			switch str(bm, "type") {
			case "input_text", "output_text", "text":
				out = append(out, str(bm, "text"))
			}
		}
	}
	return strings.Join(out, "\n")
}

// outputText is a function_call_output's output: a string, or content
// blocks.
func outputText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return responsesText(v)
}

// classifyResponses: a request that offers tools is a turn; one without
// tools that asks for a title is a side request.
func classifyResponses(r *Request) Kind {
	if len(r.Tools) == 0 && strings.Contains(strings.ToLower(r.System), "title") {
		return KindAux
	}
	return KindTurn
}

// codexArgs turns a call made with RunCommand's shape ({"command",
// "timeout"}) into exec_command's ({"cmd", "yield_time_ms"}), so one script
// drives all three agents. A timeout becomes the longest yield Codex takes
// (it is capped there), so a long tool keeps the turn waiting on it.
func codexArgs(c ToolCall) map[string]any {
	in := c.Input
	if c.Name != codexShell || in == nil || in["cmd"] != nil {
		return in
	}
	out := map[string]any{}
	for k, v := range in {
		switch k {
		case "command":
			out["cmd"] = v
		case "timeout", "description":
		default:
			out[k] = v
		}
	}
	if t, ok := in["timeout"].(int64); ok && t > 0 {
		out["yield_time_ms"] = min(t, maxYield.Milliseconds())
	}
	return out
}

// replyResponses answers POST /v1/responses as a stream of the events
// Codex needs: response.created, per output item output_item.added,
// output_text.delta (text) and output_item.done, then response.completed
// with the usage. Not streamed: the response object.
func (s *Server) replyResponses(w http.ResponseWriter, hr *http.Request, r *Request, rep Reply) {
	if openAIError(w, rep) {
		return
	}
	model := modelOf(r)
	id := newID("resp_")
	inTok := estimateTokens(r.Raw)
	outTok := len(rep.Text)/4 + 1
	usage := map[string]any{
		"input_tokens": inTok, "input_tokens_details": map[string]any{"cached_tokens": 0},
		"output_tokens": outTok, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": inTok + outTok,
	}
	var items []map[string]any
	if rep.Text != "" {
		items = append(items, map[string]any{
			"type": "message", "id": newID("msg_"), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": rep.Text, "annotations": []any{}}},
		})
	}
	for _, c := range rep.ToolCalls {
		args, _ := json.Marshal(codexArgs(c))
		item := map[string]any{
			"type": "function_call", "id": newID("fc_"), "call_id": c.ID, "name": c.Name,
			"arguments": string(args), "status": "completed",
		}
		if c.Namespace != "" {
			item["namespace"] = c.Namespace
		}
		items = append(items, item)
	}
	response := func(status string, output []map[string]any) map[string]any {
		out := map[string]any{"id": id, "object": "response", "created_at": time.Now().Unix(),
			"status": status, "model": model, "output": output}
		if status == "completed" {
			out["usage"] = usage
		}
		return out
	}
	if !r.Stream {
		wait(hr.Context(), rep.Delay)
		writeJSON(w, http.StatusOK, response("completed", items))
		return
	}
	e := newSSE(w)
	seq := 0
	event := func(typ string, v map[string]any) {
		v["type"] = typ
		v["sequence_number"] = seq
		seq++
		e.event(typ, v)
	}
	event("response.created", map[string]any{"response": response("in_progress", []map[string]any{})})
	wait(hr.Context(), rep.Delay)
	for i, it := range items {
		added := map[string]any{}
		for k, v := range it {
			added[k] = v
		}
		added["status"] = "in_progress"
		if it["type"] == "message" {
			added["content"] = []any{}
		} else {
			added["arguments"] = ""
		}
		event("response.output_item.added", map[string]any{"output_index": i, "item": added})
		if it["type"] == "message" {
			event("response.output_text.delta", map[string]any{"item_id": it["id"], "output_index": i,
				"content_index": 0, "delta": rep.Text})
		} else {
			event("response.function_call_arguments.delta", map[string]any{"item_id": it["id"],
				"output_index": i, "delta": it["arguments"]})
		}
		event("response.output_item.done", map[string]any{"output_index": i, "item": it})
	}
	event("response.completed", map[string]any{"response": response("completed", items)})
}
