package qwen

import (
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

// A chat is one JSON record per line, appended with one write (and an
// fsync) per record and never rewritten: {uuid, parentUuid, sessionId,
// timestamp, type, cwd, version, ...}. type is "user" (a prompt: message
// {role: "user", parts: [{text}]}), "assistant" (message {role: "model",
// parts: [{text} | {functionCall: {id, name, args}}]}), "tool_result"
// (message {role: "user", parts: [{functionResponse: {id, name,
// response}}]}, and toolCallResult {callId, status}) or "system" (with a
// subtype: ui_telemetry, attribution_snapshot, file_history_snapshot, …).
// Nothing marks a turn's end: a turn is over when the model answered
// without calling a tool, or when a tool's result says it was cancelled
// (Qwen sends nothing more then). Checked on 0.24.4 (docs/agents/qwen.md).

// record is the part of a chat line the adapter reads.
type record struct {
	SessionID      string          `json:"sessionId"`
	Timestamp      string          `json:"timestamp"`
	Type           string          `json:"type"`
	Subtype        string          `json:"subtype"`
	Cwd            string          `json:"cwd"`
	Version        string          `json:"version"`
	Message        *message        `json:"message"`
	ToolCallResult *toolCallResult `json:"toolCallResult"`
}

type message struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

type part struct {
	Text             string            `json:"text"`
	Thought          bool              `json:"thought"`
	FunctionCall     *functionCall     `json:"functionCall"`
	FunctionResponse *functionResponse `json:"functionResponse"`
}

type functionCall struct {
	ID   string          `json:"id"`
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type functionResponse struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

type toolCallResult struct {
	CallID string `json:"callId"`
	Status string `json:"status"`
}

// phase is where the chat's last turn stands.
type phase uint8

const (
	// phaseNone: no prompt, reply or tool record yet.
	phaseNone phase = iota
	// phasePrompt: a prompt without a reply yet (the model is asked).
	phasePrompt
	// phaseCalls: the model called tools that have no result yet.
	phaseCalls
	// phaseResults: every call has its result, and the results go back to
	// the model.
	phaseResults
	// phaseIdle: the model answered without calling a tool, or the turn
	// was cancelled.
	phaseIdle
)

// call is a tool call without its result yet.
type call struct {
	ID    string
	Name  string
	Args  string // shortened
	Since time.Time
}

// meta is what the chat says of the session as a whole.
type meta struct {
	ID      string // sessionId of the first record
	Cwd     string // of the last record that names one
	Version string // of the last record that names one
	Title   string // the first prompt
	Started time.Time
}

// turn is the turn state the chat's lines say, read forward from the
// file's start.
type turn struct {
	Phase phase
	// Since is when the running turn's prompt was written.
	Since   time.Time
	Pending []call
	// Cancelled: a result of the calls since the last model reply says
	// the user cancelled it.
	Cancelled bool
	// Last is the time of the last record read.
	Last time.Time
}

// state is what one chat's lines, read so far, say.
type state struct {
	meta meta
	turn turn
	// bad counts lines skipped as not JSON records; recovered the records
	// found glued after a broken line; long the lines skipped as longer
	// than maxLine.
	bad, recovered, long int
	// drift is what the lines showed that sessiond does not understand
	// (kit.Seen): a record type or a tool result status 0.24.4 does not
	// write, a field of another JSON type. Counted under meta.Version.
	drift kit.Seen
}

// knownStatus reports whether a tool result's status is one 0.24.4
// writes (its tool scheduler's final states).
func knownStatus(status string) bool {
	return status == "success" || status == "error" || status == "cancelled"
}

// maxPending bounds the calls kept pending (garbage must not allocate
// without limit); maxTitle bounds a title.
const (
	maxPending = 1 << 12
	maxTitle   = 120
)

// recordStart is how every record Qwen writes begins: where a line glued
// to a torn one (a writer killed mid-write, then a resume appending) is
// found again.
var recordStart = []byte(`{"uuid":"`)

// pruner leaves out of a line the members no state reads: a tool's
// response (its output, most of a chat's bytes), a result's display (the
// output again) and a system record's payload (telemetry). None of the
// three is a field of record or of what it holds, in any case; a call's
// args are kept raw, so they are left whole.
var pruner = jsonscan.Pruner{Drop: []string{"response", "resultDisplay", "systemPayload"}, Keep: []string{"args"}}

// apply moves the state over one line. It moves it as applyWhole does
// (FuzzApplyIsWhole holds the two equal): a plain line is decoded by
// quickRecord, any other less what pruner drops (jsonscan checks the
// line at memory speed and encoding/json goes over what is left).
func (s *state) apply(raw []byte) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	var r record
	if quickRecord(raw, &r) && r.Type != "" {
		s.take(&r)
		return
	}
	if pruner.Use(raw, s.decoded) {
		return
	}
	// Not JSON: maybe a torn record with a whole one glued after it, which
	// applyWhole finds.
	s.applyWhole(raw)
}

// applyWhole moves the state over one line, decoding it whole with
// encoding/json.
func (s *state) applyWhole(raw []byte) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return
	}
	s.decoded(raw)
}

