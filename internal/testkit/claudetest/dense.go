package claudetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file writes dense transcripts fast: every byte is a real 2.1.328
// line, as the Transcript writer renders them. A pool of a few hundred
// turns of varied shapes and lengths is rendered once, each turn cut into
// literal bytes and slots (session id, cwd, uuids, parent uuid,
// timestamps, tool ids, message and request ids); a transcript is then
// written by copying turns from the pool and filling their slots with
// fresh values, so a gigabyte takes seconds, not minutes of json.Marshal.

// The placeholders a pool turn is rendered with; each is recognised in the
// rendered bytes and becomes a slot.
const (
	tmplSID    = "00000000-0000-4000-8000-5e55000001d0"
	tmplParent = "00000000-0000-4000-8000-9a7e00000000"
	tmplCwd    = "/@@cwd@@"
	tmplDay    = "2001-02-03T"
)

var tmplStart = time.Date(2001, 2, 3, 4, 0, 0, 0, time.UTC)

type slotKind uint8

const (
	slotLit    slotKind = iota
	slotSID             // the session id
	slotCwd             // the launch cwd, JSON-escaped without quotes
	slotParent          // "<previous turn's last uuid>" or null
	slotTS              // the next timestamp of the file's clock
	slotUUID            // a fresh uuid, one per idx in the turn
	slotTool            // a fresh tool_use id, one per idx in the turn
	slotMsg             // a fresh message id, one per idx in the turn
	slotReq             // a fresh request id
)

type part struct {
	kind slotKind
	idx  int
	lit  []byte
}

// turnTmpl is one pre-rendered turn.
type turnTmpl struct {
	parts []part
	size  int // rendered bytes (slots have fixed sizes but the cwd)
	lines int
	uuids int // distinct uuid slots
	tools int
	msgs  int
	last  int // the uuid idx of the turn's last conversation line
	crash bool
}

// densePool holds the pre-rendered turns, each list sorted by size.
type densePool struct {
	answered []*turnTmpl
	crash    []*turnTmpl
}

// DensePoolTurns is how many answered turns the pool renders (plus a tenth
// as many that end mid tool call).
const DensePoolTurns = 400

var (
	poolMu    sync.Mutex
	poolCache = map[uint64]*densePool{}
)

func poolFor(seed uint64) *densePool {
	poolMu.Lock()
	defer poolMu.Unlock()
	if p, ok := poolCache[seed]; ok {
		return p
	}
	p := newDensePool(seed)
	poolCache[seed] = p
	return p
}

func newDensePool(seed uint64) *densePool {
	rng := rand.New(rand.NewPCG(seed^0xd3e5e, seed+77))
	p := &densePool{}
	for i := range DensePoolTurns {
		// The first tenth are small: one prompt, at most one short tool
		// call, so that transcripts of a few KB exist.
		small := i < DensePoolTurns/10
		p.answered = append(p.answered, renderTurn(rng, small, false))
	}
	for i := range DensePoolTurns / 10 {
		p.crash = append(p.crash, renderTurn(rng, i%3 == 0, true))
	}
	bySize := func(a, b *turnTmpl) int { return a.size - b.size }
	slices.SortFunc(p.answered, bySize)
	slices.SortFunc(p.crash, bySize)
	return p
}

