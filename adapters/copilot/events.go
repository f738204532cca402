package copilot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/lib/jsonscan"
)

// events.jsonl is one JSON object per line, {"type","data","id",
// "timestamp","parentId"}, appended and never rewritten (a resume appends
// to the same file, after a session.resume line). Checked on 1.0.102 by
// real runs, and against the schema the package ships
// (schemas/session-events.schema.json, whose "ephemeral" events are never
// written: session.idle, user_input.requested, elicitation.requested):
//
//   - session.start: data.sessionId, data.copilotVersion, data.startTime,
//     data.context.cwd. session.resume: a new process took the session over.
//   - user.message: a prompt (data.content); an interaction starts.
//   - assistant.turn_start / assistant.turn_end: one model round. A turn
//     whose assistant.message asked for tools (data.toolRequests) is
//     followed by another once they ran; one that asked for none ends the
//     interaction. A sub-agent's turns carry data.parentToolCallId.
//   - tool.execution_start / tool.execution_complete, paired by
//     data.toolCallId. A resume answers a call a dead process left with a
//     tool.execution_complete of its own (success false).
//   - permission.requested / permission.completed, paired by
//     data.requestId: an approval the user has not given yet.
//   - abort (data.reason): the user interrupted; the running tools were
//     killed and never completed. session.shutdown: the process ended the
//     session (data.shutdownType "routine" or "error").
//   - A model call that fails ends its turn (assistant.turn_start,
//     assistant.turn_end with no assistant.message), then session.error:
//     the interaction is over.
//   - ask_user is a tool call like any other (tool.execution_start with
//     its {message, requestedSchema}); the question shown is ephemeral,
//     the answer a human_response.recorded before its completion.

// call is a tool call started and not completed.
type call struct {
	ID    string
	Name  string
	Args  string // shortened
	Since time.Time
}

// perm is a permission asked and not answered.
type perm struct {
	ID     string
	CallID string
	Kind   string // shell, write, read, mcp, url, ...
	Detail string // the command, file or URL, shortened
	Since  time.Time
}

// state is what a session's events say, read forward.
type state struct {
	// Meta, from session.start (and session.resume's cwd).
	ID      string
	Cwd     string
	Version string
	Started time.Time
	// Prompt is the first prompt, shortened: the title when
	// workspace.yaml names none.
	Prompt string

	// Known: a session.start or session.resume was read, so the turn
	// state below is the whole truth.
	Known bool
	// Busy: an interaction is running (a prompt was taken, a turn
	// started, a turn asked for tools), from Since.
	Busy  bool
	Since time.Time
	// More: the last turn asked for tools, so another turn follows.
	More    bool
	Pending []call
	Perms   []perm
	// Ended is the last session.shutdown's type, until a resume.
	Ended string
	// Aborted is the reason of the last abort, until the next prompt.
	Aborted string
	// Last is the time of the last line read.
	Last time.Time
	// Drift is what the lines showed that sessiond does not understand
	// (kit.Seen): an event type 1.0.102's schema does not name, a
	// shutdownType it does not, a field of another JSON type. Over the
	// whole file, counted under Version.
	Drift kit.Seen
}

// Bounds on what one state keeps (garbage must not allocate without
// limit).
const (
	maxPending = 1 << 10
	maxArgs    = 160
	maxTitle   = 120
)

// event is the part of a line the adapter decodes.
type event struct {
	Type      string `json:"type"`
	Timestamp string `json:"timestamp"`
	AgentID   string `json:"agentId"`
	Data      struct {
		// session.start
		SessionID      string `json:"sessionId"`
		CopilotVersion string `json:"copilotVersion"`
		StartTime      string `json:"startTime"`
		Context        struct {
			Cwd string `json:"cwd"`
		} `json:"context"`
		// user.message
		Content json.RawMessage `json:"content"`
		// assistant.message
		ToolRequests []json.RawMessage `json:"toolRequests"`
		// assistant.turn_*
		ParentToolCallID string `json:"parentToolCallId"`
		// tool.execution_*
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
		Arguments  json.RawMessage `json:"arguments"`
		// permission.*
		RequestID         string          `json:"requestId"`
		PermissionRequest json.RawMessage `json:"permissionRequest"`
		// abort
		Reason string `json:"reason"`
		// session.shutdown
		ShutdownType string `json:"shutdownType"`
	} `json:"data"`
}

