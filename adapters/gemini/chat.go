package gemini

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/lib/jsonscan"
)

// A chat file, as Gemini CLI 0.61.0 writes it (its ChatRecordingService,
// observed in docs/agents/gemini.md), is a log of JSON lines, each one of:
//
//   - the header, first: {sessionId, projectHash, startTime, lastUpdated,
//     kind: "main"|"subagent", directories?};
//   - a message record {id, timestamp, type: user|gemini|info|error|warning,
//     content, toolCalls?, ...}: a record whose id was seen before replaces
//     that message where it stands (a gemini message is written again as
//     its tool calls' statuses change);
//   - {"$set": {...}}: header fields changed (lastUpdated, summary), or,
//     with "messages", the whole conversation replaced;
//   - {"$rewindTo": id}: that message and every one after it removed (all
//     of them when the id is unknown).
//
// A reader folds the lines into a chat, keeping only what the adapter
// reports: the header, the first user prompt (the title), and the last
// maxKept messages in order (the last one says the turn state). Folding is
// incremental: the lines appended since the last read are folded into the
// state as it was, which must equal folding the whole file (held by the
// differential test and the fuzzer): the fold is a function of the lines
// alone, whatever reads they came in.

// maxKept bounds the messages a chat keeps (the last ones). The turn
// state needs the last one (turn); the few before it keep a rewind to a
// recent message from emptying the chat. 32 kept held half of the
// adapter's 17 MiB over 2,000 chats, for rewinds that go back a turn or two.
const maxKept = 4

// maxLine bounds one line: a longer one is skipped (counted as bad) without
// being held in memory. "$set" lines carry the whole conversation, so the
// bound is generous. A variable for tests.
var maxLine = 64 << 20

// Tool call statuses (the scheduler's, 0.61.0).
const (
	statusValidating = "validating"
	statusScheduled  = "scheduled"
	statusApproval   = "awaiting_approval"
	statusExecuting  = "executing"
	statusSuccess    = "success"
	statusError      = "error"
	statusCancelled  = "cancelled"
)

// knownStatus reports whether a tool call's status is one 0.61.0 writes.
func knownStatus(status string) bool {
	switch status {
	case statusValidating, statusScheduled, statusApproval, statusExecuting, statusSuccess, statusError, statusCancelled:
		return true
	}
	return false
}

// knownType reports whether a message's type is one 0.61.0 writes.
func knownType(typ string) bool {
	switch typ {
	case "user", "gemini", "info", "error", "warning":
		return true
	}
	return false
}

// done reports whether a tool call's status is final.
func done(status string) bool {
	return status == statusSuccess || status == statusError || status == statusCancelled
}

// call is one tool call of a gemini message.
type call struct {
	ID, Name, Status string
	// Args is a short form of the arguments (a shell command, a file).
	Args string
	At   time.Time
}

// message is what a chat keeps of one message.
type message struct {
	ID   string
	Type string
	At   time.Time
	// Text: a gemini message has text (an answer, not only calls); a
	// user message has a prompt (not only tool results).
	Text  bool
	Calls []call
}

// typeContext is the Type kept for the <session_context> user message
// Gemini CLI writes at a session's start: setup, not a prompt.
const typeContext = "context"

// chat is a chat file folded.
type chat struct {
	// Header fields.
	ID, ProjectHash, Kind, Summary string
	Started, Updated               time.Time
	HasHeader                      bool
	// Title is the first user prompt, cut to fit.
	Title string
	// Msgs are the last messages, oldest first; Dropped says whether
	// earlier ones were dropped to keep maxKept.
	Msgs    []message
	Dropped bool
	// Seen are the ids of every message present, hashed: a record of an
	// id dropped from Msgs replaces a message no longer kept, and moves
	// nothing.
	Seen idSet
	// Last is the time of the last message or header update.
	Last time.Time
	// Bad counts lines skipped: not JSON, not a record, or too long.
	Bad int
	// Drift is what the lines showed that sessiond does not understand
	// (kit.Seen): a message type or a tool call status 0.61.0 does not
	// write, a "$" operation it does not know, a field of another JSON
	// type. Gemini CLI writes no version of its own in a chat.
	Drift kit.Seen
}

// record is any line of a chat file; which fields are present tells its
// kind, in the order Gemini CLI's loader tests them.
type record struct {
	RewindTo  *string         `json:"$rewindTo"`
	ID        *string         `json:"id"`
	Set       json.RawMessage `json:"$set"`
	SessionID *string         `json:"sessionId"`

	ProjectHash *string    `json:"projectHash"`
	StartTime   string     `json:"startTime"`
	LastUpdated string     `json:"lastUpdated"`
	Kind        string     `json:"kind"`
	Summary     *string    `json:"summary"`
	Messages    *[]rawMsg  `json:"messages"`
	Type        string     `json:"type"`
	Timestamp   string     `json:"timestamp"`
	Content     partText   `json:"content"`
	ToolCalls   []toolCall `json:"toolCalls"`
}

