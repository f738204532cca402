package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Gemini is the Gemini API (generativelanguage's v1beta), which Gemini CLI
// speaks to GOOGLE_GEMINI_BASE_URL:
//
//	POST /v1beta/models/{model}:generateContent
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//	POST /v1beta/models/{model}:countTokens
const Gemini API = "gemini"

// geminiShell is Gemini CLI's shell tool ({command, description}).
const geminiShell = "run_shell_command"

// geminiRoute splits /v1beta/models/{model}:{method}; ok false for any
// other path.
func geminiRoute(path string) (model, method string, ok bool) {
	rest, found := strings.CutPrefix(path, "/v1beta/models/")
	if !found {
		return "", "", false
	}
	model, method, ok = strings.Cut(rest, ":")
	return model, method, ok && model != ""
}

// decodeGemini fills the request's tools, system instruction and messages
// from a generateContent body: contents[] of {role: user|model, parts[]},
// where a part is {text}, {functionCall: {id, name, args}} or
// {functionResponse: {id, name, response}}.
func decodeGemini(r *Request, model, method string) {
	r.Model = model
	r.Stream = method == "streamGenerateContent"
	b := r.Body
	if b == nil {
		return
	}
	if tools, ok := b["tools"].([]any); ok {
		for _, t := range tools {
			tm, _ := t.(map[string]any)
			decls, _ := tm["functionDeclarations"].([]any)
			for _, d := range decls {
				if dm, ok := d.(map[string]any); ok {
					r.Tools = append(r.Tools, str(dm, "name"))
				}
			}
		}
	}
	if si, ok := b["systemInstruction"].(map[string]any); ok {
		r.System = geminiParts(si["parts"], nil).Text
	} else if s, ok := b["systemInstruction"].(string); ok {
		r.System = s
	}
	contents, _ := b["contents"].([]any)
	for _, c := range contents {
		cm, ok := c.(map[string]any)
		if !ok {
			continue
		}
		role := str(cm, "role")
		if role == "model" {
			role = "assistant"
		}
		msg := geminiParts(cm["parts"], &Message{Role: role})
		r.Messages = append(r.Messages, *msg)
	}
}

// geminiParts reads a parts array into m (a new message when nil).
func geminiParts(v any, m *Message) *Message {
	if m == nil {
		m = &Message{}
	}
	parts, _ := v.([]any)
	var texts []string
	for _, p := range parts {
		pm, ok := p.(map[string]any)
		if !ok {
			continue
		}
		if t, ok := pm["text"].(string); ok {
			if th, _ := pm["thought"].(bool); !th {
				texts = append(texts, t)
			}
		}
		if fc, ok := pm["functionCall"].(map[string]any); ok {
			args, _ := fc["args"].(map[string]any)
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: str(fc, "id"), Name: str(fc, "name"), Input: args})
		}
		if fr, ok := pm["functionResponse"].(map[string]any); ok {
			out, _ := json.Marshal(fr["response"])
			res := ToolResult{ID: str(fr, "id"), Content: string(out)}
			if resp, ok := fr["response"].(map[string]any); ok {
				if o, ok := resp["output"].(string); ok {
					res.Content = o
				}
				_, res.IsError = resp["error"]
			}
			m.ToolResults = append(m.ToolResults, res)
		}
	}
	m.Text = strings.Join(texts, "\n")
	return m
}

// classifyGemini: a request that offers tools is a turn; one without tools
// is a side request (Gemini CLI's model router, its next-speaker and loop
// checks, which ask for JSON), as is token counting.
func classifyGemini(r *Request, method string) Kind {
	if method == "countTokens" {
		return KindCountTokens
	}
	if len(r.Tools) > 0 {
		return KindTurn
	}
	return KindAux
}

// geminiAux answers a side request. Gemini CLI's side requests ask for
// JSON (generationConfig.responseMimeType): one object carrying every
// field its router ("model_choice"), next-speaker check ("next_speaker")
// and loop check ask for satisfies each; anything else gets short text.
func geminiAux(r *Request) Reply {
	gc, _ := r.Body["generationConfig"].(map[string]any)
	if str(gc, "responseMimeType") == "application/json" {
		return Say(`{"reasoning": "fakemodel", "model_choice": "flash", "next_speaker": "user", "unproductive_state_confidence": 0, "unproductive_state_analysis": "none"}`)
	}
	return Say("ok")
}