// read reports whether a line's type is one the state reads; the others
// only move Last.
func read(typ string) bool {
	switch typ {
	case "session.start", "session.resume", "user.message", "assistant.turn_start", "assistant.turn_end",
		"assistant.message", "tool.execution_start", "tool.execution_complete", "permission.requested",
		"permission.completed", "abort", "session.shutdown":
		return true
	}
	return false
}

// apply moves the state over one line (without its newline). It reports
// false for a line that is not a JSON object: it is skipped, and the rest
// still says the state.
func (s *state) apply(raw []byte) bool {
	return s.applyWith(raw, true)
}

// applyWhole is apply decoding each line whole with encoding/json, as
// apply did before it pruned (FuzzApplyIsWhole holds the two equal).
func (s *state) applyWhole(raw []byte) bool {
	return s.applyWith(raw, false)
}

// pruner leaves out of a line what the state does not read, most of a
// session's bytes: a message's content (read only from the first
// user.message, which is then decoded again whole), the prompt as sent
// to the model, a tool's result, a reply's reasoning. Of these keys only
// content is a field of event, in any case. The raw values decoded later
// (a call's arguments, a permission request, tool requests) are kept
// whole.
var pruner = jsonscan.Pruner{
	Drop: []string{"content", "transformedContent", "detailedContent", "result", "reasoningText", "reasoningOpaque", "encryptedContent"},
	Keep: []string{"arguments", "permissionRequest", "toolRequests"},
}

// events are applyWith's decoded lines, kept from one line to the next:
// a new one per line (it escapes into the decoders) was a third of a
// first pass's allocations. What a line leaves in the state is strings
// and values, never the event or its raw members.
var events = sync.Pool{New: func() any { return new(event) }}

func (s *state) applyWith(raw []byte, prune bool) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return true
	}
	valid := json.Valid
	if prune {
		valid = jsonscan.Valid
	}
	if typ, ok := quickType(raw); ok && !read(typ) {
		// Most lines (a system.message of 20 KB, usage records) say
		// nothing of the state: check them, take their time, decode
		// nothing.
		if !valid(raw) {
			return false
		}
		if !knownEvents[typ] {
			s.Drift.Add(adapters.DriftLineType, typ)
		}
		if ts := quickTime(raw); !ts.IsZero() {
			s.Last = ts
		}
		return true
	}
	e := events.Get().(*event)
	defer events.Put(e)
	*e = event{}
	if !prune || !quickEvent(raw, e) {
		*e = event{}
		if !s.decode(raw, prune, e) {
			return false
		}
	}
	if e.Type != "" && !knownEvents[e.Type] {
		s.Drift.Add(adapters.DriftLineType, e.Type)
	}
	if sd := e.Data.ShutdownType; e.Type == "session.shutdown" && sd != "" && sd != "routine" && sd != "error" {
		s.Drift.Add(adapters.DriftStatus, sd)
	}
	ts, _ := time.Parse(time.RFC3339Nano, e.Timestamp)
	if !ts.IsZero() {
		s.Last = ts
	}
	d := &e.Data
	if e.AgentID != "" || d.ParentToolCallID != "" {
		// A sub-agent's own lines: its parent's task call stands for it.
		return true
	}
	switch e.Type {
	case "session.start":
		s.ID, s.Version = d.SessionID, d.CopilotVersion
		if d.Context.Cwd != "" {
			s.Cwd = d.Context.Cwd
		}
		if t, err := time.Parse(time.RFC3339Nano, d.StartTime); err == nil {
			s.Started = t
		} else {
			s.Started = ts
		}
		s.reset()
	case "session.resume":
		if d.Context.Cwd != "" {
			s.Cwd = d.Context.Cwd
		}
		s.reset()
	case "user.message":
		if s.Prompt == "" {
			var text string
			if json.Unmarshal(d.Content, &text) == nil {
				s.Prompt = oneline.Cut(strings.TrimSpace(text), maxTitle)
			}
		}
		s.begin(ts)
		s.Aborted = ""
	case "assistant.turn_start":
		s.begin(ts)
		s.More = false
	case "assistant.message":
		if len(d.ToolRequests) > 0 {
			s.More = true
		}
	case "assistant.turn_end":
		if !s.More {
			s.Busy, s.Pending, s.Perms = false, nil, nil
		}
	case "tool.execution_start":
		if d.ToolCallID != "" && len(s.Pending) < maxPending {
			s.Pending = append(s.Pending, call{ID: d.ToolCallID, Name: d.ToolName, Args: argsOf(d.Arguments), Since: ts})
		}
	case "tool.execution_complete":
		s.Pending = removeCall(s.Pending, d.ToolCallID)
	case "permission.requested":
		if d.RequestID != "" && len(s.Perms) < maxPending {
			p := permOf(d.PermissionRequest)
			p.ID, p.Since = d.RequestID, ts
			s.Perms = append(s.Perms, p)
		}
	case "permission.completed":
		s.Perms = removePerm(s.Perms, d.RequestID)
	case "abort":
		s.Busy, s.More, s.Pending, s.Perms = false, false, nil, nil
		s.Aborted = d.Reason
		if s.Aborted == "" {
			s.Aborted = "aborted"
		}
	case "session.shutdown":
		s.Busy, s.More, s.Pending, s.Perms = false, false, nil, nil
		s.Ended = d.ShutdownType
		if s.Ended == "" {
			s.Ended = "shutdown"
		}
	}
	return true
}