// rawMsg is a message inside a $set or a whole-file chat.
type rawMsg struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	Timestamp string     `json:"timestamp"`
	Content   partText   `json:"content"`
	ToolCalls []toolCall `json:"toolCalls"`
}

type toolCall struct {
	ID        string         `json:"id"`
	Name      string         `json:"name"`
	Status    string         `json:"status"`
	Timestamp string         `json:"timestamp"`
	Args      map[string]any `json:"args"`
	// shown is argsText(Args) when the quick decoder read the call (it
	// builds no map).
	shown *string
}

// pruner leaves out of a line the members no fold reads: a tool call's
// result and its display, and a function's response sent back in a
// user message's content (the tool's output, twice: most of a chat's
// bytes), and a message's thoughts and token counts. None of these keys
// is a field of record, rawMsg or toolCall, in any case, and a
// content's text reads only its parts' "text" (partText); a call's args
// are decoded into a map, where every key may count (and a number too
// large for a float64 is an error), so they are kept whole.
var pruner = jsonscan.Pruner{Drop: []string{"result", "resultDisplay", "functionResponse", "thoughts", "tokens"}, Keep: []string{"args"}}

// fold applies one line. A line that is not a record is counted bad. It
// folds as apply does the whole line (FuzzFoldIsApply holds the two
// equal): a lastUpdated line or a plain message record without a
// decoder (quickUpdate, quickMessage), any other line decoded less what
// pruner drops, after jsonscan checked it at memory speed.
func (c *chat) fold(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if at, ok := quickUpdate(line); ok {
		c.header(&record{LastUpdated: at}, false)
		return
	}
	var m rawMsg
	if quickMessage(line, &m) {
		c.put(m)
		return
	}
	if !pruner.Use(line, c.apply) {
		c.Bad++
	}
}

// quickUpdate reads a line that only moves lastUpdated, as Gemini CLI
// writes one after each message (near half a chat's lines): exactly
// {"$set":{"lastUpdated":"<time>"}}, the time plain text. Its fold is
// the header's update, without a decoder.
func quickUpdate(line []byte) (string, bool) {
	const head, tail = `{"$set":{"lastUpdated":"`, `"}}`
	if len(line) < len(head)+len(tail) || string(line[:len(head)]) != head || string(line[len(line)-len(tail):]) != tail {
		return "", false
	}
	at := line[len(head) : len(line)-len(tail)]
	for _, c := range at {
		if c < 0x20 || c == '"' || c == '\\' || c >= 0x80 {
			return "", false
		}
	}
	return string(at), true
}

// apply applies one line, whole or pruned, decoding it with
// encoding/json.
func (c *chat) apply(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var r record
	if err := c.decode(line, &r); err != nil || line[0] != '{' {
		c.Bad++
		return
	}
	switch {
	case r.RewindTo != nil:
		c.rewind(*r.RewindTo)
	case r.ID != nil:
		c.put(rawMsg{ID: *r.ID, Type: r.Type, Timestamp: r.Timestamp, Content: r.Content, ToolCalls: r.ToolCalls})
	case len(r.Set) > 0 && r.Set[0] == '{':
		var s record
		if err := c.decode(r.Set, &s); err != nil {
			c.Bad++
			return
		}
		c.header(&s, false)
		if s.Messages != nil {
			c.replace(*s.Messages)
		}
	case r.SessionID != nil && r.ProjectHash != nil:
		c.header(&r, true)
	default:
		if op, ok := operation(line); ok {
			c.Drift.Add(adapters.DriftLineType, op)
			return
		}
		c.Bad++
	}
}

// decode decodes b into v. A field of another JSON type than the one
// read is noted as drift and left unused; the rest is decoded all the
// same (encoding/json goes on past it).
func (c *chat) decode(b []byte, v any) error {
	err := json.Unmarshal(b, v)
	if f, ok := kit.FieldType(err); ok {
		c.Drift.Add(adapters.DriftFieldType, f)
		return nil
	}
	return err
}

// operation is the "$" key of a line that is no record sessiond knows:
// an operation ("$set", "$rewindTo" are 0.61.0's) of a newer version.
func operation(line []byte) (string, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(line, &m) != nil {
		return "", false
	}
	op := ""
	for k := range m {
		if strings.HasPrefix(k, "$") && (op == "" || k < op) {
			op = k
		}
	}
	return op, op != ""
}

