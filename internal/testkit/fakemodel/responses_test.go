package fakemodel

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestResponsesStreamingToolCallThenText drives the Responses API as Codex
// 0.169.0 does (checked against the real binary: it ran the command and
// wrote the answer): a turn that offers exec_command gets the scripted
// command as exec_command's own arguments, the next turn, carrying the
// call and its output, gets the text.
func TestResponsesStreamingToolCallThenText(t *testing.T) {
	s := New(t)
	s.Enqueue(RunCommand("sleep 1; echo slept", "sleep", 40*time.Second), Say("All done."))
	tools := []any{
		map[string]any{"type": "function", "name": "exec_command", "parameters": map[string]any{}},
		map[string]any{"type": "function", "name": "write_stdin", "parameters": map[string]any{}},
	}
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "<permissions>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "run it"}}},
	}
	resp := post(t, s.URL+"/v1/responses", map[string]string{"Authorization": "Bearer secret"}, map[string]any{
		"model": "fake-model", "stream": true, "instructions": "You are Codex", "tools": tools, "input": input,
	})
	evs := readSSE(t, resp)
	var names []string
	var call map[string]any
	for _, e := range evs {
		names = append(names, e.Name)
		d := decode(t, e.Data)
		if d["type"] != e.Name {
			t.Errorf("event %q carries type %v", e.Name, d["type"])
		}
		if e.Name == "response.output_item.done" {
			call = d["item"].(map[string]any)
		}
	}
	want := "response.created response.output_item.added response.function_call_arguments.delta response.output_item.done response.completed"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	var args map[string]any
	if call["type"] != "function_call" || call["name"] != "exec_command" || json.Unmarshal([]byte(call["arguments"].(string)), &args) != nil {
		t.Fatalf("call %v", call)
	}
	if args["cmd"] != "sleep 1; echo slept" || args["yield_time_ms"] != float64(30000) || args["command"] != nil {
		t.Fatalf("exec_command arguments %v: want cmd and the longest yield", args)
	}
	last := decode(t, evs[len(evs)-1].Data)["response"].(map[string]any)
	if last["status"] != "completed" || last["usage"] == nil {
		t.Fatalf("response.completed %v", last)
	}

	input = append(input,
		map[string]any{"type": "function_call", "name": "exec_command", "arguments": call["arguments"], "call_id": call["call_id"]},
		map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "slept"},
	)
	resp = post(t, s.URL+"/v1/responses", nil, map[string]any{
		"model": "fake-model", "stream": true, "instructions": "You are Codex", "tools": tools, "input": input,
	})
	evs = readSSE(t, resp)
	var text string
	for _, e := range evs {
		if e.Name == "response.output_text.delta" {
			text += decode(t, e.Data)["delta"].(string)
		}
	}
	if text != "All done." {
		t.Fatalf("text %q", text)
	}
	turns := s.Turns()
	if len(turns) != 2 || turns[0].API != Responses || turns[0].LastUserText() != "run it" {
		t.Fatalf("turns %+v", turns)
	}
	second := turns[1]
	if !strings.Contains(second.System, "You are Codex") || !strings.Contains(second.System, "<permissions>") {
		t.Errorf("system %q: want the instructions and the developer message", second.System)
	}
	if !strings.Contains(second.Text(), "slept") || !strings.Contains(second.Text(), "exec_command") {
		t.Errorf("second turn's conversation %q lacks the call and its output", second.Text())
	}
}