// reset starts the turn state over: a session.start or session.resume,
// written by the process that has the session from now on. What an
// earlier process left in flight is not this one's.
func (s *state) reset() {
	s.Known = true
	s.Busy, s.More, s.Pending, s.Perms, s.Ended, s.Aborted = false, false, nil, nil, "", ""
}

func (s *state) begin(ts time.Time) {
	if !s.Busy {
		s.Busy, s.Since = true, ts
	}
}

func removeCall(cs []call, id string) []call {
	for i, c := range cs {
		if c.ID == id {
			return append(cs[:i:i], cs[i+1:]...)
		}
	}
	return cs
}

func removePerm(ps []perm, id string) []perm {
	for i, p := range ps {
		if p.ID == id {
			return append(ps[:i:i], ps[i+1:]...)
		}
	}
	return ps
}

// argsOf shortens a tool's arguments: a shell tool's command, the
// question of ask_user ({message, requestedSchema}), a path, else the
// JSON.
func argsOf(raw json.RawMessage) string {
	var a struct {
		Command  string `json:"command"`
		Message  string `json:"message"`
		Question string `json:"question"`
		Path     string `json:"path"`
	}
	if json.Unmarshal(raw, &a) == nil {
		for _, v := range []string{a.Command, a.Message, a.Question, a.Path} {
			if v != "" {
				return oneline.Cut(v, maxArgs)
			}
		}
	}
	return oneline.Cut(string(raw), maxArgs)
}

