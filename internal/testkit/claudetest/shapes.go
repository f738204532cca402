package claudetest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The dense line shapes the transcript reader's tests and benchmarks parse,
// and the dense transcripts the reader's and the adapter's tests read.

// DenseSource is a Go file as the Read tool returns it: numbered lines with
// tabs, quotes and backslashes, so the JSON is dense with escapes.
func DenseSource(lines int) string {
	var b strings.Builder
	for i := 1; i <= lines; i++ {
		var code string
		switch i % 6 {
		case 0:
			code = "\treturn fmt.Errorf(\"open store %s: %w\", path, err)"
		case 1:
			code = "func (s *summary) meta(l *Line) { // apply \"metadata\" in file order"
		case 2:
			code = "\t\tif s.SessionID == \"\" && !strings.HasPrefix(l.Cwd, `C:\\Users`) {"
		case 3:
			code = "\t// Claude writes one line per content block — most with a null stop reason…"
		case 4:
			code = "\tout = append(out, '\\n', '\\t')"
		default:
			code = "}"
		}
		fmt.Fprintf(&b, "%6d\t%s\n", i, code)
	}
	return b.String()
}

// DenseTestOutput is `go test -v` output of about n bytes.
func DenseTestOutput(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "=== RUN   TestTranscript/case_%03d\n--- PASS: TestTranscript/case_%03d (0.%02ds)\n", i, i, i%100)
		if i%7 == 0 {
			fmt.Fprintf(&b, "    transcript_test.go:%d: got \"busy\", want \"idle\"\t(retrying)\n", 100+i)
		}
	}
	b.WriteString("PASS\nok  \tgithub.com/sessiond/sessiond/adapters/claude\t1.234s\n")
	return b.String()
}

// DenseProse is assistant or user prose of about n bytes, with the
// punctuation and non-ASCII letters real text has.
func DenseProse(n int) string {
	const para = "The reader walks back from the end of the file until it knows where the last turn stands — a prompt, a tool call without its result, or the closing reply. “Busy” is only ever inferred from the transcript; the process table is the truth for “running”. Naïve readers parse every line of both 64 KiB windows, which costs ~45 % of the start-up CPU.\n\n"
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(para)
	}
	return b.String()
}

// DenseLine is one line shape, named.
type DenseLine struct {
	Name string
	Line []byte
}

