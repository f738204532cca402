package qwen

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readAll is the whole read: every line of b from its start.
func readAll(t testing.TB, b []byte, maxLine int) (state, int64) {
	t.Helper()
	var s state
	end, err := readFrom(bytes.NewReader(b), 0, int64(len(b)), maxLine, &s)
	if err != nil {
		t.Fatal(err)
	}
	return s, end
}

// readInSteps reads b as it would be while it is appended: the file is
// cut at each of cuts in turn (each a prefix written so far), and each
// read continues where the last one ended.
func readInSteps(t testing.TB, b []byte, cuts []int, maxLine int) (state, int64) {
	t.Helper()
	var s state
	var off int64
	for _, c := range append(cuts, len(b)) {
		end, err := readFrom(bytes.NewReader(b[:c]), off, int64(c), maxLine, &s)
		if err != nil {
			t.Fatal(err)
		}
		off = end
	}
	return s, off
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestChatFixtures(t *testing.T) {
	for _, c := range []struct {
		file    string
		phase   phase
		pending int
		title   string
	}{
		{"headless-done.jsonl", phaseIdle, 0, "Say hello"},
		{"headless-killed-mid-tool.jsonl", phaseCalls, 1, "Run the long job"},
		{"tui-cancelled-then-killed.jsonl", phaseCalls, 1, "Run the long job"},
	} {
		t.Run(c.file, func(t *testing.T) {
			b := fixture(t, c.file)
			s, end := readAll(t, b, defaultMaxLine)
			if end != int64(len(b)) {
				t.Errorf("read to %d of %d", end, len(b))
			}
			if s.turn.Phase != c.phase || len(s.turn.Pending) != c.pending || s.meta.Title != c.title {
				t.Errorf("phase %d, pending %+v, title %q; want %d, %d, %q", s.turn.Phase, s.turn.Pending, s.meta.Title, c.phase, c.pending, c.title)
			}
			if s.bad != 0 || s.long != 0 || s.meta.Version != "0.24.4" || !strings.HasPrefix(s.meta.Cwd, "/tmp/") || s.meta.ID == "" {
				t.Errorf("state %+v", s)
			}
			if c.pending > 0 && s.turn.Pending[0].Name != "run_shell_command" {
				t.Errorf("pending %+v", s.turn.Pending)
			}
		})
	}
}

// The TUI's cancels, step by step: a tool result with status cancelled
// ends the turn (idle); a prompt cancelled before any answer leaves
// nothing after it (busy, as far as the chat says); a new prompt starts a
// turn.
func TestChatTurnSteps(t *testing.T) {
	b := fixture(t, "tui-cancelled-then-killed.jsonl")
	lines := bytes.SplitAfter(b, []byte("\n"))
	want := []phase{phasePrompt, phasePrompt, phasePrompt, phasePrompt, phaseCalls, phaseCalls, phaseIdle,
		phasePrompt, phasePrompt, phasePrompt, phasePrompt, phasePrompt, phasePrompt, phasePrompt, phaseCalls}
	var s state
	for i, l := range lines {
		if len(l) == 0 {
			continue
		}
		s.apply(l)
		if i < len(want) && s.turn.Phase != want[i] {
			t.Errorf("after line %d: phase %d, want %d", i+1, s.turn.Phase, want[i])
		}
	}
	if !s.turn.busy() || s.turn.Cancelled {
		t.Errorf("end state %+v", s.turn)
	}
}

func TestChatResultsThenIdle(t *testing.T) {
	var s state
	for _, l := range []string{
		`{"uuid":"1","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","type":"user","message":{"role":"user","parts":[{"text":"go"}]}}`,
		`{"uuid":"2","sessionId":"s","timestamp":"2026-01-01T00:00:01Z","type":"assistant","message":{"role":"model","parts":[{"functionCall":{"id":"a","name":"read_file","args":{}}},{"functionCall":{"id":"b","name":"run_shell_command","args":{"command":"ls"}}}]}}`,
		`{"uuid":"3","sessionId":"s","timestamp":"2026-01-01T00:00:02Z","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"a","name":"read_file","response":{}}}]},"toolCallResult":{"callId":"a","status":"success"}}`,
	} {
		s.apply([]byte(l))
	}
	if s.turn.Phase != phaseCalls || len(s.turn.Pending) != 1 || s.turn.Pending[0].ID != "b" {
		t.Fatalf("after one of two results: %+v", s.turn)
	}
	s.apply([]byte(`{"uuid":"4","sessionId":"s","timestamp":"2026-01-01T00:00:03Z","type":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"b","name":"run_shell_command","response":{}}}]}}`))
	if s.turn.Phase != phaseResults || !s.turn.busy() {
		t.Fatalf("after both results: %+v", s.turn)
	}
	s.apply([]byte(`{"uuid":"5","sessionId":"s","timestamp":"2026-01-01T00:00:04Z","type":"system","subtype":"ui_telemetry"}`))
	if s.turn.Phase != phaseResults {
		t.Fatalf("a system record changed the phase: %+v", s.turn)
	}
	s.apply([]byte(`{"uuid":"6","sessionId":"s","timestamp":"2026-01-01T00:00:05Z","type":"assistant","message":{"role":"model","parts":[{"text":"done"}]}}`))
	if s.turn.Phase != phaseIdle || s.turn.busy() || s.turn.Last.Second() != 5 {
		t.Fatalf("after the answer: %+v", s.turn)
	}
}

// Bad lines are counted and skipped; a whole record glued after a torn
// one (a writer killed mid-write, a resumed one appending) is still read;
// a line past the bound is skipped and counted, whatever its length, and
// the lines after it are read.
func TestChatBadInput(t *testing.T) {
	good := fixture(t, "headless-done.jsonl")
	lines := bytes.SplitAfter(good, []byte("\n"))
	var b bytes.Buffer
	b.Write(lines[0])
	b.WriteString("not json at all\n")
	b.WriteString(`{"uuid":"torn","sessionId":"x","times`) // torn, then glued:
	b.Write(lines[1])
	b.WriteString(strings.Repeat("x", 5000) + "\n") // long
	for _, l := range lines[2:] {
		b.Write(l)
	}
	s, end := readAll(t, b.Bytes(), 4096)
	if end != int64(b.Len()) {
		t.Errorf("read to %d of %d", end, b.Len())
	}
	if s.bad != 2 || s.recovered != 1 || s.long != 1 {
		t.Errorf("bad %d recovered %d long %d, want 2 1 1", s.bad, s.recovered, s.long)
	}
	clean, _ := readAll(t, good, 4096)
	if s.turn.Phase != clean.turn.Phase || s.meta != clean.meta || !s.turn.Last.Equal(clean.turn.Last) {
		t.Errorf("with bad lines %+v %+v, clean %+v %+v", s.meta, s.turn, clean.meta, clean.turn)
	}
}

// An unfinished last line is not read until it ends.
func TestChatUnfinishedLine(t *testing.T) {
	b := fixture(t, "headless-done.jsonl")
	cut := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1 + 40
	s, end := readAll(t, b[:cut], defaultMaxLine)
	if end != int64(bytes.LastIndexByte(b[:cut], '\n')+1) || s.bad != 0 {
		t.Fatalf("end %d bad %d", end, s.bad)
	}
	if s.turn.Phase == phaseIdle {
		t.Fatalf("the unfinished last record was taken: %+v", s.turn)
	}
}

// The incremental read (appended bytes only, from where the last read
// ended, at any cut points, lines torn across reads) concludes exactly as
// one read of the whole file, for the real fixtures and random mixes of
// their lines with bad and long ones.
func TestIncrementalReadEqualsWholeRead(t *testing.T) {
	var all [][]byte
	for _, f := range []string{"headless-done.jsonl", "headless-killed-mid-tool.jsonl", "tui-cancelled-then-killed.jsonl"} {
		all = append(all, bytes.SplitAfter(fixture(t, f), []byte("\n"))...)
	}
	all = append(all, []byte("garbage\n"), []byte(strings.Repeat("y", 3000)+"\n"), []byte("\n"), []byte("{}\n"))
	// Drift: a record type, a status 0.24.4 does not write, a field of
	// another type.
	all = append(all, []byte(`{"uuid":"d1","sessionId":"s","timestamp":"2026-11-27T10:00:00Z","type":"checkpoint","version":"0.25.0"}`+"\n"),
		[]byte(`{"uuid":"d2","sessionId":"s","timestamp":"2026-11-27T10:00:01Z","type":"tool_result","toolCallResult":{"callId":"c","status":"deferred"}}`+"\n"),
		[]byte(`{"uuid":"d3","sessionId":"s","timestamp":1795000000,"type":"user","message":{"role":"user","parts":[{"text":"q"}]}}`+"\n"))
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 300; i++ {
		var b bytes.Buffer
		for n := rng.Intn(40); n > 0; n-- {
			b.Write(all[rng.Intn(len(all))])
		}
		if rng.Intn(3) == 0 {
			b.WriteString(`{"uuid":"partial`) // unfinished last line
		}
		data := b.Bytes()
		var cuts []int
		for c := 0; c < len(data); c += 1 + rng.Intn(400) {
			cuts = append(cuts, c)
		}
		maxLine := 2048 + rng.Intn(4096)
		whole, wend := readAll(t, data, maxLine)
		inc, iend := readInSteps(t, data, cuts, maxLine)
		if wend != iend || !reflect.DeepEqual(normalize(whole), normalize(inc)) {
			t.Fatalf("case %d: whole read (end %d) %+v\nincremental (end %d) %+v", i, wend, whole, iend, inc)
		}
	}
}

// normalize makes an empty and a nil pending list equal.
func normalize(s state) state {
	if len(s.turn.Pending) == 0 {
		s.turn.Pending = nil
	}
	return s
}

func FuzzReadChat(f *testing.F) {
	for _, name := range []string{"headless-done.jsonl", "headless-killed-mid-tool.jsonl", "tui-cancelled-then-killed.jsonl"} {
		f.Add(fixture(f, name), uint16(100), uint16(300))
	}
	f.Add([]byte("{\"uuid\":\"a\"\n\n{}\nx"), uint16(1), uint16(2))
	f.Fuzz(func(t *testing.T, data []byte, step, maxLine uint16) {
		ml := int(maxLine)%8192 + 16
		whole, wend := readAll(t, data, ml)
		var cuts []int
		for c := 0; c < len(data); c += int(step)%512 + 1 {
			cuts = append(cuts, c)
		}
		inc, iend := readInSteps(t, data, cuts, ml)
		if wend != iend || !reflect.DeepEqual(normalize(whole), normalize(inc)) {
			t.Fatalf("whole read (end %d) %+v\nincremental (end %d) %+v", wend, whole, iend, inc)
		}
		if wend > int64(len(data)) || (wend > 0 && data[wend-1] != '\n') {
			t.Fatalf("end %d is not after a newline", wend)
		}
		f := &fileState{path: "/h/projects/p/chats/x.jsonl", id: "x", read: true, size: int64(len(data)), offset: wend, st: whole}
		got, err := decodeFileState(f.path, encodeFileState(f, ml), ml)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		got.gen, got.mtime = f.gen, f.mtime
		if !reflect.DeepEqual(normalize(got.st), normalize(f.st)) || got.offset != f.offset {
			t.Fatalf("checkpoint round trip:\n%+v\n%+v", got.st, f.st)
		}
	})
}

func FuzzDecodeFileState(f *testing.F) {
	st, _ := readAll(f, fixture(f, "tui-cancelled-then-killed.jsonl"), defaultMaxLine)
	fs := &fileState{path: "/h/projects/p/chats/x.jsonl", id: "x", read: true, size: 100, offset: 90, st: st}
	f.Add(encodeFileState(fs, defaultMaxLine))
	f.Add([]byte{checkpointFormat})
	f.Fuzz(func(t *testing.T, b []byte) {
		decodeFileState("/h/projects/p/chats/x.jsonl", b, defaultMaxLine) // must not panic
	})
}

func TestRegistryEntry(t *testing.T) {
	e, err := parseEntry("1942.json", fixture(t, "registry-tui.json"))
	if err != nil {
		t.Fatal(err)
	}
	if e.PID != 1942 || e.Ticks != 1430323 || e.BootID != "834161fa-1f07-46d6-b0bc-50e1fd7801c6" || e.PIDNs != 4026531836 ||
		e.SessionID != "ff708198-4cf6-4f41-aec0-ef07533e50ee" || e.Cwd != "/tmp/qx/home3/proj" || e.Kind != "tui" || e.StartedAt.IsZero() {
		t.Errorf("entry %+v", e)
	}
	if s := fmt.Sprintf("%+v", e); strings.Contains(s, "0000000000") {
		t.Errorf("the entry keeps the ipcToken: %s", s)
	}
	for name, body := range map[string]string{
		"1942.json": `{"schemaVersion":1,"pid":1943,"sessionId":"a","cwd":"/","name":"n","startedAt":1}`,
		"1.json":    `{"schemaVersion":2,"pid":1,"sessionId":"a"}`,
		"2.json":    `{"schemaVersion":1,"pid":2,"sessionId":"../x"}`,
		"3.json":    `{"schemaVersion":1,"pid":3,"sessionId":"a","procStart":"nocolon"}`,
		"4.json":    `garbage`,
		"x.json":    `{}`,
	} {
		if _, err := parseEntry(name, []byte(body)); err == nil {
			t.Errorf("%s %s: no error", name, body)
		}
	}
}

// FuzzApplyIsWhole: a line applied pruned (apply) moves the state as the
// whole line decoded by encoding/json does (applyWhole), line after
// line, whatever the bytes: the pruner drops nothing the state reads,
// and checks JSON as encoding/json does.
func FuzzApplyIsWhole(f *testing.F) {
	for _, name := range []string{"headless-done.jsonl", "headless-killed-mid-tool.jsonl", "tui-cancelled-then-killed.jsonl", "hooks.jsonl"} {
		f.Add(fixture(f, name))
	}
	f.Add([]byte(`{"uuid":"1","type":"assistant","message":{"parts":[{"functionCall":{"id":"a","name":"x","args":{"response":1,"resultDisplay":[2]}}}]},"response":{"type":"user"}}` + "\n" +
		`{"uuid":"2","type":"tool_result","message":{"parts":[{"functionResponse":{"id":"a","response":{"output":1e999}}}]},"toolCallResult":{"callId":"a","status":"success","resultDisplay":{"output":"o"},"Response":1,"resp\u006fnse":2}}` + "\n" +
		`{"uuid":"3","type":"system","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"type":"user"}},"Type":"system"}` + "\n" +
		`{"uuid":"4","type":"tool_result","message":{"parts":[{"functionResponse":{"id":"b","response":{"output":"torn` + "\n" +
		`{"uuid":"5","ARGS":1,"type":"user","message":{"parts":[{"text":"hi"}]}}{"uuid":"6","type":"assistant","response":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var pruned, whole state
		for _, line := range bytes.Split(b, []byte("\n")) {
			pruned.apply(line)
			whole.applyWhole(line)
			if !reflect.DeepEqual(normalize(pruned), normalize(whole)) {
				t.Fatalf("after %q:\npruned %+v\n whole %+v", line, pruned, whole)
			}
		}
	})
}
