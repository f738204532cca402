// Package claudetest builds realistic Claude Code data for tests: config
// roots with the live-process registry and transcripts shaped like those of
// @anthropic-ai/claude-code 2.1.328 (see docs/agents/claude.md),
// including the ways they go wrong: a crash mid tool call, a stale "busy"
// registry entry, glued records, a 20 MB line, a sparse 1 GB transcript and
// a secret .key file that must never be opened.
//
// Everything is written under a directory the test owns (t.TempDir()),
// never under the real ~/.claude.
package claudetest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/proc"
)

// Version is the Claude Code version the shapes were checked on.
const Version = "2.1.328"

// NewSessionID returns a random version 4 UUID, the form of Claude Code's
// session ids.
func NewSessionID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// projectDirName is the projects/ folder Claude Code uses for a launch cwd:
// every character outside [A-Za-z0-9] becomes '-'. (Names over 200
// characters are cut and hashed by Claude; tests keep cwds short.)
func projectDirName(cwd string) string {
	b := []byte(cwd)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	return string(b)
}

// Root is a Claude Code config root (what ~/.claude or $CLAUDE_CONFIG_DIR
// names) in a test directory.
type Root struct {
	Dir string
}

// NewRoot makes dir a config root with empty sessions/ and projects/.
func NewRoot(tb testing.TB, dir string) *Root {
	tb.Helper()
	for _, sub := range []string{"sessions", "projects"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			tb.Fatal(err)
		}
	}
	return &Root{Dir: dir}
}

// SessionsDir is <root>/sessions.
func (r *Root) SessionsDir() string { return filepath.Join(r.Dir, "sessions") }

// ProjectDir is the project folder of a launch cwd.
func (r *Root) ProjectDir(cwd string) string {
	return filepath.Join(r.Dir, "projects", projectDirName(cwd))
}

// TranscriptPath is where the transcript of session id launched in cwd lives.
func (r *Root) TranscriptPath(cwd, id string) string {
	return filepath.Join(r.ProjectDir(cwd), id+".jsonl")
}

// WriteTranscript writes t's lines as the session's transcript and returns
// its path.
func (r *Root) WriteTranscript(tb testing.TB, t *Transcript) string {
	tb.Helper()
	p := r.TranscriptPath(t.Cwd, t.SessionID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, t.Bytes(), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Append appends lines (each gets its newline) to a file, the way Claude
// Code appends a batch.
func Append(tb testing.TB, path string, lines ...[]byte) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.Write(append(append([]byte(nil), l...), '\n')); err != nil {
			tb.Fatal(err)
		}
	}
}

// Entry is a registry file, <root>/sessions/<pid>.json, as 2.1.328 writes it.
type Entry struct {
	PID                 int    `json:"pid"`
	SessionID           string `json:"sessionId"`
	Cwd                 string `json:"cwd"`
	StartedAt           int64  `json:"startedAt"`
	ProcStart           string `json:"procStart,omitempty"`
	Version             string `json:"version"`
	Kind                string `json:"kind"`
	Entrypoint          string `json:"entrypoint"`
	PIDDomain           string `json:"pidDomain,omitempty"`
	MessagingSocketPath string `json:"messagingSocketPath"`
	Name                string `json:"name"`
	Status              string `json:"status,omitempty"`
	WaitingFor          string `json:"waitingFor,omitempty"`
	UpdatedAt           int64  `json:"updatedAt"`
	StatusUpdatedAt     int64  `json:"statusUpdatedAt"`
}

// NewEntry returns a registry entry for pid with the given procStart
// (field 22 of /proc/<pid>/stat as decimal text, or anything else to fake
// a reused pid), pidDomain ("" for versions that write none; HostDomain
// for this machine, as Claude writes it) and status.
func NewEntry(pid int, procStart, pidDomain, sessionID, cwd, status string, at time.Time) Entry {
	ms := at.UnixMilli()
	e := Entry{
		PID: pid, SessionID: sessionID, Cwd: cwd, StartedAt: ms, ProcStart: procStart,
		Version: Version, Kind: "interactive", Entrypoint: "cli",
		MessagingSocketPath: fmt.Sprintf("/tmp/cc-socks/%d.sock", pid),
		Name:                filepath.Base(cwd) + "-" + strconv.Itoa(pid%100),
		Status:              status, UpdatedAt: ms, StatusUpdatedAt: ms,
		PIDDomain: pidDomain,
	}
	return e
}

