package bench

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/copilottest"
)

// The homes of the four newer agents (Gemini CLI, Qwen Code, Pi, GitHub
// Copilot CLI), each written in the agent's own layout and line shapes as
// docs/agents/<agent>.md and the adapters' testdata show them: every
// session a prompt and 1 to MaxTurns turns (log-uniform), each turn a
// shell call, its output (512 B to 16 KiB, log-uniform) and the model's
// answer; every InFlightEvery-th session ends mid tool call, as a kill -9
// leaves it. The files' mtimes are the sessions' last lines, all settled.

// agentSpec shapes one generated home.
type agentSpec struct {
	Sessions, Projects, MaxTurns, InFlightEvery int
	Seed                                        uint64
}

// agentHome is a generated home of one agent.
type agentHome struct {
	Agent    string // the adapter's name
	Root     string // the folder given to sessiond (--<agent>-dir)
	IDs      []string
	InFlight int
	Files    int
	Bytes    int64
	Turns    int
	// floor says what the bare read of this home lists and reads.
	floor floorLayout
}

// floorLayout is how the floor of an agent's home lists its files and how
// much of each it reads: the bytes its adapter's first read needs.
type floorLayout struct {
	// Levels are the path elements below the root: a fixed name, "*" for
	// every folder listed, and last a file pattern (filepath.Match) or
	// names separated by "|".
	Levels []string
	// Whole: each file read from start to end (a chat folded from its
	// first line); else its first Head and last Tail bytes.
	Whole      bool
	Head, Tail int64
	// Extra files read whole once (projects.json).
	Extra []string
	Says  string
}

// newAgents are the four newer agents the agents scenario measures.
var newAgents = []string{"gemini", "qwen", "pi", "copilot"}

// writeAgentHome writes the home of agent under dir.
func writeAgentHome(agent, dir string, spec agentSpec) (*agentHome, error) {
	h := &agentHome{Agent: agent}
	var w func(*agentHome, *sessionPlan) error
	switch agent {
	case "gemini":
		h.Root = filepath.Join(dir, ".gemini")
		h.floor = floorLayout{Levels: []string{"tmp", "*", "chats", "session-*.jsonl"}, Whole: true,
			Extra: []string{filepath.Join(h.Root, "projects.json")},
			Says:  "projects.json, then tmp/*/chats/ listed and each chat read whole (a chat is a fold from its first line)"}
		w = writeGemini
	case "qwen":
		h.Root = filepath.Join(dir, ".qwen")
		h.floor = floorLayout{Levels: []string{"projects", "*", "chats", "*.jsonl"}, Whole: true,
			Says: "projects/*/chats/ listed and each chat read whole (read forward from its start)"}
		w = writeQwen
	case "pi":
		h.Root = filepath.Join(dir, ".pi", "agent")
		h.floor = floorLayout{Levels: []string{"sessions", "*", "*.jsonl"}, Head: 256 << 10, Tail: 16 << 10,
			Says: "sessions/*/ listed and of each file the first 256 KiB (the header and first prompt, Pi's title) and the last 16 KiB (the turn state)"}
		w = writePi
	case "copilot":
		h.Root = filepath.Join(dir, ".copilot")
		h.floor = floorLayout{Levels: []string{"session-state", "*", "events.jsonl|workspace.yaml"}, Whole: true,
			Says: "session-state/ and each session folder listed, events.jsonl and workspace.yaml read whole (events are folded from the first)"}
	default:
		return nil, fmt.Errorf("no home generator for agent %q", agent)
	}
	if err := os.MkdirAll(h.Root, 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(spec.Seed, 0x5e55))
	// A session an hour, the last one ending a day ago at the latest (30
	// turns take under an hour): no file is recent enough to be looked at
	// again as possibly still written.
	base := time.Now().Add(-time.Duration(spec.Sessions+24) * time.Hour).UTC().Truncate(time.Millisecond)
	projects := map[string]string{}
	for i := range spec.Sessions {
		p := &sessionPlan{
			ID:       fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", rng.Uint32(), i&0xffff, rng.IntN(4096), rng.IntN(4096), rng.Uint64()&0xffffffffffff),
			Project:  fmt.Sprintf("proj-%03d", i%max(1, spec.Projects)),
			Turns:    logUniform(rng, 1, max(1, spec.MaxTurns)),
			InFlight: spec.InFlightEvery > 0 && i%spec.InFlightEvery == spec.InFlightEvery-1,
			At:       base.Add(time.Duration(i) * time.Hour),
			rng:      rng,
		}
		p.Cwd = "/home/u/src/" + p.Project
		projects[p.Cwd] = p.Project
		if agent == "copilot" {
			if err := writeCopilot(h, p); err != nil {
				return nil, err
			}
		} else if err := w(h, p); err != nil {
			return nil, err
		}
		h.IDs = append(h.IDs, p.ID)
		h.Turns += p.Turns
		if p.InFlight {
			h.InFlight++
		}
	}
	if agent == "gemini" {
		b, err := json.Marshal(map[string]any{"projects": projects})
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(h.Root, "projects.json"), b, 0o644); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// sessionPlan is one session being generated.
type sessionPlan struct {
	ID, Project, Cwd string
	Turns            int
	InFlight         bool
	At               time.Time // the time of the next line
	rng              *rand.Rand
	n                int
}

// tick moves the session's clock on and returns the time of a line.
func (p *sessionPlan) tick(d time.Duration) time.Time {
	p.At = p.At.Add(d)
	return p.At
}

func (p *sessionPlan) uuid() string {
	p.n++
	return fmt.Sprintf("%08x-%04x-4%03x-a%03x-%012x", p.rng.Uint32(), p.n&0xffff, p.rng.IntN(4096), p.rng.IntN(4096), p.rng.Uint64()&0xffffffffffff)
}

func (p *sessionPlan) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[p.rng.IntN(16)]
	}
	return string(b)
}

