package pi

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

// A session file is one JSON object per line, appended as the session
// goes (docs/agents/pi.md). Line 0 is the header,
// {"type":"session","version":3,"id","timestamp","cwd"}; every other line
// is an entry with "type", "id", "parentId" and "timestamp": model_change,
// thinking_level_change, message (its "message" has "role" user,
// assistant or toolResult, and "content" blocks), session_info (a name the
// user gave), compaction, custom. An assistant message's "stopReason" says
// how its reply ended: "toolUse" when its toolCall blocks wait for their
// toolResult messages (matched by toolCallId), "stop" when the turn is
// over, "error" or "aborted" when it was cut.

// header is what the first line says of the session.
type header struct {
	ID      string
	Version int
	Cwd     string
	Started time.Time
	// Parent is the session this one was forked from (parentSession).
	Parent string
}

// call is a tool call without its result yet.
type call struct {
	ID    string
	Name  string
	Args  string // shortened
	Since time.Time
}

// turn is the turn state a session's lines say, read forward.
type turn struct {
	// Known: a boundary (a prompt, or a reply that ended the turn) was
	// seen, or the lines read reach back to the file's start, so the
	// state is the whole truth.
	Known bool
	// Busy: a prompt or tool results wait for the model, or tool calls
	// for their results.
	Busy bool
	// Since is when the running turn started (its prompt).
	Since time.Time
	// Waiting is the time of the last line that left the model to answer
	// (a prompt, a tool result): with Busy and no Pending, the message
	// that never got its reply.
	Waiting time.Time
	// Pending are the tool calls without results, in order.
	Pending []call
	// Stop is how the last reply ended (its stopReason) when the turn is
	// over; "" while busy or before any reply.
	Stop string
	// Last is the time of the last line read.
	Last time.Time
	// Title is the first prompt's text, or the name the user gave
	// (session_info), which wins.
	Title string
	named bool
	// Drift is what the turn's lines (from its boundary on) showed that
	// sessiond does not understand: an entry type, a message role or a
	// stopReason 0.73.1 does not write, a field of another JSON type.
	// Scoped to the turn as the state is, so an append read and a read of
	// the whole tail say the same.
	Drift kit.Seen
}

// knownEntries are the entry types (a line's "type") Pi 0.73.1 writes
// (its session manager); knownRoles the roles of a message entry;
// knownStops the stopReasons of an assistant message.
var (
	knownEntries = []string{"session", "message", "model_change", "thinking_level_change", "compaction", "branch_summary",
		"custom", "custom_message", "label", "session_info"}
	knownRoles = []string{"user", "assistant", "toolResult", "bashExecution", "custom", "branchSummary", "compactionSummary"}
	knownStops = []string{"stop", "length", "toolUse", "error", "aborted"}
)

func known(set []string, v string) bool {
	for _, k := range set {
		if k == v {
			return true
		}
	}
	return false
}

// driftVersion is the version drift is counted under: the session
// format the header names (Pi writes no version of its own in a session
// file), "" when the header was not read.
func (h header) driftVersion() string {
	if h.Version == 0 {
		return ""
	}
	return fmt.Sprintf("session format %d", h.Version)
}

// line is the part of a session line the adapter reads.
type line struct {
	Type          string `json:"type"`
	Timestamp     string `json:"timestamp"`
	ID            string `json:"id"`
	Version       int    `json:"version"`
	Cwd           string `json:"cwd"`
	ParentSession string `json:"parentSession"`
	Name          string `json:"name"`
	Message       *struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		StopReason string          `json:"stopReason"`
		ToolCallID string          `json:"toolCallId"`
		ToolName   string          `json:"toolName"`
	} `json:"message"`
}

// block is one content block of a message.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func (l *line) time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, l.Timestamp)
	return t
}

// blocks are a message's content blocks: a string content is one text
// block.
func blocks(raw json.RawMessage) []block {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return []block{{Type: "text", Text: s}}
		}
		return nil
	}
	var out []block
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return out
}