// DenseLines are the line shapes of a busy 2.1.328 session, each as dense
// as real ones: the bookkeeping lines, a long prompt, thinking, tool calls
// (Bash, Read, Edit) and their results with kilobytes of output, and a long
// closing reply.
func DenseLines() []DenseLine {
	tr := NewTranscript("0b6f3c2e-1d4a-4f7e-9a51-7c2d8e4b9f10", "/home/u/src/sessiond", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	var out []DenseLine
	mark := func(name string) {
		ls := tr.Lines()
		out = append(out, DenseLine{name, ls[len(ls)-1]})
	}
	tr.QueueOperation("enqueue", "please run the tests")
	mark("queue-operation")
	tr.User(DenseProse(1500))
	mark("user-prompt-long")
	tr.Attachment("todo_reminder")
	mark("attachment")
	tr.AtisLatch()
	mark("atis-latch")
	tr.APIRequestShape()
	mark("api-request-shape")
	tr.APIRequest()
	mark("api-request")
	tr.AssistantThinking(DenseProse(1200))
	mark("assistant-thinking")
	bash := ToolID()
	tr.AssistantToolUse(bash, "Bash", map[string]any{"command": "go test -v -race ./adapters/claude/ 2>&1 | tail -200", "description": "Run the adapter's tests", "timeout": 600000})
	mark("assistant-tool_use-bash")
	tr.ToolResult(bash, DenseTestOutput(6000))
	mark("user-tool_result-bash")
	read := ToolID()
	tr.AssistantToolUse(read, "Read", map[string]any{"file_path": "/home/u/src/sessiond/adapters/claude/transcript.go", "offset": 1, "limit": 400})
	mark("assistant-tool_use-read")
	tr.ToolResult(read, DenseSource(120))
	mark("user-tool_result-read")
	edit := ToolID()
	tr.AssistantToolUse(edit, "Edit", map[string]any{"file_path": "/home/u/src/sessiond/adapters/claude/line.go", "old_string": DenseSource(20), "new_string": DenseSource(24), "replace_all": false})
	mark("assistant-tool_use-edit")
	tr.ToolsUsed("Bash", "Read", "Edit")
	mark("tools-used")
	tr.AssistantText(DenseProse(2500))
	mark("assistant-text-long")
	tr.LastPrompt("please run the tests")
	mark("last-prompt")
	tr.CostState()
	mark("cost-state")
	return out
}

// Sidechain turns a conversation line into a subagent's (sidechain) line.
func Sidechain(l []byte) []byte {
	return bytes.Replace(l, []byte(`"isSidechain":false`), []byte(`"isSidechain":true`), 1)
}

// GenDense builds a dense transcript from rng: whole turns (short and
// dense, with tool_use/tool_result pairs and long outputs), crashes mid
// tool call, interrupts, sidechain lines, custom titles, corrupt, glued,
// empty and long lines, and an ending chosen among a reply, a crash mid
// tool call, a trailing prompt without reply, a Sidechain tail and a torn
// last line.
func GenDense(rng *rand.Rand, target int) []byte {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(1000)) * time.Hour)
	tr := NewTranscript(NewSessionID(), fmt.Sprintf("/home/u/src/p%d", rng.IntN(50)), start)
	dense := DenseLines()
	size := func() int {
		n := 0
		for _, l := range tr.Lines() {
			n += len(l) + 1
		}
		return n
	}
	if rng.IntN(4) == 0 {
		tr.FileHistorySnapshot() // a first line that is not a message
	}
	if rng.IntN(6) == 0 {
		tr.Add(tr.LongUserLine(rng.IntN(80 << 10))) // a long first line
	}
	for size() < target {
		switch k := rng.IntN(20); {
		case k < 6:
			tr.Turn(fmt.Sprintf("prompt %d", rng.IntN(1000)), "ls", DenseTestOutput(rng.IntN(20000)), DenseProse(rng.IntN(3000)))
		case k < 10:
			// A dense turn: the 2.1.328 line shapes, with fresh ids.
			id := ToolID()
			tr.QueueOperation("enqueue", "go")
			tr.User(DenseProse(rng.IntN(4000)))
			tr.AssistantThinking(DenseProse(rng.IntN(2000)))
			tr.AssistantToolUse(id, "Read", map[string]any{"file_path": "/x.go"})
			if rng.IntN(5) > 0 {
				tr.ToolResult(id, DenseSource(rng.IntN(400)))
			}
			tr.AssistantText(DenseProse(rng.IntN(2500)))
		case k < 12:
			for _, d := range dense[rng.IntN(len(dense)):] {
				tr.Add(d.Line)
			}
		case k == 12:
			tr.CrashMidTool("slow", "python3 slow.py")
		case k == 13:
			tr.Interrupt()
		case k == 14:
			// A subagent's turn in the main file.
			id := ToolID()
			tr.Add(Sidechain(tr.UserLine("sub prompt")))
			tr.AssistantToolUse(id, "Bash", map[string]any{"command": "ls"})
			ls := tr.Lines()
			ls[len(ls)-1] = Sidechain(ls[len(ls)-1])
		case k == 15:
			tr.CustomTitle(fmt.Sprintf("title %d", rng.IntN(100)))
		case k == 16:
			switch rng.IntN(4) {
			case 0:
				tr.Add([]byte(`{"type":"user","message":{"content":"broken`))
			case 1:
				a, b := tr.UserLine("a"), tr.UserLine("b")
				tr.Add(Glue(a, b, rng.IntN(len(a))))
			case 2:
				tr.Add(nil) // an empty line
			case 3:
				tr.Add(tr.LongUserLine(rng.IntN(100 << 10)))
			}
		default:
			tr.APIRequest().AtisLatch().CostState()
		}
	}
	switch rng.IntN(6) {
	case 0:
		tr.CrashMidTool("run the tests", "go test ./...")
	case 1:
		tr.User("a trailing prompt without a reply")
	case 2:
		tr.Add(Sidechain(tr.UserLine("a Sidechain prompt")))
	case 3:
		tr.Interrupt()
	}
	b := tr.Bytes()
	if rng.IntN(5) == 0 {
		b = b[:len(b)-1-rng.IntN(min(len(b), 300))] // a torn last line
	}
	return b
}
