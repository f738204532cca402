package codex

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
)

// A rollout is one JSON object per line, {"timestamp", "ordinal", "type",
// "payload"}, appended with one write per line and never rewritten (a
// resume appends to the same file). Line 0 is the session_meta (about 21
// KB: it embeds the base instructions). A turn is "event_msg"
// task_started ... task_complete or turn_aborted; a tool call is a
// "response_item" function_call (or custom_tool_call) answered by its
// *_output with the same call_id. Any other item type is skipped, whatever
// its payload (0.171.0 adds id_allocation and token_usage_record, both
// known; a type not in knownItems is counted as drift). Checked
// on 0.169.0 (internal/testkit/codextest/testdata/) and 0.171.0.

// meta is what the session_meta line says of the session.
type meta struct {
	ID         string
	Cwd        string
	CLIVersion string
	Originator string // codex_exec, codex-tui
	Source     string // exec, cli, vscode, or a JSON object for subagents
	ForkedFrom string
	Started    time.Time
	// Title is the first prompt the user typed, when the head window holds
	// it (Codex's own environment messages are not prompts).
	Title string
}

// call is a tool call without its output yet.
type call struct {
	ID    string
	Name  string
	Args  string // shortened
	Since time.Time
}

// turn is the turn state a rollout's lines say, read forward.
type turn struct {
	// Known: a turn boundary was seen, or the lines read reach back to the
	// file's start, so Busy and Pending are the whole truth.
	Known   bool
	Busy    bool
	TurnID  string
	Since   time.Time // the running turn's task_started
	Pending []call
	// Aborted is the reason of the last turn_aborted, when the last turn
	// ended so.
	Aborted string
	// Last is the time of the last line read.
	Last time.Time
	// Drift is what the turn's lines (from its boundary on) showed that
	// sessiond does not understand: rollout item types 0.169.0 does not
	// write. Scoped to the turn as the state is, so an append read and a
	// read of the whole tail say the same.
	Drift kit.Seen
}

// knownItems are the rollout item types (a line's top-level "type")
// Codex writes: 0.169.0's, and 0.171.0's token_usage_record and
// id_allocation.
var knownItems = [...]string{"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state", "token_usage_record", "id_allocation"}

// noteItem counts a line's item type when it is not one of knownItems. The
// type is read where Codex writes it, before the payload
// ({"timestamp", "ordinal", "type", "payload"}), without decoding the
// line; a line of another layout is not looked at.
func (t *turn) noteItem(raw []byte) {
	const key = `"type":"`
	i := bytes.Index(raw, []byte(key))
	if i < 0 {
		return
	}
	if p := bytes.Index(raw, []byte(`"payload"`)); p >= 0 && p < i {
		return
	}
	rest := raw[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j <= 0 || bytes.IndexByte(rest[:j], '\\') >= 0 {
		return
	}
	typ := rest[:j]
	for _, k := range knownItems {
		if string(typ) == k {
			return
		}
	}
	t.Drift.Add(adapters.DriftLineType, string(typ))
}

// line is the part of a rollout line the adapter reads.
type line struct {
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Payload   struct {
		Type string `json:"type"`
		// event_msg task_started / task_complete / turn_aborted
		TurnID string `json:"turn_id"`
		Reason string `json:"reason"`
		// response_item function_call, custom_tool_call and their outputs
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Input     string `json:"input"`
		// response_item message
		Role    string            `json:"role"`
		Content []json.RawMessage `json:"content"`
		// session_meta
		ID           string          `json:"id"`
		Cwd          string          `json:"cwd"`
		CLIVersion   string          `json:"cli_version"`
		Originator   string          `json:"originator"`
		Source       json.RawMessage `json:"source"`
		ForkedFromID string          `json:"forked_from_id"`
		Started      string          `json:"timestamp"`
	} `json:"payload"`
}

func (l *line) time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, l.Timestamp)
	return t
}

// errNotMeta: the first line is not a session_meta.
var errNotMeta = errors.New("first line is not a session_meta")