// errNotHeader: the first line is not a session header.
var errNotHeader = errors.New(`first line is not a session header ({"type":"session",…})`)

// parseHeader reads the header of the first line.
func parseHeader(first []byte) (header, error) {
	var l line
	if err := json.Unmarshal(first, &l); err != nil {
		return header{}, fmt.Errorf("session header: %w", err)
	}
	if l.Type != "session" {
		return header{}, errNotHeader
	}
	return header{ID: l.ID, Version: l.Version, Cwd: l.Cwd, Started: l.time(), Parent: l.ParentSession}, nil
}

const (
	maxTitle = 120
	maxArgs  = 120
)

// apply moves the turn state over one line. It reports whether the line
// parsed: a line that does not is skipped (counted by the caller), and the
// rest still says the state. The header line parses and changes nothing
// but Last.
func (t *turn) apply(raw []byte) bool {
	var l line
	err := json.Unmarshal(raw, &l)
	field, retyped := kit.FieldType(err)
	if retyped {
		err = nil // that field is not used; the rest of the line is
	}
	if err != nil || l.Type == "" {
		return false
	}
	if endsState(&l) {
		t.Drift = kit.Seen{} // a boundary: the turn's lines start here
	}
	if retyped {
		t.Drift.Add(adapters.DriftFieldType, field)
	}
	if !known(knownEntries, l.Type) {
		t.Drift.Add(adapters.DriftLineType, l.Type)
	}
	if m := l.Message; l.Type == "message" && m != nil {
		if !known(knownRoles, m.Role) {
			t.Drift.Add(adapters.DriftLineType, "message:"+m.Role)
		}
		if m.Role == "assistant" && m.StopReason != "" && !known(knownStops, m.StopReason) {
			t.Drift.Add(adapters.DriftStatus, m.StopReason)
		}
	}
	ts := l.time()
	if !ts.IsZero() {
		t.Last = ts
	}
	switch l.Type {
	case "session_info":
		if n := strings.TrimSpace(l.Name); n != "" {
			t.Title, t.named = oneline.Cut(n, maxTitle), true
		}
	case "message":
		m := l.Message
		if m == nil {
			return true
		}
		switch m.Role {
		case "user":
			// A prompt: whatever was pending before is over (Pi answers
			// nothing of an earlier turn once a new one starts).
			// A boundary: what came before says nothing of the state from
			// here, its time included (a read from here on must agree).
			t.Known, t.Busy, t.Since, t.Waiting, t.Pending, t.Stop, t.Last = true, true, ts, ts, nil, "", ts
			if !t.named && t.Title == "" {
				for _, b := range blocks(m.Content) {
					if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
						t.Title = oneline.Cut(b.Text, maxTitle)
						break
					}
				}
			}
		case "assistant":
			var calls []call
			for _, b := range blocks(m.Content) {
				if b.Type == "toolCall" && b.ID != "" {
					calls = append(calls, call{ID: b.ID, Name: b.Name, Args: oneline.Cut(string(b.Arguments), maxArgs), Since: ts})
				}
			}
			if m.StopReason == "toolUse" || (m.StopReason == "" && len(calls) > 0) {
				t.Busy, t.Pending, t.Stop = true, append(t.Pending, calls...), ""
				if t.Since.IsZero() {
					t.Since = ts
				}
				return true
			}
			// The reply ended the turn (stop, error, aborted, length): no
			// call of it runs, whatever it listed.
			t.Known, t.Busy, t.Pending, t.Stop, t.Last = true, false, nil, m.StopReason, ts
			t.Since, t.Waiting = time.Time{}, time.Time{}
			if t.Stop == "" {
				t.Stop = "stop"
			}
		case "toolResult":
			for i, c := range t.Pending {
				if c.ID == m.ToolCallID {
					t.Pending = append(t.Pending[:i:i], t.Pending[i+1:]...)
					break
				}
			}
			if t.Busy {
				t.Waiting = ts
			}
		}
	}
	return true
}