// prompt, command and output of turn t: a shell command and what it
// printed, of a log-uniform size.
func (p *sessionPlan) prompt(t int) string {
	return fmt.Sprintf("Run the tests of package %d of %s and fix what fails; then say what you changed.", t, p.Project)
}

func (p *sessionPlan) command(t int) string {
	return fmt.Sprintf("go test ./pkg%d/... 2>&1 | tail -n 200", t)
}

func (p *sessionPlan) output() string {
	return outputText(p.rng, logUniform(p.rng, 512, 16<<10))
}

func (p *sessionPlan) answer(t int) string {
	return fmt.Sprintf("The tests of package %d pass now. I changed the comparison in `decode.go` so an empty field is no longer taken for a missing one, and added a case for it to `decode_test.go`.", t)
}

// outputText is n bytes (about) of test output.
func outputText(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		fmt.Fprintf(&b, "=== RUN   TestDecode/case_%d\n--- PASS: TestDecode/case_%d (0.%02ds)\n", rng.IntN(1000), rng.IntN(1000), rng.IntN(100))
		if rng.IntN(8) == 0 {
			fmt.Fprintf(&b, "    decode_test.go:%d: got \"%x\", want \"%x\"\n", 10+rng.IntN(400), rng.Uint32(), rng.Uint32())
		}
	}
	return b.String()
}

// logUniform is an int in [lo, hi], log-uniform.
func logUniform(rng *rand.Rand, lo, hi int) int {
	if hi <= lo {
		return lo
	}
	v := int(math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi+1))-math.Log(float64(lo)))))
	return min(max(v, lo), hi)
}

