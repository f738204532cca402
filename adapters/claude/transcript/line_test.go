package transcript

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

func TestParseLineTypes(t *testing.T) {
	id, cwd := claudetest.NewSessionID(), "/home/u/proj"
	tr := claudetest.NewTranscript(id, cwd, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	tr.Turn("list the files", "ls -la", "total 0", "Nothing here.")
	tr.Summary("old summary").FileHistorySnapshot().System("turn_duration", "3s").CustomTitle("my title").Interrupt()
	tr.Add([]byte(`{"type":"some-future-type","sessionId":"` + id + `","payload":{"x":[1,2,3]}}`))

	kinds := map[string]Kind{}
	var toolUse, toolResult string
	for _, raw := range tr.Lines() {
		ls, err := parseLine(raw)
		if err != nil || len(ls) != 1 {
			t.Fatalf("parseLine(%s) = %v, %v", raw, ls, err)
		}
		l := ls[0]
		if l.Kind != KindOther || kinds[l.Type] == 0 {
			kinds[l.Type] = l.Kind
		}
		if len(l.ToolUses) == 1 {
			toolUse = l.ToolUses[0].ID
			if l.ToolUses[0].Name != "Bash" || l.ToolUses[0].Input != "ls -la" || l.ToolUses[0].At.IsZero() {
				t.Fatalf("tool use = %+v", l.ToolUses[0])
			}
		}
		if len(l.ToolResults) == 1 {
			toolResult = l.ToolResults[0]
		}
		if l.Type == "user" && l.Kind == KindPrompt && (l.Prompt != "list the files" || l.Cwd != cwd || l.SessionID != id || l.Version != claudetest.Version || l.GitBranch != "main") {
			t.Fatalf("prompt line = %+v", l)
		}
		if l.Type == "custom-title" && l.Title != "my title" {
			t.Fatalf("title = %q", l.Title)
		}
	}
	for _, typ := range []string{"queue-operation", "attachment", "atis-latch", "api-request-shape", "api-request", "tools-used", "last-prompt", "cost-state", "summary", "file-history-snapshot", "system", "custom-title", "some-future-type"} {
		if k, ok := kinds[typ]; !ok || k != KindOther {
			t.Errorf("type %s: kind %v (seen %v)", typ, k, ok)
		}
	}
	if kinds["assistant"] != KindAssistant {
		t.Errorf("assistant kind %v", kinds["assistant"])
	}
	if toolUse == "" || toolUse != toolResult {
		t.Fatalf("tool use %q, result %q", toolUse, toolResult)
	}
}

func TestParseLineUserKinds(t *testing.T) {
	cases := []struct {
		line string
		kind Kind
	}{
		{`{"type":"user","message":{"role":"user","content":"hello"}}`, KindPrompt},
		{`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"hello"}]}}`, KindPrompt},
		{`{"type":"user","message":{"role":"user","content":[{"type":"image","source":{}}]}}`, KindPrompt},
		{`{"type":"user","isMeta":true,"message":{"role":"user","content":"Caveat: x"}}`, KindUserOther},
		{`{"type":"user","message":{"role":"user","content":"<command-name>/clear</command-name>"}}`, KindUserOther},
		{`{"type":"user","message":{"role":"user","content":"<local-command-stdout></local-command-stdout>"}}`, KindUserOther},
		{`{"type":"user","message":{"role":"user","content":[{"type":"text","text":"[Request interrupted by user for tool use]"}]}}`, KindInterrupt},
		{`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"}]}}`, KindToolResult},
		{`{"type":"user","message":"not an object"}`, KindUserOther},
		{`{"type":"user"}`, KindUserOther},
		{`{"type":"assistant","message":{"content":"odd"}}`, KindAssistant},
	}
	for _, c := range cases {
		ls, err := parseLine([]byte(c.line))
		if err != nil || len(ls) != 1 || ls[0].Kind != c.kind {
			t.Errorf("%s: got %+v %v, want kind %v", c.line, ls, err, c.kind)
		}
	}
}

func TestParseLineGluedAndCorrupt(t *testing.T) {
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/p", time.Now())
	a := tr.UserLine("first")
	b := tr.UserLine("second")

	ls, err := parseLine(claudetest.GlueWhole(a, b))
	if err != nil || len(ls) != 2 || ls[0].Prompt != "first" || ls[1].Prompt != "second" {
		t.Fatalf("glued whole: %+v %v", ls, err)
	}
	ls, err = parseLine(claudetest.Glue(a, b, len(a)/2))
	if !errors.Is(err, errCorruptLine) || len(ls) != 1 || ls[0].Prompt != "second" {
		t.Fatalf("torn then whole: %+v %v", ls, err)
	}
	for _, bad := range []string{"garbage", "{", `{"type":`, "[1,2]", "\x00\x00\x00", `"str"`} {
		ls, err := parseLine([]byte(bad))
		if err == nil || len(ls) != 0 {
			t.Errorf("%q: %+v %v", bad, ls, err)
		}
	}
	if ls, err := parseLine([]byte("   ")); err != nil || ls != nil {
		t.Fatalf("blank: %v %v", ls, err)
	}
}

// A lineArena hands out slices of one growing array: each must keep its
// own records while more lines are parsed (across growth, glued lines and
// corrupt ones) and match parseLine's records for that line; putArena
// leaves nothing of them behind in the pooled array.
func TestLineArenaKeepsEachLine(t *testing.T) {
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/p", time.Now())
	var raw [][]byte
	for i := range 100 {
		a := tr.UserLine(fmt.Sprintf("prompt %d", i))
		switch i % 7 {
		case 3: // two records glued
			raw = append(raw, claudetest.GlueWhole(a, tr.UserLine(fmt.Sprintf("glued %d", i))))
		case 5: // a torn record, then a whole one
			raw = append(raw, claudetest.Glue(a, tr.UserLine(fmt.Sprintf("after torn %d", i)), len(a)/2))
		case 6:
			raw = append(raw, []byte("garbage"), []byte("  "))
		default:
			raw = append(raw, a)
		}
	}
	a := getArena()
	var c Counts
	got := make([][]Line, len(raw))
	for i, b := range raw {
		got[i] = a.parse(b, &c)
	}
	for i, b := range raw {
		want, _ := parseLine(b)
		if len(got[i]) != len(want) {
			t.Fatalf("line %d: %d records, parseLine has %d", i, len(got[i]), len(want))
		}
		for j := range want {
			if got[i][j].Prompt != want[j].Prompt || got[i][j].UUID != want[j].UUID {
				t.Fatalf("line %d record %d: %q (%s), parseLine has %q (%s)", i, j, got[i][j].Prompt, got[i][j].UUID, want[j].Prompt, want[j].UUID)
			}
		}
	}
	if c.Lines != int64(len(raw)) || c.Glued == 0 || c.Corrupt == 0 {
		t.Fatalf("counted %+v over %d lines", c, len(raw))
	}
	putArena(a)
	if len(a.buf) != 0 {
		t.Fatalf("a pooled arena holds %d records", len(a.buf))
	}
	for i, l := range a.buf[:cap(a.buf)] {
		if l.Prompt != "" || l.UUID != "" {
			t.Fatalf("a pooled arena still holds record %d: %q", i, l.Prompt)
		}
	}
	var nilArena *lineArena
	if ls := nilArena.parse(raw[0], &c); len(ls) != 1 || ls[0].Prompt != "prompt 0" {
		t.Fatalf("no arena: %+v", ls)
	}
}

func TestShorten(t *testing.T) {
	cases := []struct {
		in   string
		max  int
		want string
	}{
		{"hello", 10, "hello"},
		{"  a \n\t b  ", 10, "a b"},
		{"abcdefghij", 10, "abcdefghij"},
		{"abcdefghijk", 10, "abcdefghi…"},
		{"a\x00b\x1bc", 10, "abc"},
		{"héllo wörld", 5, "héll…"},
		{"x", 0, ""},
	}
	for _, c := range cases {
		if got := Shorten(c.in, c.max); got != c.want {
			t.Errorf("Shorten(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
	}
	long := strings.Repeat("ab ", 1000)
	if got := Shorten(long, 80); utf8.RuneCountInString(got) != 80 {
		t.Fatalf("len %d", utf8.RuneCountInString(got))
	}
}