// HostDomain is the pidDomain a claude process started by this test would
// write, built the way Claude Code 2.1.328 builds it (checked in its
// binary and on a run): on Linux "linux:" + the trimmed contents of
// /etc/machine-id ("" when unreadable, no other source) + ":" + the link
// text of /proc/self/ns/pid; elsewhere the constant "linux". It names the
// machine and PID namespace, never the boot. Read here on its own, not
// through package proc, so that the adapter is checked against it.
func HostDomain() string {
	if runtime.GOOS != "linux" {
		return "linux"
	}
	var machine string
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		machine = strings.TrimSpace(string(b))
	}
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return "linux:" + machine + ":" + ns
}

// ForeignDomain is the pidDomain of another machine (a home shared over
// NFS or synced), in this host's namespace text.
func ForeignDomain() string {
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return "linux:0f3c1e9a11112222333344445555aaaa:" + ns
}

// LiveEntry returns a registry entry for the live process pid with its true
// procStart and this host's pidDomain, as the claude process itself would
// write it.
func LiveEntry(tb testing.TB, pid int, sessionID, cwd, status string) Entry {
	tb.Helper()
	id, err := proc.NewHost().Identify(pid)
	if err != nil {
		tb.Fatalf("identify pid %d: %v", pid, err)
	}
	return NewEntry(pid, strconv.FormatUint(id.StartTicks, 10), HostDomain(), sessionID, cwd, status, startedAt(id))
}

// startedAt is when Claude would have written startedAt for the process:
// its start (it writes the entry just after), not the test's now.
func startedAt(id proc.Identity) time.Time {
	if st, err := proc.NewHost().StartTime(id); err == nil {
		return st
	}
	return time.Now()
}