// header takes the header fields r has.
func (c *chat) header(r *record, first bool) {
	if first {
		c.HasHeader = true
	}
	if r.SessionID != nil && *r.SessionID != "" {
		c.ID = *r.SessionID
	}
	if r.ProjectHash != nil && *r.ProjectHash != "" {
		c.ProjectHash = *r.ProjectHash
	}
	if r.Kind != "" {
		c.Kind = r.Kind
	}
	if r.Summary != nil {
		c.Summary = oneline.Cut(*r.Summary, 200)
	}
	if t := parseTime(r.StartTime); !t.IsZero() {
		c.Started = t
	}
	if t := parseTime(r.LastUpdated); !t.IsZero() {
		c.Updated = t
		c.touch(t)
	}
}

func (c *chat) touch(t time.Time) {
	if t.After(c.Last) {
		c.Last = t
	}
}

// put adds a message, or replaces the one of its id where it stands.
func (c *chat) put(m rawMsg) {
	km := keep(m)
	if m.Type != "" && !knownType(m.Type) {
		c.Drift.Add(adapters.DriftLineType, m.Type)
	}
	for _, tc := range m.ToolCalls {
		if tc.Status != "" && !knownStatus(tc.Status) {
			c.Drift.Add(adapters.DriftStatus, tc.Status)
		}
	}
	c.touch(km.At)
	for _, tc := range km.Calls {
		c.touch(tc.At)
	}
	if c.Title == "" && km.Type == "user" {
		c.Title = oneline.Cut(string(m.Content), 200)
	}
	h := hashID(m.ID)
	if c.Seen.has(h) {
		for i := range c.Msgs {
			if c.Msgs[i].ID == m.ID {
				c.Msgs[i] = km
				return
			}
		}
		return // an update of a message no longer kept
	}
	c.Seen.add(h)
	c.Msgs = append(c.Msgs, km)
	if len(c.Msgs) > maxKept {
		// Moved down in place, not into a new array: a chat is folded
		// alone (a read folds a clone), and a new array per message was
		// a fifth of a first pass's allocations.
		n := copy(c.Msgs, c.Msgs[len(c.Msgs)-maxKept:])
		clear(c.Msgs[n:])
		c.Msgs = c.Msgs[:n]
		c.Dropped = true
	}
}

// replace replaces the whole conversation ($set messages).
func (c *chat) replace(msgs []rawMsg) {
	c.Msgs, c.Dropped, c.Seen = nil, false, nil
	for _, m := range msgs {
		c.put(m)
	}
}

// rewind removes the message id and every one after it. A message no
// longer kept is older than every kept one: they all go, and the chat
// keeps no last message (the turn ended: a rewind is the user's, between
// turns). An unknown id drops every message, as Gemini CLI's loader does.
func (c *chat) rewind(id string) {
	for i := range c.Msgs {
		if c.Msgs[i].ID == id {
			for _, m := range c.Msgs[i:] {
				c.Seen.del(hashID(m.ID))
			}
			c.Msgs = c.Msgs[:i]
			return
		}
	}
	if c.Dropped && c.Seen.has(hashID(id)) {
		for _, m := range c.Msgs {
			c.Seen.del(hashID(m.ID))
		}
		c.Seen.del(hashID(id))
		c.Msgs = nil
		return
	}
	c.Msgs, c.Dropped, c.Seen = nil, false, nil
}

// keep is what a chat keeps of a message.
func keep(m rawMsg) message {
	out := message{ID: m.ID, Type: m.Type, At: parseTime(m.Timestamp)}
	text := strings.TrimSpace(string(m.Content))
	out.Text = text != ""
	if m.Type == "user" && strings.HasPrefix(text, "<session_context>") {
		out.Type = typeContext
	}
	for _, tc := range m.ToolCalls {
		out.Calls = append(out.Calls, call{ID: oneline.Cut(tc.ID, 200), Name: oneline.Cut(tc.Name, 100), Status: oneline.Cut(tc.Status, 40),
			Args: tc.argsText(), At: parseTime(tc.Timestamp)})
	}
	return out
}

// argKeys are the arguments a user recognizes a call by, the first
// first.
var argKeys = [...]string{"command", "file_path", "absolute_path", "path", "pattern", "url", "query", "prompt"}

// argsText is the argument a user recognizes a call by.
func (tc *toolCall) argsText() string {
	if tc.shown != nil {
		return *tc.shown
	}
	for _, k := range argKeys {
		if s, ok := tc.Args[k].(string); ok && s != "" {
			return oneline.Cut(s, 200)
		}
	}
	return ""
}