// endsState reports whether l is a boundary as apply takes it: a prompt,
// or an assistant reply that ended its turn (any stopReason but toolUse;
// without one, no tool call).
func endsState(l *line) bool {
	m := l.Message
	if l.Type != "message" || m == nil {
		return false
	}
	switch m.Role {
	case "user":
		return true
	case "assistant":
		if m.StopReason != "" {
			return m.StopReason != "toolUse"
		}
		for _, b := range blocks(m.Content) {
			if b.Type == "toolCall" && b.ID != "" {
				return false
			}
		}
		return true
	}
	return false
}

// boundary reports whether raw starts a state of its own: a prompt, or a
// reply that ended its turn. From the last boundary on, the lines say the
// whole state.
func boundary(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`"message"`)) {
		return false
	}
	if !bytes.Contains(raw, []byte(`"user"`)) && !bytes.Contains(raw, []byte(`"stopReason"`)) {
		return false
	}
	var t turn
	return t.apply(raw) && t.Known
}

// readResult is what one read of a session file found.
type readResult struct {
	head    header
	hasHead bool
	turn    turn
	// offset is the end of the last complete line read: where the next
	// append read starts.
	offset int64
	// bad counts lines skipped as unparseable.
	bad int
	// long counts lines skipped as longer than maxLine.
	long int
}

// Window sizes: the head is read until the first line ends (a few hundred
// bytes); the tail from 16 KiB, doubling until a boundary is in it.
const (
	headChunk   = 4 << 10
	maxHead     = 1 << 20
	tailStart   = 16 << 10
	defaultTail = 8 << 20
)

// maxLine bounds one appended line held in memory; a longer one (a tool's
// output pasted whole) is skipped and counted. A variable for tests.
var maxLine = 64 << 20

// readHead reads the header of the first line.
func readHead(r io.ReaderAt, size int64) (header, error) {
	n := min(size, headChunk)
	for {
		buf := make([]byte, n)
		got, err := r.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return header{}, err
		}
		buf = buf[:got]
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			return parseHeader(buf[:i])
		}
		if int64(got) >= size || n >= maxHead {
			return header{}, fmt.Errorf("the first line is longer than %d bytes or unfinished", n)
		}
		n = min(size, n*2)
	}
}

// readTail reads the turn state from the end of the file backwards: a
// window from tailStart, doubling up to maxTail, until a boundary is in
// it; from the last boundary on, the lines say the state.
func readTail(r io.ReaderAt, size, maxTail int64, res *readResult) error {
	w := min(size, int64(tailStart))
	bp := tailBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= maxPooledTail {
			tailBufs.Put(bp)
		}
	}()
	for {
		start := size - w
		if int64(cap(*bp)) < w {
			*bp = make([]byte, w)
		}
		buf := (*bp)[:w]
		got, err := r.ReadAt(buf, start)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		buf = buf[:got]
		// Complete lines only: drop a partial first line (unless the window
		// starts the file) and an unfinished last one.
		end := bytes.LastIndexByte(buf, '\n') + 1
		body := buf[:end]
		if start > 0 {
			i := bytes.IndexByte(body, '\n')
			if i < 0 {
				body = nil
			} else {
				body = body[i+1:]
			}
		}
		lines := splitLines(body)
		from := -1
		for i := len(lines) - 1; i >= 0; i-- {
			if boundary(lines[i]) {
				from = i
				break
			}
		}
		if from >= 0 || start == 0 || w >= maxTail {
			t := turn{}
			if from < 0 {
				from = 0
			}
			// Lines before the boundary say nothing of the state, but
			// damage in them is named all the same (jsonscan: the answers
			// of json.Valid, eight bytes at a time).
			for _, l := range lines[:from] {
				if !jsonscan.Valid(l) {
					res.bad++
				}
			}
			for _, l := range lines[from:] {
				if !t.apply(l) {
					res.bad++
				}
			}
			t.Known = t.Known || start == 0
			// The title is the first prompt's (or the name given), which
			// the lines from the last boundary need not hold: readTitle
			// finds it in the head.
			t.Title, t.named = "", false
			res.turn = t
			res.offset = start + int64(end)
			if start == 0 && end == 0 {
				res.offset = 0
			}
			return nil
		}
		w = min(size, w*2, maxTail)
	}
}