// WriteRegistry writes e as <root>/sessions/<pid>.json and returns the path.
func (r *Root) WriteRegistry(tb testing.TB, e Entry) string {
	tb.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		tb.Fatal(err)
	}
	p := filepath.Join(r.SessionsDir(), strconv.Itoa(e.PID)+".json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// WriteKey writes the secret <pid>.<hash>.key file Claude Code keeps beside
// a registry entry (mode 0600). An adapter must never open it.
func (r *Root) WriteKey(tb testing.TB, pid int) string {
	tb.Helper()
	p := filepath.Join(r.SessionsDir(), fmt.Sprintf("%d.%s.key", pid, NewSessionID()[:8]))
	if err := os.WriteFile(p, []byte("secret-token-never-read\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Transcript builds a transcript line by line, with realistic shapes: the
// conversation lines chain parentUuid -> uuid and carry cwd, sessionId,
// version, gitBranch and timestamp; the 2.1.328 bookkeeping lines sit
// between them. Each line advances the clock by Step.
type Transcript struct {
	SessionID string
	Cwd       string
	Version   string
	GitBranch string
	// At is the timestamp of the next line; Step advances it.
	At   time.Time
	Step time.Duration

	lines  [][]byte
	parent string
	msgN   int
}

// NewTranscript starts a transcript for a session launched in cwd.
func NewTranscript(sessionID, cwd string, start time.Time) *Transcript {
	return &Transcript{SessionID: sessionID, Cwd: cwd, Version: Version, GitBranch: "main", At: start.UTC(), Step: 150 * time.Millisecond}
}

// Lines returns the lines built so far (without newlines).
func (t *Transcript) Lines() [][]byte { return t.lines }

// Bytes returns the transcript file's content.
func (t *Transcript) Bytes() []byte {
	var b []byte
	for _, l := range t.lines {
		b = append(b, l...)
		b = append(b, '\n')
	}
	return b
}

// Last is the timestamp of the last line written.
func (t *Transcript) Last() time.Time { return t.At.Add(-t.Step) }

// Add appends a raw line.
func (t *Transcript) Add(line []byte) *Transcript {
	t.lines = append(t.lines, line)
	return t
}

func (t *Transcript) ts() string {
	s := t.At.Format("2006-01-02T15:04:05.000Z")
	t.At = t.At.Add(t.Step)
	return s
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// kv is one field of a JSON object written in a fixed order: Claude Code
// (JavaScript) writes keys in insertion order, parentUuid or type first,
// and a reader that recovers torn lines relies on it.
type kv struct {
	k string
	v any
}

// obj writes the fields as one JSON object, in order.
func obj(fields ...kv) []byte {
	b := []byte{'{'}
	for i, f := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, mustJSON(f.k)...)
		b = append(b, ':')
		b = append(b, mustJSON(f.v)...)
	}
	return append(b, '}')
}

// conv writes a conversation line (user or assistant) and returns it.
func (t *Transcript) conv(typ string, message any, extra ...kv) []byte {
	uuid := NewSessionID()
	var parent any
	if t.parent != "" {
		parent = t.parent
	}
	fields := []kv{
		{"parentUuid", parent},
		{"isSidechain", false},
		{"userType", "external"},
		{"cwd", t.Cwd},
		{"sessionId", t.SessionID},
		{"version", t.Version},
		{"gitBranch", t.GitBranch},
		{"entrypoint", "cli"},
		{"type", typ},
		{"message", message},
		{"uuid", uuid},
		{"timestamp", t.ts()},
	}
	fields = append(fields, extra...)
	t.parent = uuid
	l := obj(fields...)
	t.lines = append(t.lines, l)
	return l
}

// meta writes a bookkeeping line of the given type.
func (t *Transcript) meta(typ string, fields ...kv) []byte {
	all := append([]kv{{"type", typ}}, fields...)
	all = append(all, kv{"sessionId", t.SessionID}, kv{"timestamp", t.ts()})
	l := obj(all...)
	t.lines = append(t.lines, l)
	return l
}

// QueueOperation writes a queue-operation line (often the first line).
func (t *Transcript) QueueOperation(op, content string) *Transcript {
	t.meta("queue-operation", kv{"operation", op}, kv{"content", content})
	return t
}

// User writes a real user prompt.
func (t *Transcript) User(prompt string) *Transcript {
	t.conv("user", map[string]any{"role": "user", "content": prompt})
	return t
}

// UserLine writes a user prompt and returns the line (to glue or append).
func (t *Transcript) UserLine(prompt string) []byte {
	return t.conv("user", map[string]any{"role": "user", "content": prompt})
}

// Attachment writes an attachment line (context Claude attaches to a turn).
func (t *Transcript) Attachment(kind string) *Transcript {
	t.meta("attachment", kv{"parentUuid", t.parent}, kv{"uuid", NewSessionID()}, kv{"cwd", t.Cwd},
		kv{"attachment", map[string]any{"type": kind, "content": "…"}})
	return t
}

// AtisLatch writes an atis-latch line.
func (t *Transcript) AtisLatch() *Transcript {
	t.meta("atis-latch", kv{"latched", true})
	return t
}

// APIRequestShape writes an api-request-shape line.
func (t *Transcript) APIRequestShape() *Transcript {
	t.meta("api-request-shape", kv{"model", "claude-sonnet-4-5"}, kv{"tools", 17}, kv{"messages", len(t.lines)})
	return t
}

// APIRequestBlob writes an api-request-blob line of about n bytes.
func (t *Transcript) APIRequestBlob(n int) *Transcript {
	t.meta("api-request-blob", kv{"blob", strings.Repeat("x", n)})
	return t
}

// APIRequest writes an api-request line.
func (t *Transcript) APIRequest() *Transcript {
	t.meta("api-request", kv{"requestId", "req_" + NewSessionID()[:12]}, kv{"model", "claude-sonnet-4-5"})
	return t
}

// ToolsUsed writes a tools-used line.
func (t *Transcript) ToolsUsed(names ...string) *Transcript {
	t.meta("tools-used", kv{"tools", names})
	return t
}

// LastPrompt writes a last-prompt line.
func (t *Transcript) LastPrompt(text string) *Transcript {
	t.meta("last-prompt", kv{"lastPrompt", text})
	return t
}

// CostState writes a cost-state line.
func (t *Transcript) CostState() *Transcript {
	t.meta("cost-state", kv{"totalCostUSD", 0.0123}, kv{"inputTokens", 1234}, kv{"outputTokens", 56})
	return t
}

// Summary writes an older-version summary line.
func (t *Transcript) Summary(text string) *Transcript {
	l := obj(kv{"type", "summary"}, kv{"summary", text}, kv{"leafUuid", t.parent})
	t.lines = append(t.lines, l)
	return t
}

// FileHistorySnapshot writes an older-version file-history-snapshot line.
func (t *Transcript) FileHistorySnapshot() *Transcript {
	l := obj(kv{"type", "file-history-snapshot"}, kv{"messageId", NewSessionID()},
		kv{"snapshot", map[string]any{"trackedFileBackups": map[string]any{}, "timestamp": t.ts()}}, kv{"isSnapshotUpdate", false})
	t.lines = append(t.lines, l)
	return t
}

// System writes a system line (older versions; turn_duration, hooks).
func (t *Transcript) System(subtype, content string) *Transcript {
	t.meta("system", kv{"subtype", subtype}, kv{"content", content}, kv{"parentUuid", t.parent}, kv{"uuid", NewSessionID()}, kv{"cwd", t.Cwd}, kv{"level", "info"})
	return t
}

// CustomTitle writes a custom-title line (a title the user chose).
func (t *Transcript) CustomTitle(title string) *Transcript {
	t.meta("custom-title", kv{"customTitle", title})
	return t
}

func (t *Transcript) assistant(content []map[string]any, stop any) []byte {
	t.msgN++
	msg := json.RawMessage(obj(
		kv{"id", fmt.Sprintf("msg_%024d", t.msgN)}, kv{"type", "message"}, kv{"role", "assistant"}, kv{"model", "claude-sonnet-4-5"},
		kv{"content", content}, kv{"stop_reason", stop}, kv{"stop_sequence", nil},
		kv{"usage", map[string]any{"input_tokens": 12, "output_tokens": 34, "cache_read_input_tokens": 0}},
	))
	return t.conv("assistant", msg, kv{"requestId", "req_" + NewSessionID()[:12]})
}

// AssistantText writes an assistant text reply that ends the turn.
func (t *Transcript) AssistantText(text string) *Transcript {
	t.assistant([]map[string]any{{"type": "text", "text": text}}, "end_turn")
	return t
}

// AssistantThinking writes a thinking block line (stop_reason null, as
// Claude writes one line per content block).
func (t *Transcript) AssistantThinking(text string) *Transcript {
	t.assistant([]map[string]any{{"type": "thinking", "thinking": text, "signature": "sig"}}, nil)
	return t
}

// AssistantToolUse writes an assistant line starting a tool call.
func (t *Transcript) AssistantToolUse(id, name string, input map[string]any) *Transcript {
	t.assistant([]map[string]any{{"type": "tool_use", "id": id, "name": name, "input": input}}, "tool_use")
	return t
}

// ToolResult writes the user line carrying a tool call's result.
func (t *Transcript) ToolResult(id, output string) *Transcript {
	t.conv("user", map[string]any{"role": "user", "content": []map[string]any{
		{"tool_use_id": id, "type": "tool_result", "content": output, "is_error": false},
	}}, kv{"toolUseResult", map[string]any{"stdout": output, "stderr": "", "interrupted": false, "isImage": false}})
	return t
}

// Interrupt writes the marker Claude writes when the user interrupts a turn.
func (t *Transcript) Interrupt() *Transcript {
	t.conv("user", map[string]any{"role": "user", "content": []map[string]any{{"type": "text", "text": "[Request interrupted by user]"}}})
	return t
}

// ToolID returns a tool_use id of the form the API gives.
func ToolID() string { return "toolu_01" + strings.ReplaceAll(NewSessionID(), "-", "")[:22] }

// Turn writes one whole turn the way 2.1.328 does: the prompt with its
// bookkeeping, a Bash tool call and its result, and the closing text.
func (t *Transcript) Turn(prompt, command, output, reply string) *Transcript {
	id := ToolID()
	t.QueueOperation("enqueue", prompt).QueueOperation("dequeue", "")
	t.User(prompt).Attachment("todo_reminder").AtisLatch().APIRequestShape().APIRequest()
	t.AssistantThinking("Let me run it.")
	t.AssistantToolUse(id, "Bash", map[string]any{"command": command, "description": "Run " + command})
	t.ToolResult(id, output).ToolsUsed("Bash").APIRequest()
	t.AssistantText(reply)
	t.LastPrompt(prompt).CostState()
	return t
}

// CrashMidTool writes a turn cut by kill -9 while a tool ran: it ends with
// the assistant's tool_use, which never gets its result. It returns the
// tool call id.
func (t *Transcript) CrashMidTool(prompt, command string) string {
	id := ToolID()
	t.QueueOperation("enqueue", prompt).QueueOperation("dequeue", "")
	t.User(prompt).Attachment("todo_reminder").AtisLatch().APIRequestShape().APIRequest()
	t.AssistantToolUse(id, "Bash", map[string]any{"command": command, "description": "Long task"})
	return id
}

// LongUserLine returns a valid user line of at least n bytes (a huge paste)
// and advances the conversation.
func (t *Transcript) LongUserLine(n int) []byte {
	return t.UserLine("paste: " + strings.Repeat("0123456789abcdef", n/16+1))
}

// Glue returns the way a torn write looks: the first cut bytes of a, then
// b, on one line.
func Glue(a, b []byte, cut int) []byte {
	if cut > len(a) {
		cut = len(a)
	}
	out := append([]byte(nil), a[:cut]...)
	return append(out, b...)
}

// GlueWhole returns two whole records on one line (a lost newline).
func GlueWhole(a, b []byte) []byte {
	return append(append([]byte(nil), a...), b...)
}

// WriteSparse writes a transcript of exactly size bytes cheaply: head at
// the start, tail at the end (each line newline-terminated) and a hole of
// NUL bytes between, preceded by a newline so the tail starts a line. On
// file systems with holes it takes almost no disk.
func WriteSparse(tb testing.TB, path string, size int64, head, tail []byte) {
	tb.Helper()
	if err := writeSparseFile(path, size, head, tail); err != nil {
		tb.Fatal(err)
	}
}