// renderTurn renders one turn with the placeholders and cuts it into parts.
func renderTurn(rng *rand.Rand, small, crash bool) *turnTmpl {
	t := NewTranscript(tmplSID, tmplCwd, tmplStart)
	t.parent = tmplParent
	prompt := genPrompt(rng, small)
	t.QueueOperation("enqueue", prompt).QueueOperation("dequeue", "")
	t.User(prompt).Attachment("todo_reminder").AtisLatch().APIRequestShape().APIRequest()
	if !small || rng.IntN(2) == 0 {
		t.AssistantThinking(genProse(rng, logUniform(rng, 60, 2500)))
	}
	ntools := 0
	switch {
	case small:
		ntools = rng.IntN(2)
	case rng.IntN(100) < 12:
		ntools = 0
	default:
		ntools = 1 + min(int(rng.ExpFloat64()*2.5), 11)
	}
	if crash && ntools == 0 {
		ntools = 1
	}
	var used []string
	for k := range ntools {
		id := ToolID()
		name, input, output := genTool(rng, small)
		used = append(used, name)
		t.AssistantToolUse(id, name, input)
		if crash && k == ntools-1 {
			// kill -9 mid tool: 2.1.328 leaves the tool_use, then
			// last-prompt and atis-latch, and never a tool_result.
			t.LastPrompt(prompt).AtisLatch()
			break
		}
		t.ToolResult(id, output)
		if k < ntools-1 {
			t.APIRequest()
			if rng.IntN(3) == 0 {
				t.AssistantThinking(genProse(rng, logUniform(rng, 60, 800)))
			}
		}
	}
	if !crash {
		if len(used) > 0 {
			t.ToolsUsed(used...)
		}
		t.APIRequest()
		t.AssistantText(genProse(rng, logUniform(rng, 40, 4000)))
		t.LastPrompt(prompt).CostState()
	}
	return cutTurn(t, crash)
}

// cutTurn turns the rendered lines into parts and slots.
func cutTurn(t *Transcript, crash bool) *turnTmpl {
	tt := &turnTmpl{crash: crash}
	uuids, tools, msgs := map[string]int{}, map[string]int{}, map[string]int{}
	idx := func(m map[string]int, v string) int {
		i, ok := m[v]
		if !ok {
			i = len(m)
			m[v] = i
		}
		return i
	}
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			tt.parts = append(tt.parts, part{kind: slotLit, lit: lit})
			lit = nil
		}
	}
	slot := func(k slotKind, i int) { flush(); tt.parts = append(tt.parts, part{kind: k, idx: i}) }
	for _, l := range t.lines {
		tt.lines++
		for i := 0; i < len(l); {
			rest := l[i:]
			switch {
			case bytes.HasPrefix(rest, []byte(tmplSID)):
				slot(slotSID, 0)
				i += len(tmplSID)
			case bytes.HasPrefix(rest, []byte(`"`+tmplParent+`"`)):
				slot(slotParent, 0)
				i += len(tmplParent) + 2
			case bytes.HasPrefix(rest, []byte(tmplCwd)):
				slot(slotCwd, 0)
				i += len(tmplCwd)
			case bytes.HasPrefix(rest, []byte(tmplDay)) && len(rest) >= 24 && rest[23] == 'Z':
				slot(slotTS, 0)
				i += 24
			case isUUID(rest):
				slot(slotUUID, idx(uuids, string(rest[:36])))
				i += 36
			case bytes.HasPrefix(rest, []byte("toolu_01")) && len(rest) >= 30:
				slot(slotTool, idx(tools, string(rest[:30])))
				i += 30
			case bytes.HasPrefix(rest, []byte("msg_")) && len(rest) >= 28 && isDigits(rest[4:28]):
				slot(slotMsg, idx(msgs, string(rest[:28])))
				i += 28
			case bytes.HasPrefix(rest, []byte(`"req_`)) && len(rest) >= 18 && rest[17] == '"':
				lit = append(lit, '"')
				slot(slotReq, 0)
				i += 17
			default:
				lit = append(lit, l[i])
				i++
			}
		}
		lit = append(lit, '\n')
	}
	flush()
	tt.uuids, tt.tools, tt.msgs = len(uuids), len(tools), len(msgs)
	tt.last = uuids[t.parent]
	tt.size = len(t.Bytes())
	return tt
}