// decoded moves the state over a line (JSON or not), decoding it with
// encoding/json.
func (s *state) decoded(raw []byte) {
	var r record
	err := json.Unmarshal(raw, &r)
	if f, ok := kit.FieldType(err); ok {
		// A field of another type is not used; the rest of the record is.
		s.drift.Add(adapters.DriftFieldType, f)
		err = nil
	}
	if err != nil || r.Type == "" {
		s.bad++
		// A torn record with a whole one glued after it: take the whole one.
		if i := bytes.LastIndex(raw, recordStart); i > 0 {
			var g record
			if json.Unmarshal(raw[i:], &g) == nil && g.Type != "" {
				s.recovered++
				s.take(&g)
			}
		}
		return
	}
	s.take(&r)
}

// take applies one decoded record.
func (s *state) take(r *record) {
	ts, _ := time.Parse(time.RFC3339Nano, r.Timestamp)
	t := &s.turn
	if !ts.IsZero() {
		t.Last = ts
		if s.meta.Started.IsZero() {
			s.meta.Started = ts
		}
	}
	if s.meta.ID == "" {
		s.meta.ID = r.SessionID
	}
	if r.Cwd != "" {
		s.meta.Cwd = r.Cwd
	}
	if r.Version != "" {
		s.meta.Version = r.Version
	}
	switch r.Type {
	case "user":
		if r.Subtype != "" {
			// Text the user typed into a running turn (mid-turn steering):
			// the turn goes on.
			if t.Phase == phaseIdle || t.Phase == phaseNone {
				t.Phase, t.Since = phasePrompt, ts
			}
			return
		}
		// A prompt starts a turn. Calls a killed writer left without a
		// result stay without one: the process that ran them is gone.
		t.Phase, t.Since, t.Pending, t.Cancelled = phasePrompt, ts, nil, false
		if s.meta.Title == "" && r.Message != nil {
			for _, p := range r.Message.Parts {
				if txt := strings.TrimSpace(p.Text); txt != "" && !p.Thought {
					s.meta.Title = oneline.Cut(txt, maxTitle)
					break
				}
			}
		}
	case "assistant":
		calls := 0
		if r.Message != nil {
			for _, p := range r.Message.Parts {
				if c := p.FunctionCall; c != nil {
					calls++
					if len(t.Pending) < maxPending {
						t.Pending = append(t.Pending, call{ID: c.ID, Name: c.Name, Args: oneline.Cut(string(c.Args), 120), Since: ts})
					}
				}
			}
		}
		t.Cancelled = false
		switch {
		case calls > 0 || len(t.Pending) > 0:
			t.Phase = phaseCalls
		default:
			t.Phase = phaseIdle
		}
	case "tool_result":
		if r.Message != nil {
			for _, p := range r.Message.Parts {
				if fr := p.FunctionResponse; fr != nil {
					t.resolve(fr.ID)
				}
			}
		}
		if tr := r.ToolCallResult; tr != nil {
			if tr.Status != "" && !knownStatus(tr.Status) {
				s.drift.Add(adapters.DriftStatus, tr.Status)
			}
			t.resolve(tr.CallID)
			if tr.Status == "cancelled" {
				t.Cancelled = true
			}
		}
		switch {
		case len(t.Pending) > 0:
			t.Phase = phaseCalls
		case t.Cancelled:
			t.Phase = phaseIdle
		default:
			t.Phase = phaseResults
		}
	case "system":
		// Subtypes (ui_telemetry, attribution_snapshot, …) say nothing of
		// the turn: none is drift.
	default:
		// A record of a type 0.24.4 does not write: its time counts, it
		// says nothing of the turn.
		s.drift.Add(adapters.DriftLineType, r.Type)
	}
}