// permOf reads what a permission asks: its kind and the command, file or
// URL it names (schemas/session-events.schema.json, PermissionRequest*).
func permOf(raw json.RawMessage) perm {
	var r struct {
		Kind            string `json:"kind"`
		ToolCallID      string `json:"toolCallId"`
		FullCommandText string `json:"fullCommandText"`
		FileName        string `json:"fileName"`
		Path            string `json:"path"`
		URL             string `json:"url"`
		ToolName        string `json:"toolName"`
		ServerName      string `json:"serverName"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return perm{}
	}
	p := perm{Kind: r.Kind, CallID: r.ToolCallID}
	for _, d := range []string{r.FullCommandText, r.FileName, r.Path, r.URL} {
		if d != "" {
			p.Detail = oneline.Cut(d, maxArgs)
			break
		}
	}
	if p.Detail == "" && r.ToolName != "" {
		p.Detail = r.ToolName
		if r.ServerName != "" {
			p.Detail = r.ServerName + "/" + r.ToolName
		}
	}
	return p
}

// quickType reads the type of a line that starts {"type":"…", as every
// line Copilot writes does; ok is false for any other line, which is then
// decoded whole.
func quickType(raw []byte) (string, bool) {
	const head = `{"type":"`
	if !bytes.HasPrefix(raw, []byte(head)) {
		return "", false
	}
	rest := raw[len(head):]
	i := bytes.IndexByte(rest, '"')
	if i < 0 || bytes.IndexByte(rest[:i], '\\') >= 0 {
		return "", false
	}
	return string(rest[:i]), true
}

// quickTime reads the top-level timestamp of a valid line written as
// Copilot writes them, its "timestamp" after "data". A key can only be
// the literal `"timestamp":"` outside a string, so the last one is the
// top level's whenever data comes first.
func quickTime(raw []byte) time.Time {
	const key = `"timestamp":"`
	i := bytes.LastIndex(raw, []byte(key))
	if i < 0 || i < bytes.Index(raw, []byte(`"data":`)) {
		return time.Time{}
	}
	rest := raw[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 {
		return time.Time{}
	}
	t, _ := time.Parse(time.RFC3339Nano, string(rest[:j]))
	return t
}

// maxLine bounds one line: a longer one is skipped (counted bad) without
// being held.
const maxLine = 32 << 20

// readEvents applies the complete lines of r between off and size to s.
// It returns where the next read starts (after the last newline) and how
// many lines were skipped. A line not yet ended by a newline is left for
// the next read.
func readEvents(r io.ReaderAt, off, size int64, s *state) (end int64, bad int, err error) {
	if off >= size {
		return off, 0, nil
	}
	br := kit.Reader(io.NewSectionReader(r, off, size-off))
	defer kit.PutReader(br)
	end = off
	var long []byte // the start of a line longer than the buffer
	var n int64     // bytes of the current line so far
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		n += int64(len(chunk))
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			if !tooLong {
				long = append(long, chunk...)
				if len(long) > maxLine {
					long, tooLong = nil, true
				}
			}
			continue
		case errors.Is(err, io.EOF):
			return end, bad, nil // an unfinished line: read again later
		case err != nil:
			return end, bad, fmt.Errorf("read events: %w", err)
		}
		end += n
		line := chunk
		if long != nil {
			line = append(long, chunk...)
		}
		if tooLong || !s.apply(line[:len(line)-1]) {
			bad++
		}
		long, n, tooLong = nil, 0, false
	}
}

// decode decodes a line into e with encoding/json, pruned or whole, and
// reports whether it is an event (a field of another type aside, noted
// as drift).
func (s *state) decode(raw []byte, prune bool, e *event) bool {
	decoded := false
	unmarshal := func(line []byte) {
		err := json.Unmarshal(line, e)
		if f, ok := kit.FieldType(err); ok {
			// That field is not used; the rest of the line is.
			s.Drift.Add(adapters.DriftFieldType, f)
			err = nil
		}
		decoded = err == nil
	}
	if !prune {
		unmarshal(raw)
	} else if !pruner.Use(raw, unmarshal) {
		return false
	}
	if !decoded {
		return false
	}
	if prune && e.Type == "user.message" && s.Prompt == "" && e.AgentID == "" && e.Data.ParentToolCallID == "" {
		// The first prompt is the title: its content, pruned, is read
		// from the whole line (once a session).
		var w event
		if err := json.Unmarshal(raw, &w); err == nil || isFieldType(err) {
			e.Data.Content = w.Data.Content
		}
	}
	return true
}

// isFieldType reports whether err is only a field of another JSON type.
func isFieldType(err error) bool {
	_, ok := kit.FieldType(err)
	return ok
}