func isUUID(b []byte) bool {
	if len(b) < 36 {
		return false
	}
	for i := range 36 {
		c := b[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

func isDigits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// denseWriter renders pool turns into one file after another.
type denseWriter struct {
	pool *densePool
	rng  *rand.Rand
	buf  []byte
	w    *bufio.Writer

	sid, cwd string
	parent   string
	clock    time.Time
	uuids    []string
	tools    []string
	msgs     []string
	step     time.Duration
}

const hexDigits = "0123456789abcdef"

func (d *denseWriter) appendHex(b []byte, n int) []byte {
	for n > 0 {
		x := d.rng.Uint64()
		for k := 0; k < 16 && n > 0; k++ {
			b = append(b, hexDigits[x&15])
			x >>= 4
			n--
		}
	}
	return b
}

func (d *denseWriter) newUUID() string {
	var b [36]byte
	x, y := d.rng.Uint64(), d.rng.Uint64()
	for i, j := 0, 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			b[i] = '-'
			continue
		case 14:
			b[i] = '4'
			continue
		case 19:
			b[i] = hexDigits[8|y&3]
			y >>= 2
			continue
		}
		if j < 16 {
			b[i] = hexDigits[x&15]
			x >>= 4
		} else {
			b[i] = hexDigits[y&15]
			y >>= 4
		}
		j++
	}
	return string(b[:])
}

// turn renders one pool turn.
func (d *denseWriter) turn(t *turnTmpl) {
	d.uuids = d.uuids[:0]
	for range t.uuids {
		d.uuids = append(d.uuids, d.newUUID())
	}
	d.tools = d.tools[:0]
	for range t.tools {
		d.tools = append(d.tools, string(d.appendHex([]byte("toolu_01"), 22)))
	}
	d.msgs = d.msgs[:0]
	for range t.msgs {
		d.msgs = append(d.msgs, string(d.appendHex([]byte("msg_01"), 22)))
	}
	b := d.buf[:0]
	for _, p := range t.parts {
		switch p.kind {
		case slotLit:
			b = append(b, p.lit...)
		case slotSID:
			b = append(b, d.sid...)
		case slotCwd:
			b = append(b, d.cwd...)
		case slotParent:
			if d.parent == "" {
				b = append(b, "null"...)
			} else {
				b = append(b, '"')
				b = append(b, d.parent...)
				b = append(b, '"')
			}
		case slotTS:
			b = d.clock.AppendFormat(b, "2006-01-02T15:04:05.000Z")
			d.clock = d.clock.Add(d.step)
		case slotUUID:
			b = append(b, d.uuids[p.idx]...)
		case slotTool:
			b = append(b, d.tools[p.idx]...)
		case slotMsg:
			b = append(b, d.msgs[p.idx]...)
		case slotReq:
			b = append(b, "req_"...)
			b = d.appendHex(b, 8)
			b = append(b, '-')
			b = d.appendHex(b, 3)
		}
		if len(b) > 1<<20 {
			d.w.Write(b)
			b = b[:0]
		}
	}
	d.w.Write(b)
	d.buf = b[:0]
	d.parent = d.uuids[t.last]
}

// pick returns a random turn of a (sorted by size) that fits in room
// bytes, or the smallest one when none fits.
func (d *denseWriter) pick(a []*turnTmpl, room int64) *turnTmpl {
	n, _ := slices.BinarySearchFunc(a, room, func(t *turnTmpl, r int64) int {
		if int64(t.size) <= r {
			return -1
		}
		return 1
	})
	if n == 0 {
		return a[0]
	}
	return a[d.rng.IntN(n)]
}

// denseFile is one dense transcript to write.
type denseFile struct {
	path, sid, cwd string
	start          time.Time
	size           int64 // wanted size; the file gets at least one turn
	midTool        bool
}

// write writes the file and returns its size and the time of its last line.
func (d *denseWriter) write(f denseFile) (int64, time.Time, error) {
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return 0, time.Time{}, err
	}
	out, err := os.OpenFile(f.path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, time.Time{}, err
	}
	if d.w == nil {
		d.w = bufio.NewWriterSize(out, 1<<20)
	} else {
		d.w.Reset(out)
	}
	cwd, _ := json.Marshal(f.cwd)
	d.sid, d.cwd, d.parent, d.clock = f.sid, string(cwd[1:len(cwd)-1]), "", f.start.UTC()
	var last *turnTmpl
	if f.midTool {
		// At most half the file, so small files stay small.
		last = d.pick(d.pool.crash, f.size/2)
	}
	// The crash turn's own size is reserved for the end.
	want := f.size
	if last != nil {
		want -= int64(last.size)
	}
	var written int64
	for first := last == nil; first || written < want; first = false {
		t := d.pick(d.pool.answered, want-written)
		d.turn(t)
		written += int64(t.size)
	}
	if last != nil {
		d.turn(last)
	}
	if err := d.w.Flush(); err != nil {
		out.Close()
		return 0, time.Time{}, fmt.Errorf("write %s: %w", f.path, err)
	}
	fi, err := out.Stat()
	if err != nil {
		out.Close()
		return 0, time.Time{}, err
	}
	return fi.Size(), d.clock.Add(-d.step), out.Close()
}