// resolve drops the pending call id.
func (t *turn) resolve(id string) {
	if id == "" {
		return
	}
	for i, c := range t.Pending {
		if c.ID == id {
			t.Pending = append(t.Pending[:i:i], t.Pending[i+1:]...)
			return
		}
	}
}

// busy reports whether the chat says a turn runs.
func (t *turn) busy() bool {
	return t.Phase == phasePrompt || t.Phase == phaseCalls || t.Phase == phaseResults
}

// clone copies s, so a read that fails leaves the state it started from.
func (s *state) clone() state {
	c := *s
	c.turn.Pending = append([]call(nil), s.turn.Pending...)
	return c
}

// Reading. A chat is read forward, in chunks, from where the last read
// ended: the end of the last whole line. An unfinished last line (being
// written) is read once it ends. A line longer than maxLine is skipped
// (counted in long) without being held in memory.
const (
	readChunk      = 256 << 10
	defaultMaxLine = 64 << 20
)

// chunks are readFrom's read buffers, kept between reads: a first pass
// reads every chat once, and a new buffer per chat was 174 MB allocated
// and zeroed over 2,000 chats. What apply keeps it copies (the buffer is
// already reused from one chunk to the next).
var chunks = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// errShrunk: the file is shorter than where the last read ended.
var errShrunk = errors.New("file shrank")

// readFrom applies the whole lines of r between from and size to s and
// returns where the next read starts.
func readFrom(r io.ReaderAt, from, size int64, maxLine int, s *state) (int64, error) {
	if size < from {
		return from, errShrunk
	}
	var (
		buf     []byte
		pos     = from // file offset of buf[0]
		off     = from // next byte to read
		skip    bool   // inside a line longer than maxLine
		lineEnd = from // end of the last whole line
	)
	cp := chunks.Get().(*[]byte)
	defer chunks.Put(cp)
	chunk := (*cp)[:min(readChunk, size-from)]
	for off < size {
		n := int64(len(chunk))
		if size-off < n {
			n = size - off
		}
		got, err := r.ReadAt(chunk[:n], off)
		if got == 0 && err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return lineEnd, err
		}
		off += int64(got)
		data := chunk[:got]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if skip {
				if i < 0 {
					pos += int64(len(data))
					data = nil
					continue
				}
				skip = false
				pos += int64(i + 1)
				lineEnd = pos
				data = data[i+1:]
				continue
			}
			if i < 0 {
				if len(buf)+len(data) > maxLine {
					s.long++
					skip = true
					pos += int64(len(buf) + len(data))
					buf = buf[:0]
				} else {
					buf = append(buf, data...)
				}
				data = nil
				continue
			}
			var line []byte
			if len(buf) > 0 {
				buf = append(buf, data[:i]...)
				line = buf
			} else {
				line = data[:i]
			}
			if len(line) > maxLine {
				s.long++
			} else {
				s.apply(line)
			}
			pos += int64(len(line) + 1)
			lineEnd = pos
			buf = buf[:0]
			data = data[i+1:]
		}
	}
	if skip {
		// The long line has not ended yet: it is looked at again, from its
		// start, once it has; not counted twice.
		s.long--
	}
	return lineEnd, nil
}

// sessionOK checks what the first record says against the file's name.
func (s *state) sessionErr(id string) error {
	if s.meta.ID != "" && s.meta.ID != id {
		return fmt.Errorf("records name session %s, not %s (the file's name)", s.meta.ID, id)
	}
	return nil
}