// geminiArgs turns a call made with RunCommand's shape ({command,
// description, timeout}) into run_shell_command's ({command,
// description}): Gemini CLI refuses arguments its schema does not have.
func geminiArgs(c ToolCall) map[string]any {
	in := c.Input
	if c.Name != geminiShell || in == nil {
		if in == nil {
			return map[string]any{}
		}
		return in
	}
	out := map[string]any{}
	for k, v := range in {
		if k != "timeout" {
			out[k] = v
		}
	}
	return out
}

// geminiToolName: an empty name is the request's shell tool.
func geminiToolName(c ToolCall, offered []string) string {
	if c.Name != "" {
		return c.Name
	}
	for _, t := range offered {
		if t == geminiShell {
			return t
		}
	}
	for _, t := range offered {
		if strings.EqualFold(t, "bash") || strings.EqualFold(t, "shell") {
			return t
		}
	}
	return geminiShell
}

// serveGemini answers one Gemini API request: a turn from the script, a
// side request from geminiAux, countTokens with an estimate.
func (s *Server) serveGemini(w http.ResponseWriter, hr *http.Request, r *Request, model, method string) {
	r.API = Gemini
	decodeGemini(r, model, method)
	r.Kind = classifyGemini(r, method)
	switch {
	case r.Kind == KindCountTokens:
		s.record(r)
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": estimateTokens(r.Raw)})
		return
	case method != "generateContent" && method != "streamGenerateContent":
		r.Kind = KindOther
		s.record(r)
		geminiError(w, http.StatusNotFound, "fakemodel: no method "+method)
		return
	}
	var rep Reply
	if r.Kind == KindAux {
		rep = geminiAux(r)
	} else {
		rep = s.next(r)
	}
	rep = resolve(rep, nil, "call_", geminiShell)
	for i := range rep.ToolCalls {
		if rep.ToolCalls[i].Name == geminiShell && len(r.Tools) > 0 {
			rep.ToolCalls[i].Name = geminiToolName(ToolCall{}, r.Tools)
		}
	}
	r.Reply = &rep
	s.record(r)
	s.replyGemini(w, hr, r, rep)
}

// geminiError writes the Gemini API's error body.
func geminiError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{
		"code": status, "message": msg, "status": http.StatusText(status)}})
}

// replyGemini answers generateContent with one GenerateContentResponse,
// and streamGenerateContent (alt=sse) with a chunk of the text, one per
// function call, and a last one with finishReason STOP and the usage.
func (s *Server) replyGemini(w http.ResponseWriter, hr *http.Request, r *Request, rep Reply) {
	if rep.Status != 0 && rep.Status != http.StatusOK {
		geminiError(w, rep.Status, "fakemodel: scripted error")
		return
	}
	inTok := estimateTokens(r.Raw)
	outTok := len(rep.Text)/4 + 1
	usage := map[string]any{"promptTokenCount": inTok, "candidatesTokenCount": outTok, "totalTokenCount": inTok + outTok}
	var parts []map[string]any
	if rep.Text != "" {
		parts = append(parts, map[string]any{"text": rep.Text})
	}
	for _, c := range rep.ToolCalls {
		parts = append(parts, map[string]any{"functionCall": map[string]any{"id": c.ID, "name": c.Name, "args": geminiArgs(c)}})
	}
	chunk := func(parts []map[string]any, final bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": modelOf(r), "responseId": newID("resp")}
		if final {
			cand["finishReason"] = "STOP"
			out["usageMetadata"] = usage
		}
		return out
	}
	if !r.Stream {
		wait(hr.Context(), rep.Delay)
		if parts == nil {
			parts = []map[string]any{{"text": ""}}
		}
		writeJSON(w, http.StatusOK, chunk(parts, true))
		return
	}
	e := newSSE(w)
	wait(hr.Context(), rep.Delay)
	if len(parts) == 0 {
		parts = []map[string]any{{"text": ""}}
	}
	for i, p := range parts {
		e.event("", chunk([]map[string]any{p}, i == len(parts)-1))
	}
}
