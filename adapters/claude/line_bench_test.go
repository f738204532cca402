package claude

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// denseSource is a Go file as the Read tool returns it: numbered lines with
// tabs, quotes and backslashes, so the JSON is dense with escapes.
func denseSource(lines int) string {
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

// denseTestOutput is `go test -v` output of about n bytes.
func denseTestOutput(n int) string {
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

// denseProse is assistant or user prose of about n bytes, with the
// punctuation and non-ASCII letters real text has.
func denseProse(n int) string {
	const para = "The reader walks back from the end of the file until it knows where the last turn stands — a prompt, a tool call without its result, or the closing reply. “Busy” is only ever inferred from the transcript; the process table is the truth for “running”. Naïve readers parse every line of both 64 KiB windows, which costs ~45 % of the start-up CPU.\n\n"
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(para)
	}
	return b.String()
}

// denseLines are the line shapes of a busy 2.1.328 session, each as dense
// as real ones: the bookkeeping lines, a long prompt, thinking, tool calls
// (Bash, Read, Edit) and their results with kilobytes of output, and a long
// closing reply.
type denseLine struct {
	name string
	line []byte
}

func denseLines() []denseLine {
	tr := claudetest.NewTranscript("0b6f3c2e-1d4a-4f7e-9a51-7c2d8e4b9f10", "/home/u/src/sessiond", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	var out []denseLine
	mark := func(name string) {
		ls := tr.Lines()
		out = append(out, denseLine{name, ls[len(ls)-1]})
	}
	tr.QueueOperation("enqueue", "please run the tests")
	mark("queue-operation")
	tr.User(denseProse(1500))
	mark("user-prompt-long")
	tr.Attachment("todo_reminder")
	mark("attachment")
	tr.AtisLatch()
	mark("atis-latch")
	tr.APIRequestShape()
	mark("api-request-shape")
	tr.APIRequest()
	mark("api-request")
	tr.AssistantThinking(denseProse(1200))
	mark("assistant-thinking")
	bash := claudetest.ToolID()
	tr.AssistantToolUse(bash, "Bash", map[string]any{"command": "go test -v -race ./adapters/claude/ 2>&1 | tail -200", "description": "Run the adapter's tests", "timeout": 600000})
	mark("assistant-tool_use-bash")
	tr.ToolResult(bash, denseTestOutput(6000))
	mark("user-tool_result-bash")
	read := claudetest.ToolID()
	tr.AssistantToolUse(read, "Read", map[string]any{"file_path": "/home/u/src/sessiond/adapters/claude/transcript.go", "offset": 1, "limit": 400})
	mark("assistant-tool_use-read")
	tr.ToolResult(read, denseSource(120))
	mark("user-tool_result-read")
	edit := claudetest.ToolID()
	tr.AssistantToolUse(edit, "Edit", map[string]any{"file_path": "/home/u/src/sessiond/adapters/claude/line.go", "old_string": denseSource(20), "new_string": denseSource(24), "replace_all": false})
	mark("assistant-tool_use-edit")
	tr.ToolsUsed("Bash", "Read", "Edit")
	mark("tools-used")
	tr.AssistantText(denseProse(2500))
	mark("assistant-text-long")
	tr.LastPrompt("please run the tests")
	mark("last-prompt")
	tr.CostState()
	mark("cost-state")
	return out
}

// BenchmarkParseLine compares the one-pass scanner (impl=scan, ParseLine)
// with the encoding/json parser it replaced (impl=json, refParseLine) on
// dense 2.1.328 lines, one sub-benchmark per line shape and one for a whole
// turn. Run:
//
//	go test -run='^$' -bench=BenchmarkParseLine -benchmem -count=5 ./adapters/claude/
func BenchmarkParseLine(b *testing.B) {
	lines := denseLines()
	impls := []struct {
		name  string
		parse func([]byte) ([]line, error)
	}{{"scan", parseLine}, {"json", refParseLine}}
	cases := append([]denseLine(nil), lines...)
	var turn []byte
	for _, l := range lines {
		turn = append(append(turn, l.line...), '\n')
	}
	cases = append(cases, denseLine{"turn", turn})
	for _, c := range cases {
		for _, im := range impls {
			b.Run("line="+c.name+"/impl="+im.name, func(b *testing.B) {
				var raws [][]byte
				if c.name == "turn" {
					raws, _ = splitLines(c.line)
				} else {
					raws = [][]byte{c.line}
				}
				b.SetBytes(int64(len(c.line)))
				b.ReportAllocs()
				for b.Loop() {
					for _, r := range raws {
						if ls, err := im.parse(r); err != nil || len(ls) != 1 {
							b.Fatalf("%s: %v %v", c.name, ls, err)
						}
					}
				}
			})
		}
	}
}

// BenchmarkListDense: the first read of a transcript (list: the head and
// tail windows, every line in them parsed) of about 2 MB made of dense
// turns, so both 64 KiB windows are full of real lines. Run:
//
//	go test -run='^$' -bench=BenchmarkListDense -benchmem -count=5 ./adapters/claude/
func BenchmarkListDense(b *testing.B) {
	var file []byte
	for _, l := range denseLines() {
		file = append(append(file, l.line...), '\n')
	}
	turn := file
	for len(file) < 2<<20 {
		file = append(file, turn...)
	}
	r := bytes.NewReader(file)
	b.ReportAllocs()
	var read int64
	for b.Loop() {
		var s summary
		res, err := list(countingReaderAt{r, &read}, int64(len(file)), defaultWindowBytes, &s)
		if err != nil || res.c.corrupt != 0 || s.SessionID == "" {
			b.Fatalf("list: %+v %v", res, err)
		}
	}
	b.ReportMetric(float64(read)/float64(b.N), "B-read/file")
}

type countingReaderAt struct {
	r *bytes.Reader
	n *int64
}

func (c countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	*c.n += int64(n)
	return n, err
}
