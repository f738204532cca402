package copilot

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/copilottest"
)

// seedEvents is a real-shaped run: a headless session killed mid tool,
// resumed, asked permission, aborted.
func seedEvents(t testing.TB) []byte {
	root := t.TempDir()
	s, err := copilottest.New(root, "ce80509e-9be0-432f-a48a-06e04eb70ae6", "/tmp/p", time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	call := copilottest.ToolRequest{ID: "call_1", Name: "bash", Command: "sleep 300"}
	for _, err := range []error{s.Headless("Run", "sleep 300", true), s.Resume(7), s.UserMessage("again"), s.TurnStart(0),
		s.AssistantMessage(0, "", call), s.ToolStart(0, call), s.PermissionRequested("r1", call), s.TurnEnd(0), s.Abort("user_initiated")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	for _, l := range s.Lines() {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Any bytes: no panic, and reading them in two parts (cut anywhere, even
// inside a line) concludes as one read does.
func FuzzReadEvents(f *testing.F) {
	f.Add(seedEvents(f), uint(100))
	f.Add([]byte("{\"type\":\"abort\"\n\n{}\n\xff\n"), uint(3))
	f.Add([]byte(`{"type":"tool.execution_start","data":{"toolCallId":"c"},"timestamp":"x"}`+"\n"), uint(0))
	f.Add([]byte(`{"type":"session.future","data":{},"timestamp":"2026-11-28T00:00:00.000Z"}`+"\n"+
		`{"type":"session.shutdown","data":{"shutdownType":"suspended"},"timestamp":"2026-11-28T00:00:01.000Z"}`+"\n"+
		`{"type":"abort","data":{"reason":7},"timestamp":"2026-11-28T00:00:02.000Z"}`+"\n"), uint(90))
	f.Fuzz(func(t *testing.T, data []byte, cut uint) {
		r := bytes.NewReader(data)
		var whole state
		end, bad, err := readEvents(r, 0, int64(len(data)), &whole)
		if err != nil {
			t.Fatal(err)
		}
		var parts state
		c := int64(cut % uint(len(data)+1))
		mid, bad1, err := readEvents(r, 0, c, &parts)
		if err != nil {
			t.Fatal(err)
		}
		end2, bad2, err := readEvents(r, mid, int64(len(data)), &parts)
		if err != nil {
			t.Fatal(err)
		}
		if end != end2 || bad != bad1+bad2 || !reflect.DeepEqual(normal(whole), normal(parts)) {
			t.Fatalf("one read: end %d bad %d %+v\ntwo reads: end %d bad %d+%d %+v", end, bad, whole, end2, bad1, bad2, parts)
		}
		if end > int64(len(data)) || (end > 0 && data[end-1] != '\n') {
			t.Fatalf("read to %d of %d, not after a newline", end, len(data))
		}
	})
}

// normal makes empty and nil slices equal.
func normal(s state) state {
	if len(s.Pending) == 0 {
		s.Pending = nil
	}
	if len(s.Perms) == 0 {
		s.Perms = nil
	}
	return s
}

// Any bytes: no panic; a flat mapping of plain values is read as written,
// whatever else the file holds after it.
func FuzzWorkspace(f *testing.F) {
	f.Add([]byte("id: ce80509e-9be0-432f-a48a-06e04eb70ae6\ncwd: /tmp/p\nname: 'Reply: pong'\nuser_named: false\n"), "Say hi")
	f.Add([]byte("name: |-\n  two\n  lines\ncwd: \"/a\\tb\"\n"), "x")
	f.Add([]byte("name: >\n  folded\n\n  more\nid: [1]\n"), "")
	f.Fuzz(func(t *testing.T, data []byte, name string) {
		parseWorkspace(data)
		name = strings.Map(func(r rune) rune {
			if r < ' ' || r == '\'' || r == '"' || r == '#' || r == ':' || r == 0x7f || r == 0xfeff {
				return -1
			}
			return r
		}, strings.TrimSpace(name))
		name = strings.Join(strings.Fields(name), " ")
		if name == "" || strings.ContainsAny(name[:1], "|>{[&*!-%@`?,") {
			return
		}
		w, _ := parseWorkspace(fmt.Appendf(nil, "%s\nid: x\ncwd: /c\nname: %s\n", data, name))
		if w.Name != name || w.Cwd != "/c" || w.ID != "x" {
			t.Fatalf("after %q: %+v, want name %q, cwd /c", data, w, name)
		}
	})
}

// The forms of workspace.yaml a YAML writer may use.
func TestParseWorkspace(t *testing.T) {
	for _, c := range []struct{ in, name string }{
		{"name: Say hi\n", "Say hi"},
		{"name: 'Reply with exactly one word: pong'\n", "Reply with exactly one word: pong"},
		{"name: 'it''s'\n", "it's"},
		{"name: \"a\\nb \\\"q\\\"\"\n", "a\nb \"q\""},
		{"name: |-\n  line one\n  line two\nid: x\n", "line one\nline two"},
		{"name: >-\n  folded\n  text\n", "folded text"},
		{"name: long plain\n  continued here\n", "long plain continued here"},
		{"name: 'quoted\n  continued'\n", "quoted continued"},
		{"name: a # comment\n", "a"},
		{"name:\n", ""},
	} {
		w, err := parseWorkspace([]byte("id: ce80509e\ncwd: /p\n" + c.in))
		if err != nil || w.Name != c.name || w.Cwd != "/p" {
			t.Errorf("%q: name %q err %v, want %q", c.in, w.Name, err, c.name)
		}
	}
	w, err := parseWorkspace([]byte("id: x\nnested:\n  a: 1\nlist:\n  - a\ncwd: /p\nname: [x]\n"))
	if err == nil || w.Cwd != "/p" || w.ID != "x" {
		t.Errorf("nested values: %+v, %v: want an error and the flat keys read", w, err)
	}
	w, err = parseWorkspace([]byte("id: x\ncreated_at: 2026-11-28T00:47:48.247Z\n"))
	if err != nil || w.Created != time.Date(2026, 11, 28, 0, 47, 48, 247e6, time.UTC) {
		t.Errorf("created_at: %v %v", w.Created, err)
	}
}

// FuzzApplyIsWhole: a line applied pruned (apply) moves the state as the
// whole line decoded by encoding/json does (applyWhole), line after
// line, whatever the bytes: the pruner drops nothing the state reads
// but the first prompt, read again whole, and checks JSON as
// encoding/json does.
func FuzzApplyIsWhole(f *testing.F) {
	f.Add(seedEvents(f))
	f.Add([]byte(`{"type":"user.message","data":{"content":"first","transformedContent":"x"},"type":"assistant.message"}` + "\n" +
		`{"type":"assistant.message","data":{"content":"a","toolRequests":[{"content":1}],"result":{"content":"r"}},"type":"user.message"}` + "\n" +
		`{"type":"user.message","data":{"Content":"capital","content":7,"cont\u0065nt":"escaped"}}` + "\n" +
		`{"type":"user.message","data":{"content":"later","agentId":"x"}}` + "\n" +
		`{"type":"tool.execution_complete","data":{"toolCallId":"c","result":{"content":"out","detailedContent":"more"}},"timestamp":"2026-11-28T00:00:00Z"}` + "\n" +
		`{"type":"system.message","data":{"content":"sys"}}` + "\n" + `{"type":"x","data":{"content":"\x"}}` + "\n" +
		`{"type":"session.start","data":{"sessionId":"s","context":null,"startTime":"2026-11-28T00:00:00Z"}}` + "\n" +
		`{"type":"user.message","data":{"content":null}}` + "\n" + `{"type":"user.message","data":{"content":"p","content":"q"}}` + "\n" +
		`{"type":"assistant.message","data":{"toolRequests":null}}` + "\n" + `{"type":"assistant.message","data":{"toolRequests":[1,{"a":2}]}}` + "\n" +
		`{"type":"tool.execution_start","data":{"toolCallId":"c","arguments":null,"context":{"cwd":"/x","Cwd":"/y"}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var pruned, whole state
		for _, line := range bytes.Split(b, []byte("\n")) {
			okP, okW := pruned.apply(line), whole.applyWhole(line)
			if okP != okW || !reflect.DeepEqual(normal(pruned), normal(whole)) {
				t.Fatalf("after %q (%v, %v):\npruned %+v\n whole %+v", line, okP, okW, pruned, whole)
			}
		}
	})
}