// parseMeta reads the session_meta of the first line.
func parseMeta(first []byte) (meta, error) {
	var l line
	if err := json.Unmarshal(first, &l); err != nil {
		return meta{}, fmt.Errorf("session_meta: %w", err)
	}
	if l.Type != "session_meta" {
		return meta{}, errNotMeta
	}
	p := &l.Payload
	m := meta{ID: p.ID, Cwd: p.Cwd, CLIVersion: p.CLIVersion, Originator: p.Originator, ForkedFrom: p.ForkedFromID}
	var src string
	if json.Unmarshal(p.Source, &src) == nil {
		m.Source = src
	} else if len(p.Source) > 0 {
		var b bytes.Buffer
		if json.Compact(&b, p.Source) == nil {
			m.Source = oneline.Cut(b.String(), 80)
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, p.Started); err == nil {
		m.Started = t
	} else {
		m.Started = l.time()
	}
	return m, nil
}

// prompt returns the text of a user message line that is a prompt the user
// typed, not one of Codex's own context messages (<environment_context>
// and the like, sent as user messages too).
func prompt(raw []byte) string {
	if !bytes.Contains(raw, []byte(`"role":"user"`)) {
		return ""
	}
	var l line
	if json.Unmarshal(raw, &l) != nil || l.Type != "response_item" || l.Payload.Type != "message" || l.Payload.Role != "user" {
		return ""
	}
	for _, c := range l.Payload.Content {
		var blk struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &blk) != nil || blk.Type != "input_text" {
			continue
		}
		t := strings.TrimSpace(blk.Text)
		if t == "" || strings.HasPrefix(t, "<") {
			continue
		}
		return oneline.Cut(t, maxTitle)
	}
	return ""
}

const maxTitle = 120

// apply moves the turn state over one line. It reports whether the line is
// a turn boundary. A line that does not parse is skipped (counted by the
// caller): Codex writes a line in one write, so a bad line is damage, and
// the rest still says the turn state.
func (t *turn) apply(raw []byte) (ok bool) {
	// Most lines are none of the kinds read here: look for the kinds
	// before decoding (a token_count or world_state line is kilobytes).
	if !bytes.Contains(raw, []byte(`"task_`)) && !bytes.Contains(raw, []byte(`"turn_aborted"`)) &&
		!bytes.Contains(raw, []byte(`call`)) {
		if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
			t.touch(raw)
			t.noteItem(raw)
			return true
		}
		return false
	}
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		// An item of a type read here in a shape it does not know is
		// damage; any other item is one this reader need not know (0.171.0
		// adds id_allocation, token_usage_record), whatever its payload.
		var env struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &env) != nil || env.Type == "event_msg" || env.Type == "response_item" {
			return false
		}
		t.touch(raw)
		return true
	}
	switch l.Type {
	case "event_msg":
		switch l.Payload.Type {
		case "task_started", "task_complete", "turn_aborted":
			t.Drift = kit.Seen{} // a boundary: the turn's lines start here
		}
	default:
		t.noteItem(raw)
	}
	ts := l.time()
	if !ts.IsZero() {
		t.Last = ts
	}
	p := &l.Payload
	switch l.Type {
	case "event_msg":
		switch p.Type {
		case "task_started":
			t.Known, t.Busy, t.TurnID, t.Since, t.Pending, t.Aborted = true, true, p.TurnID, ts, nil, ""
		case "task_complete":
			t.Known, t.Busy, t.TurnID, t.Pending, t.Aborted = true, false, p.TurnID, nil, ""
		case "turn_aborted":
			t.Known, t.Busy, t.TurnID, t.Pending, t.Aborted = true, false, p.TurnID, nil, p.Reason
			if t.Aborted == "" {
				t.Aborted = "aborted"
			}
		}
	case "response_item":
		switch p.Type {
		case "function_call", "custom_tool_call", "local_shell_call":
			if p.CallID != "" {
				args := p.Arguments
				if args == "" {
					args = p.Input
				}
				t.Pending = append(t.Pending, call{ID: p.CallID, Name: p.Name, Args: oneline.Cut(args, 120), Since: ts})
			}
		case "function_call_output", "custom_tool_call_output", "local_shell_call_output":
			for i, c := range t.Pending {
				if c.ID == p.CallID {
					t.Pending = append(t.Pending[:i:i], t.Pending[i+1:]...)
					break
				}
			}
		}
	}
	return true
}

// touch takes the time of a line not otherwise read.
func (t *turn) touch(raw []byte) {
	const key = `"timestamp":"`
	i := bytes.Index(raw, []byte(key))
	if i < 0 || i > 16 {
		return
	}
	rest := raw[i+len(key):]
	if j := bytes.IndexByte(rest, '"'); j > 0 {
		if ts, err := time.Parse(time.RFC3339Nano, string(rest[:j])); err == nil {
			t.Last = ts
		}
	}
}

