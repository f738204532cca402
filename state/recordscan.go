package state

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/lib/jsonenc"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// scanRecord decodes v when it is exactly as session.Record.AppendJSON
// writes a record: its members in that order, no whitespace, strings with
// only the escapes it writes, integers, strict RFC 3339 times. Anything
// else (a record written by an older sessiond, a hand-edited value, a
// float, an unknown member) returns false, and decodeRecord decodes it
// with the general decoder, which reads every record the same way
// (TestScanRecordMatchesDecoder, FuzzDecodeRecord). A restart decodes every
// record before it is ready; this is about 4 times as fast as the general
// decoder (BenchmarkDecodeRecord).
func scanRecord(v []byte) (*session.Record, bool) {
	d := recordScanner{b: v, ok: true}
	r := new(session.Record)
	d.obj()
	r.V = d.intKey("v")
	r.ID = d.strKey("id")
	d.key("agent")
	r.Agent = d.strOf(knownAgents)
	r.UpstreamID = d.strKey("upstream_id")
	d.key("status")
	r.Status = session.Status(d.strOf(knownStatuses))
	d.key("activity")
	r.Activity = session.Activity(d.strOf(knownActivities))
	r.StatusReason = d.optStr("status_reason")
	r.ActivitySince = d.optTime("activity_since")
	if d.optKey("activity_source") {
		r.ActivitySource = session.ActivitySource(d.strOf(knownSources))
		if r.ActivitySource == "" {
			d.ok = false // AppendJSON omits an empty one
		}
	}
	if d.optKey("waiting_for") {
		r.WaitingFor = d.waitingFor()
	}
	r.PromptAt = d.optTime("prompt_delivered_at")
	if d.optKey("owner") {
		id := d.identity()
		r.Owner = &id
	}
	if d.optKey("owner_inferred") {
		d.lit("true")
		r.OwnerInferred = true
	}
	r.OwnerEvidence = d.optStr("owner_evidence")
	if d.optKey("candidates") {
		d.lit("[")
		for first := true; d.ok && !d.next(']'); first = false {
			if !first {
				d.lit(",")
			}
			r.Candidates = append(r.Candidates, d.identity())
		}
		if len(r.Candidates) == 0 {
			d.ok = false // AppendJSON omits an empty list
		}
	}
	r.Cwd = d.strKey("cwd")
	r.Title = d.optStr("title")
	d.key("launched")
	r.Launched = d.boolean()
	r.LaunchedAt = d.optTime("launched_at")
	r.Mode = d.optStr("mode")
	r.Tmux = d.optStr("tmux_session")
	if d.optKey("tmux_pane") {
		d.obj()
		p := &session.Pane{Socket: d.strKey("socket"), ID: d.strKey("id")}
		d.lit("}")
		r.Pane = p
	}
	r.LogPath = d.optStr("log_path")
	if d.optKey("exit") {
		d.obj()
		x := &session.ExitStatus{PID: d.intKey("pid"), Code: d.intKey("code"), Signal: d.optStr("signal")}
		d.key("at")
		x.At = d.time()
		x.LogTail = d.optStr("log_tail")
		d.lit("}")
		r.Exit = x
	}
	r.Source = d.optStr("source")
	d.key("problems")
	if !d.null() {
		d.lit("[")
		r.Problems = []session.Problem{}
		for first := true; d.ok && !d.next(']'); first = false {
			if !first {
				d.lit(",")
			}
			d.obj()
			d.key("kind")
			p := session.Problem{Kind: session.ProblemKind(d.strOf(knownProblems))}
			p.Detail = d.strKey("detail")
			d.key("since")
			p.Since = d.time()
			p.Key = d.optStr("key")
			d.lit("}")
			r.Problems = append(r.Problems, p)
		}
	}
	d.key("created_at")
	r.CreatedAt = d.time()
	d.key("updated_at")
	r.UpdatedAt = d.time()
	d.key("stopped_at")
	r.StoppedAt = d.timePtr()
	d.key("last_activity_at")
	r.LastActivityAt = d.timePtr()
	r.LastSeenAt = d.optTime("last_seen_at")
	d.key("resume")
	if !d.null() {
		d.obj()
		c := &session.ResumeCursor{SchemaVersion: d.intKey("schema_version"), Agent: d.strKey("agent"), UpstreamID: d.strKey("upstream_id"), Cwd: d.strKey("cwd"), Root: d.strKey("root")}
		d.lit("}")
		r.Resume = c
	}
	d.lit("}")
	if !d.ok || d.i != len(d.b) {
		return nil, false
	}
	return r, true
}