// tailBufs keeps the windows tails are read into: a first pass reads
// every file's, and a new one per file was a third of that pass's
// allocations. A turn keeps strings and values, never the window's bytes.
// A window grown past maxPooledTail is let go.
var tailBufs = sync.Pool{New: func() any { b := make([]byte, tailStart); return &b }}

const maxPooledTail = 1 << 20

// titleHead bounds how far from the start the first prompt is looked for.
const titleHead = 256 << 10

// readTitle finds the session's name or first prompt in the head of the
// file, when the tail read did not reach it.
func readTitle(r io.ReaderAt, size int64) string {
	bp := titleBufs.Get().(*[]byte)
	defer titleBufs.Put(bp)
	buf := (*bp)[:min(size, titleHead)]
	got, err := r.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	buf = buf[:got]
	return titleOf(buf[:bytes.LastIndexByte(buf, '\n')+1])
}

// titleBufs keeps the buffers heads are read into for their title.
var titleBufs = sync.Pool{New: func() any { b := make([]byte, titleHead); return &b }}

var sessionInfo = []byte(`"session_info"`)

// titleOf is the name or first prompt the lines of head say: applied in
// order, each line that may name the first prompt (it holds "user")
// until one did, and every session_info line. Once a title is known it
// goes from one "session_info" to the next (one search of the head, not
// one per line).
func titleOf(head []byte) string {
	var t turn
	for len(head) > 0 {
		if t.Title == "" {
			i := bytes.IndexByte(head, '\n')
			if i < 0 {
				i = len(head)
			}
			if l := bytes.TrimSpace(head[:i]); len(l) > 0 && (bytes.Contains(l, []byte(`"user"`)) || bytes.Contains(l, sessionInfo)) {
				t.apply(l)
			}
			head = head[min(i+1, len(head)):]
			continue
		}
		j := bytes.Index(head, sessionInfo)
		if j < 0 {
			break
		}
		start := bytes.LastIndexByte(head[:j], '\n') + 1
		end := len(head)
		if k := bytes.IndexByte(head[j:], '\n'); k >= 0 {
			end = j + k
		}
		t.apply(bytes.TrimSpace(head[start:end]))
		head = head[min(end+1, len(head)):]
	}
	return t.Title
}

// readAppended applies the lines appended since offset to res.turn, a
// chunk at a time; a line longer than maxLine is skipped whole.
func readAppended(r io.ReaderAt, offset, size int64, res *readResult) error {
	const chunk = 1 << 20
	pos := offset
	var carry []byte
	skipping := false
	for pos < size {
		buf := make([]byte, min(size-pos, chunk))
		got, err := r.ReadAt(buf, pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if got == 0 {
			break
		}
		buf = buf[:got]
		pos += int64(got)
		for len(buf) > 0 {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				if !skipping {
					carry = append(carry, buf...)
					if len(carry) > maxLine {
						carry, skipping = nil, true
					}
				}
				break
			}
			if skipping {
				res.long++
				skipping = false
			} else {
				l := append(carry, buf[:i]...)
				if len(l) > maxLine {
					res.long++
				} else if l = bytes.TrimSpace(l); len(l) > 0 {
					applyTitled(res, l)
				}
			}
			carry = carry[:0]
			buf = buf[i+1:]
			res.offset = pos - int64(len(buf))
		}
	}
	return nil
}

// applyTitled applies l, keeping a title already known.
func applyTitled(res *readResult, l []byte) {
	if !res.turn.apply(l) {
		res.bad++
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			i = len(b)
		}
		if l := bytes.TrimSpace(b[:i]); len(l) > 0 {
			out = append(out, l)
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}