// boundary reports whether raw is a turn boundary line, without decoding
// it unless it may be one.
func boundary(raw []byte) bool {
	if !bytes.Contains(raw, []byte(`"event_msg"`)) {
		return false
	}
	if !bytes.Contains(raw, []byte(`"task_started"`)) && !bytes.Contains(raw, []byte(`"task_complete"`)) &&
		!bytes.Contains(raw, []byte(`"turn_aborted"`)) {
		return false
	}
	var l line
	if json.Unmarshal(raw, &l) != nil || l.Type != "event_msg" {
		return false
	}
	switch l.Payload.Type {
	case "task_started", "task_complete", "turn_aborted":
		return true
	}
	return false
}

// readResult is what one read of a rollout found.
type readResult struct {
	meta    meta
	hasMeta bool
	turn    turn
	// offset is the end of the last complete line read: where the next
	// append read starts.
	offset int64
	// bad counts lines skipped as unparseable.
	bad int
}

// Window sizes: the head is read in chunks until the first line (the
// session_meta, ~21 KB on 0.169.0) ends, and on up to titleHead for the
// first prompt (~31 KB in for exec, ~40 KB for the TUI); the tail from 16 KiB, doubling
// until a turn boundary is in it.
const (
	headChunk   = 32 << 10
	maxHead     = 1 << 20
	titleHead   = 96 << 10
	tailStart   = 16 << 10
	defaultTail = 4 << 20
)

// readHead reads the first line, and the first prompt if the head holds
// it. It returns the bytes read (to be reused by the tail read when the
// whole file was read).
func readHead(r io.ReaderAt, size int64) (meta, []byte, error) {
	n := min(size, headChunk)
	for {
		buf := make([]byte, n)
		got, err := r.ReadAt(buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return meta{}, nil, err
		}
		buf = buf[:got]
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			m, err := parseMeta(buf[:i])
			if err != nil {
				return meta{}, buf, err
			}
			rest := buf[i+1:]
			for m.Title == "" {
				j := bytes.IndexByte(rest, '\n')
				if j >= 0 {
					m.Title = prompt(rest[:j])
					rest = rest[j+1:]
					continue
				}
				// The prompt follows Codex's own instructions, environment
				// and world state (~40 KB from the start in the 0.169.0
				// TUI): read on for it, a chunk at a time, up to titleHead.
				have := int64(len(buf))
				if have >= size || have >= titleHead {
					break
				}
				more := make([]byte, min(size, have+headChunk, titleHead)-have)
				got, err := r.ReadAt(more, have)
				if err != nil && !errors.Is(err, io.EOF) {
					break
				}
				buf = append(buf, more[:got]...)
				rest = buf[len(buf)-got-len(rest):]
			}
			return m, buf, nil
		}
		if int64(got) >= size || n >= maxHead {
			return meta{}, buf, fmt.Errorf("the first line is longer than %d bytes or unfinished", n)
		}
		n = min(size, n*2)
	}
}

// readTail reads the turn state from the end of the file backwards: a
// window from tailStart, doubling up to maxTail, until a turn boundary is
// in it; from the last boundary on, the lines say the state.
func readTail(r io.ReaderAt, size, maxTail int64, res *readResult) error {
	w := min(size, int64(tailStart))
	for {
		start := size - w
		buf := make([]byte, w)
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
			for _, l := range lines[from:] {
				if !t.apply(l) {
					res.bad++
				}
			}
			// Without a boundary the state is whole only when the lines read
			// reach the file's start.
			t.Known = t.Known || start == 0
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

// readAppended applies the lines appended since offset to t.
func readAppended(r io.ReaderAt, offset, size int64, res *readResult) error {
	buf := make([]byte, size-offset)
	got, err := r.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	buf = buf[:got]
	end := bytes.LastIndexByte(buf, '\n') + 1
	// A rollout first read before its first prompt was written (the TUI
	// writes its session_meta, then its instructions, then the prompt)
	// gets its title from the lines appended since, while they start
	// within the head window readHead would have searched.
	wantTitle := res.hasMeta && res.meta.Title == "" && offset < titleHead
	for _, l := range splitLines(buf[:end]) {
		if wantTitle {
			if t := prompt(l); t != "" {
				res.meta.Title, wantTitle = t, false
			}
		}
		if !res.turn.apply(l) {
			res.bad++
		}
	}
	res.offset = offset + int64(end)
	return nil
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