func js(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func isoMs(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// lineFile is a session file written through a buffer.
type lineFile struct {
	f   *os.File
	w   *bufio.Writer
	n   int64
	err error
}

func createLines(path string) (*lineFile, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	return &lineFile{f: f, w: bufio.NewWriterSize(f, 256<<10)}, nil
}

func (l *lineFile) line(format string, args ...any) {
	if l.err != nil {
		return
	}
	n, err := fmt.Fprintf(l.w, format, args...)
	l.n += int64(n) + 1
	if err == nil {
		err = l.w.WriteByte('\n')
	}
	l.err = err
}

// close flushes the file and sets its mtime to last.
func (l *lineFile) close(h *agentHome, last time.Time) error {
	err := l.err
	if e := l.w.Flush(); err == nil {
		err = e
	}
	if e := l.f.Close(); err == nil {
		err = e
	}
	if err == nil {
		err = os.Chtimes(l.f.Name(), last, last)
	}
	h.Files++
	h.Bytes += l.n
	return err
}

// writeGemini writes a chat of Gemini CLI 0.61.0
// (adapters/gemini/testdata): the header, the session context, then per
// turn the prompt, the model's answer without its call, the same answer
// again with the finished call, the results sent back and the closing
// answer, each followed by a $set of lastUpdated. In flight: the chat
// ends after the answer without its call (the call still runs).
func writeGemini(h *agentHome, p *sessionPlan) error {
	start := p.At
	name := fmt.Sprintf("session-%s-%s.jsonl", start.Format("2006-01-02T15-04"), p.ID[:8])
	l, err := createLines(filepath.Join(h.Root, "tmp", p.Project, "chats", name))
	if err != nil {
		return err
	}
	if err := writeIfMissing(filepath.Join(h.Root, "tmp", p.Project, ".project_root"), p.Cwd); err != nil {
		return err
	}
	ts := isoMs(start)
	l.line(`{"sessionId":%q,"projectHash":%q,"startTime":%q,"lastUpdated":%q,"kind":"main"}`, p.ID, hashOfFolder(p.Cwd), ts, ts)
	ctxText := fmt.Sprintf("<session_context>\nThis is the Gemini CLI. We are setting up the context for our chat.\nToday's date is %s (formatted according to the user's locale).\nMy operating system is: linux\nThe project's temporary directory is: %s\n- **Workspace Directories:**\n  - %s\n- **Directory Structure:**\n\nShowing up to 200 items (files + folders).\n\n%s/\n\n\n\n</session_context>",
		start.Format("Monday, January 2, 2006"), filepath.Join("/home/u/.gemini/tmp", p.Project), p.Cwd, p.Cwd)
	ts = isoMs(p.tick(time.Millisecond))
	l.line(`{"$set":{"messages":[{"id":%q,"timestamp":%q,"type":"user","content":[{"text":%s}]}],"lastUpdated":%q}}`, p.hex(32), ts, js(ctxText), ts)
	set := func(t time.Time) { l.line(`{"$set":{"lastUpdated":%q}}`, isoMs(t)) }
	for t := range p.Turns {
		at := p.tick(90 * time.Second)
		l.line(`{"id":%q,"timestamp":%q,"type":"user","content":[{"text":%s}]}`, p.uuid(), isoMs(at), js(p.prompt(t)))
		set(at)
		ans, ansAt := p.uuid(), p.tick(2*time.Second)
		tokens := fmt.Sprintf(`"tokens":{"input":%d,"output":4,"cached":0,"thoughts":0,"tool":0,"total":%d},"model":"gemini-2.5-flash"`, 12160+t*900, 12164+t*900)
		l.line(`{"id":%q,"timestamp":%q,"type":"gemini","content":"","thoughts":[],%s}`, ans, isoMs(ansAt), tokens)
		set(ansAt)
		if p.InFlight && t == p.Turns-1 {
			break
		}
		call := "run_shell_command__call_" + p.hex(24)
		resp := js(map[string]any{"functionResponse": map[string]any{"id": call, "name": "run_shell_command",
			"response": map[string]any{"output": "<untrusted_context>\nOutput: " + p.output() + "\nProcess Group PGID: 22437\n</untrusted_context>"}}})
		done := p.tick(10 * time.Second)
		l.line(`{"id":%q,"timestamp":%q,"type":"gemini","content":"","thoughts":[],%s,"toolCalls":[{"id":%q,"name":"run_shell_command","args":{"command":%s,"description":"run the tests"},"result":[%s],"status":"success","timestamp":%q,"resultDisplay":"ok","description":%s,"displayName":"Shell","renderOutputAsMarkdown":false}]}`,
			ans, isoMs(ansAt), tokens, call, js(p.command(t)), resp, isoMs(done), js(p.command(t)))
		at = p.tick(2 * time.Millisecond)
		l.line(`{"id":%q,"timestamp":%q,"type":"user","content":[%s]}`, p.uuid(), isoMs(at), resp)
		set(at)
		at = p.tick(3 * time.Second)
		l.line(`{"id":%q,"timestamp":%q,"type":"gemini","content":%s,"thoughts":[],%s}`, p.uuid(), isoMs(at), js(p.answer(t)), tokens)
		set(at)
	}
	return l.close(h, p.At)
}

// hashOfFolder is Gemini CLI's projectHash: the SHA-256 of the folder.
func hashOfFolder(folder string) string {
	sum := sha256.Sum256([]byte(folder))
	return hex.EncodeToString(sum[:])
}

func writeIfMissing(path, content string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// writeQwen writes a chat of Qwen Code 0.24.4 (adapters/qwen/testdata):
// per turn the prompt, an attribution snapshot, the API response's
// telemetry, the model's call, the call's telemetry, its result, the
// telemetry again and the closing reply, every record carrying the
// session, cwd and version. In flight: the chat ends at the call.
func writeQwen(h *agentHome, p *sessionPlan) error {
	enc := []byte(p.Cwd)
	for i, c := range enc {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			enc[i] = '-'
		}
	}
	l, err := createLines(filepath.Join(h.Root, "projects", string(enc), "chats", p.ID+".jsonl"))
	if err != nil {
		return err
	}
	parent := "null"
	rec := func(typ, prov, rest string, d time.Duration) {
		id := p.uuid()
		l.line(`{"uuid":%q,"parentUuid":%s,"sessionId":%q,"timestamp":%q,"type":%q,"provenance":%q,"cwd":%q,"version":"0.24.4",%s}`,
			id, parent, p.ID, isoMs(p.tick(d)), typ, prov, p.Cwd, rest)
		parent = js(id)
	}
	telemetry := func(text string) string {
		extra := ""
		if text != "" {
			extra = `,"response_text":` + js(text)
		}
		return fmt.Sprintf(`"subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.api_response","event.timestamp":%q,"response_id":"chatcmpl-%s","model":"qwen3-coder-plus","status_code":200,"duration_ms":1675,"input_token_count":%d,"output_token_count":5,"cached_content_token_count":0,"thoughts_token_count":0,"total_token_count":15%s,"prompt_id":"%s########0","auth_type":"openai","ttft_ms":1640}}`,
			isoMs(p.At), p.hex(12), 10+p.rng.IntN(20000), extra, p.ID)
	}
	for t := range p.Turns {
		rec("user", "real_user", `"message":{"role":"user","parts":[{"text":`+js(p.prompt(t))+`}]}`, 90*time.Second)
		rec("system", "system", fmt.Sprintf(`"subtype":"attribution_snapshot","systemPayload":{"snapshot":{"type":"attribution-snapshot","version":1,"surface":"cli","fileStates":{},"promptCount":%d,"promptCountAtLastCommit":0}}`, t+1), 30*time.Millisecond)
		rec("system", "system", telemetry(""), 2*time.Second)
		call := fmt.Sprintf("call_0_%d", 1795826836817+p.rng.IntN(1e9))
		args := `{"command":` + js(p.command(t)) + `,"description":"run the tests"}`
		rec("assistant", "assistant_output", `"model":"qwen3-coder-plus","message":{"role":"model","parts":[{"text":"Running the tests."},{"functionCall":{"id":"`+call+`","name":"run_shell_command","args":`+args+`}}]},"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"thoughtsTokenCount":0,"totalTokenCount":15,"cachedContentTokenCount":0}`, 2*time.Millisecond)
		if p.InFlight && t == p.Turns-1 {
			break
		}
		out := p.output()
		rec("system", "system", fmt.Sprintf(`"subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.tool_call","event.timestamp":%q,"call_id":%q,"function_name":"run_shell_command","function_args":%s,"duration_ms":721,"status":"success","execution_status":"success","success":true,"decision":"auto_accept","prompt_id":"%s########0","response_id":"chatcmpl-x","tool_type":"native","content_length":%d}}`,
			isoMs(p.At), call, args, p.ID, len(out)), 10*time.Second)
		rec("tool_result", "tool_result", `"message":{"role":"user","parts":[{"functionResponse":{"id":"`+call+`","name":"run_shell_command","response":{"output":`+
			js("Command: "+p.command(t)+"\nDirectory: (root)\nOutput: "+out+"\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: (none)")+`}}}]},"toolCallResult":{"callId":"`+call+`","status":"success","resultDisplay":{"type":"shell_result","version":1,"directory":`+js(p.Cwd)+`,"exitCode":0,"signal":null,"pid":null,"outcome":"completed","outputFiles":[],"output":`+js(out)+`,"text":"ok","error":null,"notices":[],"truncated":false},"executionStatus":"success"}`, 5*time.Millisecond)
		rec("system", "system", telemetry(p.answer(t)), time.Second)
		rec("assistant", "assistant_output", `"model":"qwen3-coder-plus","message":{"role":"model","parts":[{"text":`+js(p.answer(t))+`}]},"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":5,"thoughtsTokenCount":0,"totalTokenCount":15,"cachedContentTokenCount":0}`, 30*time.Millisecond)
	}
	return l.close(h, p.At)
}

// writePi writes a session file of Pi 0.73.1 (adapters/pi/testdata):
// the header, the model and thinking level, then per turn the prompt, the
// model's tool call (stopReason toolUse), its result and the closing
// reply (stop). In flight: the file ends at the call.
func writePi(h *agentHome, p *sessionPlan) error {
	start := p.At
	dir := "--" + strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(strings.TrimPrefix(p.Cwd, "/")) + "--"
	name := strings.NewReplacer(":", "-", ".", "-").Replace(isoMs(start)) + "_" + p.ID + ".jsonl"
	l, err := createLines(filepath.Join(h.Root, "sessions", dir, name))
	if err != nil {
		return err
	}
	l.line(`{"type":"session","version":3,"id":%q,"timestamp":%q,"cwd":%q}`, p.ID, isoMs(start), p.Cwd)
	parent := "null"
	entry := func(typ, rest string, d time.Duration) {
		id := p.hex(8)
		l.line(`{"type":%q,"id":%q,"parentId":%s,"timestamp":%q,%s}`, typ, id, parent, isoMs(p.tick(d)), rest)
		parent = js(id)
	}
	entry("model_change", `"provider":"anthropic","modelId":"claude-sonnet-4-5"`, 100*time.Millisecond)
	entry("thinking_level_change", `"thinkingLevel":"off"`, 4*time.Millisecond)
	usage := func(in int) string {
		return fmt.Sprintf(`"api":"anthropic-messages","provider":"anthropic","model":"claude-sonnet-4-5","usage":{"input":%d,"output":1,"cacheRead":0,"cacheWrite":0,"totalTokens":%d,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}}`, in, in+1)
	}
	for t := range p.Turns {
		entry("message", fmt.Sprintf(`"message":{"role":"user","content":[{"type":"text","text":%s}],"timestamp":%d}`, js(p.prompt(t)), p.At.Add(90*time.Second).UnixMilli()), 90*time.Second)
		call := "toolu_" + p.hex(24)
		entry("message", fmt.Sprintf(`"message":{"role":"assistant","content":[{"type":"toolCall","id":%q,"name":"bash","arguments":{"command":%s,"description":"run the tests","timeout":600000}}],%s,"stopReason":"toolUse","timestamp":%d,"responseId":"msg_%s"}`,
			call, js(p.command(t)), usage(1413+t*900), p.At.UnixMilli(), p.hex(24)), 2*time.Second)
		if p.InFlight && t == p.Turns-1 {
			break
		}
		entry("message", fmt.Sprintf(`"message":{"role":"toolResult","toolCallId":%q,"toolName":"bash","content":[{"type":"text","text":%s}],"isError":false,"timestamp":%d}`,
			call, js(p.output()), p.At.Add(10*time.Second).UnixMilli()), 10*time.Second)
		entry("message", fmt.Sprintf(`"message":{"role":"assistant","content":[{"type":"text","text":%s}],%s,"stopReason":"stop","timestamp":%d,"responseId":"msg_%s"}`,
			js(p.answer(t)), usage(1500+t*900), p.At.UnixMilli(), p.hex(24)), 3*time.Second)
	}
	return l.close(h, p.At)
}

// writeCopilot writes a session folder of GitHub Copilot CLI 1.0.102
// with internal/testkit/copilottest (its lines are the CLI's): the start,
// per turn the prompt, the tool's turn (the call, its start and
// completion) and the answer's turn (the answer carries the output, as
// the model quotes it), then the shutdown and workspace.yaml. In flight:
// the events end at the tool's start, with no shutdown.
func writeCopilot(h *agentHome, p *sessionPlan) error {
	start := p.At
	s, err := copilottest.New(h.Root, p.ID, p.Cwd, start)
	if err != nil {
		return err
	}
	s.Step = 500 * time.Millisecond
	steps := []func() error{func() error { return s.Start("1.0.102") }}
	for t := range p.Turns {
		call := copilottest.ToolRequest{ID: s.CallID(), Name: "bash", Command: p.command(t)}
		last := p.InFlight && t == p.Turns-1
		steps = append(steps,
			func() error { s.At = s.At.Add(90 * time.Second); return s.UserMessage(p.prompt(t)) },
			s.SystemMessage,
			func() error { return s.TurnStart(0) },
			s.UsageRecord,
			func() error { return s.AssistantMessage(0, "", call) },
			func() error { return s.ToolStart(0, call) },
		)
		if last {
			break
		}
		steps = append(steps,
			func() error { s.At = s.At.Add(10 * time.Second); return s.ToolComplete(0, call.ID, true) },
			func() error { return s.TurnEnd(0) },
			func() error { return s.TurnStart(1) },
			s.UsageRecord,
			func() error {
				return s.AssistantMessage(1, p.answer(t)+"\n\nThe output was:\n\n```\n"+p.output()+"```")
			},
			func() error { return s.TurnEnd(1) },
		)
	}
	if !p.InFlight {
		steps = append(steps, func() error { return s.Shutdown("routine") })
	}
	for _, f := range steps {
		if err := f(); err != nil {
			return err
		}
	}
	if err := s.Workspace(p.prompt(0)[:40], start, s.At); err != nil {
		return err
	}
	var n int64
	for _, l := range s.Lines() {
		n += int64(len(l)) + 1
	}
	for _, f := range []string{s.EventsPath(), filepath.Join(s.Dir, "workspace.yaml")} {
		if fi, err := os.Stat(f); err == nil && f != s.EventsPath() {
			n += fi.Size()
		}
		if err := os.Chtimes(f, s.At, s.At); err != nil {
			return err
		}
	}
	// The folder's own mtime too: Copilot CLI made it when the session
	// began; one of now would make every session look just written.
	if err := os.Chtimes(s.Dir, s.At, s.At); err != nil {
		return err
	}
	p.At = s.At
	h.Files += 2
	h.Bytes += n
	return nil
}