func logUniform(rng *rand.Rand, lo, hi int) int {
	return int(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo)))))
}

var prompts = []string{
	"please run the tests", "why does the list show a stopped session as running?", "fix the failing test in adapters/claude",
	"add a flag for the reconcile interval", "review this diff and tell me what breaks", "make `sessionctl ls` faster",
	"the daemon crashed on start, here is the log", "rename Observation to Observed everywhere", "write a benchmark for the tail reader",
	"explain how the tracker decides a status", "commit that", "can you also update the README?", "continue",
}

func genPrompt(rng *rand.Rand, small bool) string {
	p := prompts[rng.IntN(len(prompts))]
	if !small && rng.IntN(8) == 0 {
		// A pasted log or file.
		p += ":\n\n" + genTestOutput(rng, logUniform(rng, 500, 6000))
	}
	return p
}

var sentences = []string{
	"The reader walks back from the end of the file until it knows where the last turn stands — a prompt, a tool call without its result, or the closing reply.",
	"“Busy” is only ever inferred from the transcript; the process table is the truth for “running”.",
	"I'll run the tests first, then look at the failure in `transcript_test.go`.",
	"The failure comes from the tail window: a line longer than 64 KiB is cut, so the scanner sees half a record.",
	"Naïve readers parse every line of both windows, which costs ~45 % of the start-up CPU.",
	"Let me check how `decide` handles an owner whose start time changed.",
	"All 214 tests pass now, including the race detector run.",
	"Here is what changed:\n\n- `adapters/claude/line.go`: one pass per line\n- `tracker/decide.go`: no copy of unchanged records\n",
	"```go\nfunc (s *summary) meta(l *Line) {\n\tif s.SessionID == \"\" {\n\t\ts.SessionID = l.SessionID\n\t}\n}\n```",
	"That path is only taken when the registry entry's `pidDomain` names another machine.",
	"The benchmark shows 17 ms per pass at 10,000 sessions (was 44 ms).",
}

func genProse(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		if b.Len() > 0 {
			b.WriteString(" ")
			if rng.IntN(4) == 0 {
				b.WriteString("\n\n")
			}
		}
		b.WriteString(sentences[rng.IntN(len(sentences))])
	}
	return b.String()
}

var codeLines = []string{
	"\treturn fmt.Errorf(\"open store %s: %w\", path, err)",
	"func (s *summary) meta(l *Line) { // apply \"metadata\" in file order",
	"\t\tif s.SessionID == \"\" && !strings.HasPrefix(l.Cwd, `C:\\Users`) {",
	"\t// Claude writes one line per content block — most with a null stop reason…",
	"\tout = append(out, '\\n', '\\t')",
	"}",
	"",
	"import (",
	"\t\"context\"",
	"\t\"github.com/sessiond/sessiond/session\"",
	")",
	"\tfor i, l := range lines {",
	"\t\tif err := json.Unmarshal(l, &v); err != nil {",
	"\t\t\tcontinue",
	"\t\t}",
	"\tvar mu sync.Mutex // guards the map below",
}

func genSource(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := 1 + rng.IntN(400); b.Len() < n; i++ {
		fmt.Fprintf(&b, "%6d\t%s\n", i, codeLines[rng.IntN(len(codeLines))])
	}
	return b.String()
}

func genTestOutput(rng *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "=== RUN   TestTranscript/case_%03d\n--- PASS: TestTranscript/case_%03d (0.%02ds)\n", i, i, rng.IntN(100))
		if rng.IntN(7) == 0 {
			fmt.Fprintf(&b, "    transcript_test.go:%d: got \"busy\", want \"idle\"\t(retrying)\n", 100+i)
		}
	}
	b.WriteString("PASS\nok  \tgithub.com/sessiond/sessiond/adapters/claude\t1.234s\n")
	return b.String()
}

