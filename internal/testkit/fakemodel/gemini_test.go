package fakemodel

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestGeminiStreamingToolCallThenText: a scripted shell call goes out as a
// functionCall part of run_shell_command (without RunCommand's timeout,
// which its schema lacks), the function response comes back decoded, and
// side requests (no tools, JSON asked) are answered without the script.
func TestGeminiStreamingToolCallThenText(t *testing.T) {
	s := New(t)
	s.Enqueue(RunCommand("sleep 30", "wait", 60e9), Say("all done"))
	tools := []any{map[string]any{"functionDeclarations": []any{
		map[string]any{"name": "read_file"}, map[string]any{"name": "run_shell_command"}}}}
	url := s.URL + "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"

	resp := post(t, url, nil, map[string]any{
		"contents":          []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "run it"}}}},
		"systemInstruction": map[string]any{"role": "user", "parts": []any{map[string]any{"text": "you are gemini"}}},
		"tools":             tools,
	})
	evs := readSSE(t, resp)
	if len(evs) != 1 {
		t.Fatalf("%d events: %+v", len(evs), evs)
	}
	var chunk struct {
		Candidates []struct {
			Content struct {
				Parts []struct {
					FunctionCall *struct {
						ID, Name string
						Args     map[string]any
					} `json:"functionCall"`
				}
			}
			FinishReason string
		}
		UsageMetadata map[string]any
	}
	if err := json.Unmarshal([]byte(evs[0].Data), &chunk); err != nil {
		t.Fatal(err)
	}
	fc := chunk.Candidates[0].Content.Parts[0].FunctionCall
	if fc == nil || fc.Name != "run_shell_command" || fc.Args["command"] != "sleep 30" || fc.Args["timeout"] != nil || fc.ID == "" ||
		chunk.Candidates[0].FinishReason != "STOP" || chunk.UsageMetadata == nil {
		t.Fatalf("chunk %s", evs[0].Data)
	}

	// A side request: no tools, JSON asked for.
	aux := post(t, s.URL+"/v1beta/models/gemini-2.5-flash-lite:generateContent", nil, map[string]any{
		"contents":         []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "route"}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json"},
	})
	b, _ := io.ReadAll(aux.Body)
	if aux.StatusCode != http.StatusOK || !strings.Contains(string(b), `next_speaker`) {
		t.Fatalf("aux: %d %s", aux.StatusCode, b)
	}

	resp = post(t, url, nil, map[string]any{
		"contents": []any{
			map[string]any{"role": "user", "parts": []any{map[string]any{"text": "run it"}}},
			map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"id": fc.ID, "name": fc.Name, "args": fc.Args}}}},
			map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{"id": fc.ID, "name": fc.Name, "response": map[string]any{"output": "slept"}}}}},
		},
		"tools": tools,
	})
	if evs := readSSE(t, resp); len(evs) != 1 || !strings.Contains(evs[0].Data, "all done") {
		t.Fatalf("%+v", evs)
	}
	turns := s.Turns()
	if len(turns) != 2 || turns[0].API != Gemini || turns[0].System != "you are gemini" || turns[0].Model != "gemini-2.5-flash" || !turns[0].Stream {
		t.Fatalf("turns %+v", turns)
	}
	m := turns[1].Messages
	if len(m) != 3 || m[1].Role != "assistant" || m[1].ToolCalls[0].ID != fc.ID || m[2].ToolResults[0].Content != "slept" {
		t.Fatalf("messages %+v", m)
	}
	if s.pending() != 0 {
		t.Fatalf("%d replies left", s.pending())
	}
}
