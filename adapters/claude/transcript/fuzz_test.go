package transcript

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// FuzzParseLine: no input makes the transcript line parser panic, and what
// it returns is consistent.
func FuzzParseLine(f *testing.F) {
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/home/u/proj", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	tr.Turn("hello", "ls", "out", "done")
	tr.CrashMidTool("again", "sleep 1")
	tr.Summary("s").FileHistorySnapshot().System("x", "y").CustomTitle("t").Interrupt()
	for _, l := range tr.Lines() {
		f.Add(l)
	}
	a, b := tr.UserLine("a"), tr.UserLine("b")
	f.Add(claudetest.GlueWhole(a, b))
	f.Add(claudetest.Glue(a, b, 17))
	for _, s := range []string{"", "{", "}{", `{"type":"user","message":{"content":[{"type":"tool_result"}]}}`,
		`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"x","input":{"command":"` + "\x00" + `"}}]}}`,
		`{"parentUuid"{"type"{"uuid"`, "\xff\xfe", `{"timestamp":"not a time"}`, `[{"type":"user"}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ls, err := parseLine(b)
		if len(ls) > maxGlued {
			t.Fatalf("%d records from one line", len(ls))
		}
		if err == nil && len(ls) == 0 && json.Valid(b) {
			// Only blank input yields nothing without an error.
			for _, c := range b {
				if !isSpace(c) {
					t.Fatalf("valid JSON %q gave nothing", b)
				}
			}
		}
		for _, l := range ls {
			if l.Kind == KindPrompt && l.Prompt == "" {
				t.Fatal("prompt without text")
			}
			var s Summary
			s.meta(&l)
			s.turn(&l)
		}
	})
}