func hashID(id string) uint64 {
	// FNV-1a, 64 bits (hash/fnv's New64a, without its allocation): the
	// hashes are saved (checkpoint.go), so the function must not change.
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= prime64
	}
	return h
}

// partText is the text of a PartListUnion (a message's content): a
// string, a part's "text", or a list of them joined. It is decoded from
// the JSON directly, reading nothing else: a number anywhere in it is no
// error (a float64 held it before), and parts' other members (a tool's
// response) may be pruned away.
type partText string

// UnmarshalJSON reads the text out of a content value, which
// encoding/json has checked.
func (t *partText) UnmarshalJSON(b []byte) error {
	var sb strings.Builder
	appendPartText(&sb, b, jsonscan.SkipSpace(b, 0), 0)
	*t = partText(sb.String())
	return nil
}

// appendPartText appends the text of the value at b[i] (depth containers
// down) and returns where the value ends: a string whole, an object's
// last "text" member when that is a string (a map keeps a key's last
// value), an array's elements' texts in order; nothing of any other
// value. It checks the value as it goes (ok false for one that is not
// JSON; then sb holds part of the text), so the quick decoder reads a
// content once.
func appendPartText(sb *strings.Builder, b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"':
		s, end, ok := jsonscan.String(b, i)
		if ok {
			sb.WriteString(jsonscan.Text(b, s))
		}
		return end, ok
	case '{':
		text, has := jsonscan.Str{}, false
		end, ok := jsonscan.Object(b, i, depth, func(k jsonscan.Str, v int) (int, bool) {
			if !jsonscan.KeyIs(b, k, "text") {
				return jsonscan.Value(b, v, depth+1)
			}
			has = b[v] == '"'
			if !has {
				return jsonscan.Value(b, v, depth+1)
			}
			var end int
			var ok bool
			text, end, ok = jsonscan.String(b, v)
			return end, ok
		})
		if ok && has {
			sb.WriteString(jsonscan.Text(b, text))
		}
		return end, ok
	case '[':
		return jsonscan.Array(b, i, depth, func(v int) (int, bool) { return appendPartText(sb, b, v, depth+1) })
	}
	return jsonscan.Value(b, i, depth)
}

func parseTime(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// readLines folds the complete lines of r, which starts at offset, into
// c, and returns the offset after the last complete line: a last line
// without its newline is still being written, and is read next time. A
// line longer than maxLine is skipped.
func readLines(r io.Reader, offset int64, c *chat) (int64, error) {
	br := kit.Reader(r)
	defer kit.PutReader(br)
	var line []byte
	long := false
	for {
		frag, err := br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if !long && len(line)+len(frag) <= maxLine {
				line = append(line, frag...)
			} else {
				long, line = true, nil
			}
			continue
		case err == io.EOF:
			return offset, nil // an unfinished line: read again later
		case err != nil:
			return offset, err
		}
		n := int64(len(line) + len(frag))
		if long || n > int64(maxLine) {
			c.Bad++
			offset += n
			long, line = false, line[:0]
			continue
		}
		whole := frag
		if len(line) > 0 {
			whole = append(line, frag...)
		}
		c.fold(whole)
		offset += n
		line = line[:0]
	}
}

// readWhole reads a whole-file chat (a .json of older Gemini CLIs: one
// ConversationRecord).
func readWhole(b []byte) (chat, error) {
	var r record
	var c chat
	if err := c.decode(b, &r); err != nil {
		return chat{}, fmt.Errorf("not a chat: %w", err)
	}
	if r.SessionID == nil || *r.SessionID == "" {
		return chat{}, errors.New("not a chat: no sessionId")
	}
	c.header(&r, true)
	if r.Messages != nil {
		c.replace(*r.Messages)
	}
	return c, nil
}

// clone copies c so a read that fails half way leaves c as it was.
func (c *chat) clone() chat {
	out := *c
	out.Msgs = append([]message(nil), c.Msgs...)
	out.Seen = slices.Clone(c.Seen)
	return out
}

// idSet is a set of hashed message ids, sorted: a chat of a few hundred
// messages holds 8 bytes per id, where a map held about 20.
type idSet []uint64

func (s idSet) has(h uint64) bool {
	_, ok := slices.BinarySearch(s, h)
	return ok
}

func (s *idSet) add(h uint64) {
	if i, ok := slices.BinarySearch(*s, h); !ok {
		*s = slices.Insert(*s, i, h)
	}
}

// del removes h; the set of no id is nil, as a decoded one is.
func (s *idSet) del(h uint64) {
	if i, ok := slices.BinarySearch(*s, h); ok {
		*s = slices.Delete(*s, i, i+1)
	}
	if len(*s) == 0 {
		*s = nil
	}
}