func genGrep(rng *rand.Rand, n int) string {
	var b strings.Builder
	files := []string{"adapters/claude/line.go", "tracker/decide.go", "daemon/server.go", "state/store.go", "proc/probe_linux.go"}
	for b.Len() < n {
		fmt.Fprintf(&b, "%s:%d:%s\n", files[rng.IntN(len(files))], 1+rng.IntN(900), codeLines[rng.IntN(len(codeLines))])
	}
	return b.String()
}

var srcFiles = []string{"/home/u/src/sessiond/adapters/claude/transcript.go", "/home/u/src/sessiond/tracker/decide.go",
	"/home/u/src/sessiond/daemon/server.go", "/home/u/src/sessiond/README.md", "/home/u/src/sessiond/state/store.go"}

// toolOutputSize: most outputs are short, some a few KB, a tenth tens of KB.
func toolOutputSize(rng *rand.Rand, small bool) int {
	if small {
		return logUniform(rng, 20, 400)
	}
	switch x := rng.IntN(10); {
	case x < 6:
		return logUniform(rng, 20, 1<<10)
	case x < 9:
		return logUniform(rng, 1<<10, 8<<10)
	default:
		return logUniform(rng, 8<<10, 48<<10)
	}
}

// genTool returns a tool call's name, input and output.
func genTool(rng *rand.Rand, small bool) (string, map[string]any, string) {
	n := toolOutputSize(rng, small)
	file := srcFiles[rng.IntN(len(srcFiles))]
	switch rng.IntN(10) {
	case 0, 1, 2, 3:
		cmds := []string{"go test ./...", "go test -race -count=1 ./adapters/claude/", "go vet ./...", "git status --short", "make build", "git diff --stat"}
		c := cmds[rng.IntN(len(cmds))]
		return "Bash", map[string]any{"command": c, "description": "Run " + c, "timeout": 600000}, genTestOutput(rng, n)
	case 4, 5, 6:
		return "Read", map[string]any{"file_path": file, "offset": 1, "limit": 400}, genSource(rng, n)
	case 7:
		old, nw := genSource(rng, logUniform(rng, 60, 1500)), genSource(rng, logUniform(rng, 60, 1500))
		return "Edit", map[string]any{"file_path": file, "old_string": old, "new_string": nw, "replace_all": false},
			"The file " + file + " has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n" + genSource(rng, min(n, 2000))
	case 8:
		return "Grep", map[string]any{"pattern": "func \\(s \\*summary\\)", "path": "/home/u/src/sessiond", "output_mode": "content", "-n": true}, genGrep(rng, n)
	default:
		return "TodoWrite", map[string]any{"todos": []map[string]any{
			{"content": "Run the tests", "status": "completed", "activeForm": "Running the tests"},
			{"content": "Fix the tail reader", "status": "in_progress", "activeForm": "Fixing the tail reader"},
		}}, "Todos have been modified successfully. Ensure that you continue to use the todo list to track your progress."
	}
}

// AppendReply appends one real line to the transcript at path, as Claude
// Code would: an assistant text reply at time at, chained (parentUuid) to
// the file's last conversation line, with its sessionId and cwd. It is how
// a benchmark changes a transcript.
func AppendReply(path string, at time.Time, text string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	off := max(0, fi.Size()-1<<20)
	tail := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(tail, off); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	lines := bytes.Split(bytes.TrimRight(tail, "\n"), []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		var l struct {
			Type      string `json:"type"`
			UUID      string `json:"uuid"`
			SessionID string `json:"sessionId"`
			Cwd       string `json:"cwd"`
		}
		if json.Unmarshal(lines[i], &l) != nil || l.UUID == "" || (l.Type != "user" && l.Type != "assistant") {
			continue
		}
		t := NewTranscript(l.SessionID, l.Cwd, at)
		t.parent = l.UUID
		t.AssistantText(text)
		_, err := f.Write(t.Bytes())
		return err
	}
	return fmt.Errorf("%s: no conversation line in its last %d bytes", path, len(tail))
}