// recordScanner reads a value left to right. The first mismatch clears ok,
// and every read after it returns a zero value.
type recordScanner struct {
	b  []byte
	i  int
	ok bool
	// first: the next member is the first of its object (no comma).
	first bool
}

func (d *recordScanner) obj() {
	d.lit("{")
	d.first = true
}

func (d *recordScanner) lit(s string) {
	if d.ok && len(d.b)-d.i >= len(s) && string(d.b[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return
	}
	d.ok = false
}

// next consumes c if it comes next.
func (d *recordScanner) next(c byte) bool {
	if d.ok && d.i < len(d.b) && d.b[d.i] == c {
		d.i++
		return true
	}
	return false
}

func (d *recordScanner) null() bool {
	if d.ok && len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// optKey consumes the member name k (and its comma and colon) if it comes
// next, and reports whether it did.
func (d *recordScanner) optKey(k string) bool {
	if !d.ok {
		return false
	}
	j := d.i
	if !d.first {
		if j >= len(d.b) || d.b[j] != ',' {
			return false
		}
		j++
	}
	if len(d.b)-j < len(k)+3 || d.b[j] != '"' || string(d.b[j+1:j+1+len(k)]) != k || d.b[j+1+len(k)] != '"' || d.b[j+2+len(k)] != ':' {
		return false
	}
	d.i = j + len(k) + 3
	d.first = false
	return true
}

func (d *recordScanner) key(k string) {
	if !d.optKey(k) {
		d.ok = false
	}
}

func (d *recordScanner) strKey(k string) string {
	d.key(k)
	return d.str()
}

func (d *recordScanner) intKey(k string) int {
	d.key(k)
	return d.int()
}

// optStr reads an omitempty string member: absent is "", present must not
// be empty (AppendJSON would have omitted it).
func (d *recordScanner) optStr(k string) string {
	if !d.optKey(k) {
		return ""
	}
	s := d.str()
	if s == "" {
		d.ok = false
	}
	return s
}

func (d *recordScanner) optTime(k string) *time.Time {
	if !d.optKey(k) {
		return nil
	}
	t := d.time()
	return &t
}

func (d *recordScanner) timePtr() *time.Time {
	if d.null() {
		return nil
	}
	t := d.time()
	return &t
}

func (d *recordScanner) boolean() bool {
	switch {
	case !d.ok:
	case len(d.b)-d.i >= 4 && string(d.b[d.i:d.i+4]) == "true":
		d.i += 4
		return true
	case len(d.b)-d.i >= 5 && string(d.b[d.i:d.i+5]) == "false":
		d.i += 5
		return false
	}
	d.ok = false
	return false
}

// digits returns the integer's text: an optional minus and digits, no
// leading zero, no fraction or exponent.
func (d *recordScanner) digits() []byte {
	if !d.ok {
		return nil
	}
	j := d.i
	if j < len(d.b) && d.b[j] == '-' {
		j++
	}
	k := j
	for k < len(d.b) && d.b[k] >= '0' && d.b[k] <= '9' {
		k++
	}
	if k == j || (d.b[j] == '0' && k > j+1) || (k < len(d.b) && (d.b[k] == '.' || d.b[k] == 'e' || d.b[k] == 'E')) {
		d.ok = false
		return nil
	}
	s := d.b[d.i:k]
	d.i = k
	return s
}

func (d *recordScanner) int() int {
	s := d.digits()
	if !d.ok {
		return 0
	}
	n, err := strconv.ParseInt(string(s), 10, 0)
	if err != nil {
		d.ok = false
	}
	return int(n)
}

func (d *recordScanner) uint() uint64 {
	s := d.digits()
	if !d.ok {
		return 0
	}
	n, err := strconv.ParseUint(string(s), 10, 64)
	if err != nil {
		d.ok = false
	}
	return n
}

// rawStr returns a string's raw contents (between its quotes) and whether
// they hold an escape.
func (d *recordScanner) rawStr() (raw []byte, esc bool) {
	if !d.ok || d.i >= len(d.b) || d.b[d.i] != '"' {
		d.ok = false
		return nil, false
	}
	rest := d.b[d.i+1:]
	q := bytes.IndexByte(rest, '"')
	if q < 0 {
		d.ok = false
		return nil, false
	}
	if bytes.IndexByte(rest[:q], '\\') >= 0 {
		return d.rawEscaped()
	}
	raw = rest[:q]
	if ctrl, high := scanBytes(raw); ctrl || (high && !utf8.Valid(raw)) {
		d.ok = false // invalid JSON, or the general decoder's replacement
		return nil, false
	}
	d.i += q + 2
	return raw, false
}

// rawEscaped is rawStr for a string with an escape: byte by byte, since
// an escaped quote does not end it. Its escapes must be valid, and none
// may be a surrogate's \uXXXX (AppendJSON writes UTF-8, never one: a
// string that holds one is left to the general decoder).
func (d *recordScanner) rawEscaped() (raw []byte, esc bool) {
	j, high := d.i+1, false
	for ; j < len(d.b); j++ {
		switch c := d.b[j]; {
		case c == '"':
			raw = d.b[d.i+1 : j]
			d.i = j + 1
			if high && !utf8.Valid(raw) {
				d.ok = false
			}
			return raw, true
		case c == '\\':
			n := jsonenc.EscapeLen(d.b, j)
			if n == 0 || n == 6 && surrogateEscape(d.b[j+2:j+6]) {
				d.ok = false
				return nil, false
			}
			j += n - 1
		case c < 0x20:
			d.ok = false
			return nil, false
		case c >= utf8.RuneSelf:
			high = true
		}
	}
	d.ok = false
	return nil, false
}

// scanBytes reports whether b holds a control byte (< 0x20, not allowed
// in a JSON string) or a byte >= 0x80, eight bytes at a time.
func scanBytes(b []byte) (ctrl, high bool) {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		// A byte below 0x20 borrows into its high bit; a byte with its
		// high bit set is excluded by ^w.
		if (w-0x20*ones)&^w&highs != 0 {
			return true, high
		}
		high = high || w&highs != 0
		b = b[8:]
	}
	for _, c := range b {
		ctrl = ctrl || c < 0x20
		high = high || c >= utf8.RuneSelf
	}
	return ctrl, high
}

// The values most records share: strOf returns these constants rather
// than a new string for each record.
var (
	knownAgents     = []string{"claude", "opencode", "codex", "pi", "copilot", "gemini", "qwen"}
	knownStatuses   = []string{string(session.StatusStopped), string(session.StatusRunning), string(session.StatusInterrupted), string(session.StatusStarting), string(session.StatusUnknown)}
	knownActivities = []string{string(session.ActivityIdle), string(session.ActivityBusy), string(session.ActivityWaiting), string(session.ActivityUnknown)}
	knownSources    = []string{string(session.SourceRegistry), string(session.SourceHook), string(session.SourceTranscript), string(session.SourceServer)}
	knownProblems   = []string{string(session.ProblemOrphanedToolCall), string(session.ProblemIncompleteMessage), string(session.ProblemStaleBusyMarker),
		string(session.ProblemStalled), string(session.ProblemOrphanProcesses), string(session.ProblemAdapterError), string(session.ProblemNotDiscovered),
		string(session.ProblemOwnerAmbiguous), string(session.ProblemLaunchFailed), string(session.ProblemForeignHost), string(session.ProblemForeignPIDNamespace)}
)

// strOf reads a string that is usually one of known, and returns known's
// own string when it is.
func (d *recordScanner) strOf(known []string) string {
	raw, esc := d.rawStr()
	if d.ok && !esc {
		for _, k := range known {
			if string(raw) == k {
				return k
			}
		}
	}
	return d.decode(raw, esc)
}

func (d *recordScanner) str() string {
	raw, esc := d.rawStr()
	return d.decode(raw, esc)
}

// decode returns the string whose raw contents rawStr returned (and
// checked).
func (d *recordScanner) decode(raw []byte, esc bool) string {
	if !d.ok {
		return ""
	}
	if !esc {
		return string(raw)
	}
	return string(jsonenc.Unquote(make([]byte, 0, len(raw)), raw))
}

// surrogateEscape reports whether the four hex digits u (checked) are a
// UTF-16 surrogate's, D800-DFFF.
func surrogateEscape(u []byte) bool {
	return u[0]|0x20 == 'd' && ('8' <= u[1] && u[1] <= '9' || 'a' <= u[1]|0x20 && u[1]|0x20 <= 'f')
}

func (d *recordScanner) time() time.Time {
	raw, esc := d.rawStr()
	var t time.Time
	if !d.ok || esc || t.UnmarshalText(raw) != nil {
		d.ok = false
		return time.Time{}
	}
	return t
}

func (d *recordScanner) identity() proc.Identity {
	d.obj()
	id := proc.Identity{BootID: d.strKey("boot_id"), PID: d.intKey("pid")}
	d.key("start_ticks")
	id.StartTicks = d.uint()
	d.lit("}")
	return id
}

func (d *recordScanner) waitingFor() *session.WaitingFor {
	d.obj()
	w := &session.WaitingFor{Kind: session.WaitingKind(d.strKey("kind"))}
	w.Tool = d.optStr("tool")
	w.Input = d.optStr("input")
	w.Question = d.optStr("question")
	w.Detail = d.optStr("detail")
	d.lit("}")
	return w
}
