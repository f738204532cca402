package transcript

import (
	"bytes"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// FuzzTranscriptRead: the transcript readers (the first listing with its
// head and tail windows, and the incremental read of appended bytes) never
// panic on any file content, and leave the read position inside the file
// and, unless a partial line is to be skipped, at a line start — so the
// next read neither re-reads nor loses a line.
func FuzzTranscriptRead(f *testing.F) {
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/home/u/proj", time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC))
	tr.Turn("hello", "ls", "a b", "two files")
	tr.CrashMidTool("run the tests", "go test ./...")
	good := tr.Bytes()
	ls := tr.Lines()
	toolUse := ls[len(ls)-1]
	f.Add(good, uint8(0), uint16(len(good)/2))
	f.Add(good, uint8(200), uint16(0))
	f.Add(good[:len(good)-7], uint8(3), uint16(100)) // torn last line
	a, b := tr.UserLine("a"), tr.UserLine("b")
	f.Add(append(claudetest.Glue(a, b, 17), '\n'), uint8(1), uint16(5))
	f.Add(append(append(claudetest.GlueWhole(a, b), '\n'), toolUse...), uint8(9), uint16(30))
	f.Add([]byte("\n\n\n\x00\xff\xfe\n{\n}\n"), uint8(0), uint16(2))
	f.Add(bytes.Repeat([]byte("x"), 600), uint8(0), uint16(300)) // one long line, no newline
	f.Fuzz(func(t *testing.T, data []byte, window uint8, split uint16) {
		win := 16 + int(window)*4
		maxLine := 64 + int(window)*8
		size := int64(len(data))
		atLineStart := func(what string, off int64, skip bool) {
			if off < 0 || off > size {
				t.Fatalf("%s: offset %d outside the file (%d bytes)", what, off, size)
			}
			if !skip && off > 0 && data[off-1] != '\n' {
				t.Fatalf("%s: offset %d is inside a line", what, off)
			}
		}
		var s Summary
		res, err := List(bytes.NewReader(data), size, win, &s)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		atLineStart("list", res.Offset, res.SkipPartial)
		if len(s.Pending) > MaxPending {
			t.Fatalf("%d pending tool calls", len(s.Pending))
		}

		// The file as a first read saw it, then grown to its full size.
		cut := min(int64(split), size)
		var s2 Summary
		res, err = List(bytes.NewReader(data[:cut]), cut, win, &s2)
		if err != nil {
			t.Fatalf("list prefix: %v", err)
		}
		atLineStart("list prefix", res.Offset, res.SkipPartial)
		res, err = ReadAppended(bytes.NewReader(data), res.Offset, size, res.SkipPartial, maxLine, &s2)
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		atLineStart("append", res.Offset, res.SkipPartial)

		var res3 Result
		s2.ResetTurn()
		if err := Tail(bytes.NewReader(data), size, win, &s2, &res3); err != nil {
			t.Fatalf("tail: %v", err)
		}
		atLineStart("tail", res3.Offset, res3.SkipPartial)
	})
}
