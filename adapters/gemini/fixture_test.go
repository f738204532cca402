package gemini

import (
	"bytes"
	"os"
	"testing"

	"github.com/sessiond/sessiond/session"
)

// TestRealChats folds the chats the real Gemini CLI 0.61.0 wrote
// (testdata/README.md) line by line and checks the activity after each:
// what a pass reading the file at that moment concludes.
func TestRealChats(t *testing.T) {
	const (
		idle = session.ActivityIdle
		busy = session.ActivityBusy
	)
	cases := []struct {
		file  string
		title string
		// after each line
		want []session.Activity
	}{
		{"tui-approved-shell.jsonl", "RUN: sleep 20; echo fin", []session.Activity{
			idle, // header
			idle, // the session context, before any prompt
			busy, // the prompt
			busy,
			busy, // the answer: calls only, running or awaiting approval
			busy,
			busy, // the calls, done
			busy, // their results, sent
			busy,
			idle, // "done."
			idle,
		}},
		{"headless-text-and-call.jsonl", "RUNT: sleep 10; echo finished", []session.Activity{
			idle, idle, busy, busy,
			idle, // "Running it now." with a call: reads as an answer (the process tree says busy)
			idle,
			busy, // the call, done
			busy, // its result
			busy,
			idle, // "done."
			idle,
		}},
	}
	for _, tc := range cases {
		b, err := os.ReadFile("testdata/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		lines := bytes.SplitAfter(b, []byte("\n"))
		if len(lines[len(lines)-1]) == 0 {
			lines = lines[:len(lines)-1]
		}
		if len(lines) != len(tc.want) {
			t.Fatalf("%s: %d lines, want %d", tc.file, len(lines), len(tc.want))
		}
		var c chat
		for i, l := range lines {
			c.fold(l)
			if got := c.turn(); got.Activity != tc.want[i] {
				t.Errorf("%s after line %d: %s (%s), want %s", tc.file, i+1, got.Activity, got.Evidence, tc.want[i])
			}
		}
		if c.Bad != 0 || !c.Drift.Empty() || c.Title != tc.title || c.Kind != "main" || c.ProjectHash == "" || !c.HasHeader {
			t.Errorf("%s: %+v", tc.file, c)
		}
	}
}
