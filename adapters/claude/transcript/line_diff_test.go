package transcript

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// diffParse parses b with parseLine and with the encoding/json reference
// (refParseLine) and says how they differ, "" if they agree: the same
// lines, an error in the same cases, wrapping errCorruptLine the same way,
// and for a line that starts as an object (one read record by record) the
// same error text.
func diffParse(b []byte) string {
	got, gerr := parseLine(b)
	want, werr := refParseLine(b)
	if (gerr == nil) != (werr == nil) || errors.Is(gerr, errCorruptLine) != errors.Is(werr, errCorruptLine) {
		return fmt.Sprintf("error %v, reference %v", gerr, werr)
	}
	if t := bytes.TrimSpace(b); gerr != nil && len(t) > 0 && t[0] == '{' && gerr.Error() != werr.Error() {
		return fmt.Sprintf("error %q, reference %q", gerr, werr)
	}
	// The drift notes are the scanner's own (the reference decodes no
	// field it cannot use): an unknown type is any type not in lineTypes,
	// and a field of another type is named only on a record whose
	// message it cost (its kind is the reference's either way).
	for i := range got {
		l := &got[i]
		if l.unknownType != (l.Type != "" && !slices.Contains(lineTypes[:], l.Type)) {
			return fmt.Sprintf("record %d: type %q unknown %v", i, l.Type, l.unknownType)
		}
		l.unknownType, l.BadField = false, ""
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("lines\n  %+v\nreference\n  %+v", got, want)
	}
	return ""
}

// trickyLines are JSON corners where a hand-written scanner could part from
// encoding/json: escapes, folded and duplicate keys, nulls and wrong types
// at every level, numbers, nesting, bad UTF-8, glued records.
var trickyLines = []string{
	`null`, ` null `, `nul`, `nullx`, `true`, `1`, `"s"`, `[]`, `{}`, `{ }`, `{"a":1}`, `{"type":"user"}`,
	`{"type":"user","message":{"role":"user","content":"hi"}}`,
	`{"type":"user","message":{"role":"user","content":"hi"}} `,
	`{"type":"user","message":{"role":"user","content":"hi"}}x`,
	`{"type":"user","message":{"role":"user","content":"hi"}}null`,
	`{"type":"user","message":{"role":"user","content":"hi"}}null{"type":"user","message":{"content":"b"}}`,
	`{"type":"user","message":{"role":"user","content":"hi"}}{"type":"user","message":{"content":"b"}}`,
	`{"type":"user","message":{"role":"user","content":"hi"}} {"type":"assistant"}  {"type":"user","message":{"content":"c"}}`,
	`{"type":"user","message":{"content":"a"}}123{"type":"user","message":{"content":"b"}}`,
	`{"type":"user","mess{"type":"user","message":{"content":"b"}}`,
	`{"TYPE":"user","Message":{"CONTENT":"folded keys"}}`,
	`{"ty\u0070e":"user","message":{"content":"escaped key"}}`,
	`{"typ\u0065":"us\u0065r","message":{"content":"escaped value"}}`,
	"{\"\u017fessionId\":\"long s folds to S\",\"type\":\"user\"}",
	"{\"\u212awd\":\"kelvin sign is no c\",\"type\":\"user\"}",
	"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\",\"\u212a\":1,\"id\":\"t\"}]}}",
	"{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"tool_use\",\"i\u0064\":\"t\",\"n\u212ame\":\"kelvin\"}]}}",
	`{"type":"user","type":"assistant"}`,
	`{"type":"user","type":null}`,
	`{"type":"user","Type":"assistant"}`,
	`{"type":1}`, `{"type":true}`, `{"type":{}}`, `{"type":[]}`, `{"uuid":1,"type":"user"}`,
	`{"isSidechain":"true"}`, `{"isSidechain":1}`, `{"isSidechain":null}`, `{"isSidechain":true,"isSidechain":false}`,
	`{"isMeta":true,"type":"user","message":{"content":"meta"}}`, `{"isCompactSummary":true,"type":"user","message":{"content":"s"}}`,
	`{"type":"user","message":null}`, `{"type":"user","message":"str"}`, `{"type":"user","message":[1]}`, `{"type":"user","message":1}`,
	`{"type":"user","message":{"content":"a"},"message":null}`,
	`{"type":"user","message":"bad","message":{"content":"good"}}`,
	`{"type":"user","message":{"role":1,"content":"a"}}`,
	`{"type":"user","message":{"role":null,"content":"a"}}`,
	`{"type":"user","message":{"stop_reason":1,"content":"a"}}`,
	`{"type":"assistant","message":{"stop_reason":"end_turn"}}`,
	`{"type":"assistant","message":{"stop_reason":"end_turn","stop_reason":null}}`,
	`{"type":"assistant","message":{"stop_reason":""}}`,
	`{"type":"assistant","message":{"stop_reason":[],"content":[{"type":"tool_use","id":"x"}]}}`,
	`{"type":"user","message":{"content":"a","content":[{"type":"text","text":"b"}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"b"}],"content":"a"}}`,
	`{"type":"user","message":{"content":[1],"content":[{"type":"text","text":"b"}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"b"}],"content":null}}`,
	`{"type":"user","message":{"content":[null,{"type":"text","text":"b"},null]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":""},{"type":"text","text":"b"}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"a"},{"type":"text","text":""}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"},{"type":"image"}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"a"},"s"]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":1}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"a","type":null}]}}`,
	`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":""}]}}`,
	`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"b"},{"type":"text","text":"x"}]}}`,
	`{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"text","text":"nested"}]}]}}`,
	`{"type":"user","message":{"content":[{"type":"image","source":{"data":"AAAA"}}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"  <command-name>/clear</command-name>"}]}}`,
	`{"type":"user","message":{"content":"  [Request interrupted by user]  "}}`,
	`{"type":"user","message":{"content":"\u0000\ud83d\ude00 \ud83d x \ude00 \ud83d\u0041 \u00e9"}}`,
	`{"type":"user","message":{"content":"\"\\\/\b\f\n\r\t"}}`,
	"{\"type\":\"user\",\"message\":{\"content\":\"bad utf8 \xff\xfe \xed\xa0\x80 ok\"}}",
	"{\"type\":\"user\",\"message\":{\"content\":\"raw tab \t in string\"}}",
	`{"type":"user","message":{"content":"bad escape \x"}}`,
	`{"type":"user","message":{"content":"short \u12"}}`,
	`{"type":"user","message":{"content":"unterminated}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls -la","description":"List"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"","description":"fallback"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{"command":1,"path":"p"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{"command":"a","command":null,"url":"u"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{"Command":"folded keys do not count here"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{"comm\u0061nd":"escaped key counts"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{ "todos" : [ {"content":"a  b","status":"pending"} ] , "n": 1.5e+3 }}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":null}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":"a string"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":[1, 2 ,3]}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{"a":"` + strings.Repeat("wörd  \\n ", 60) + `"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{"command":"` + strings.Repeat("x\\t", 200) + `"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t1","input":{"command":"a"},"input":{"path":"b"}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"","name":"no id"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a","name":null},{"type":"thinking","thinking":"x"},{"type":"tool_use","id":"b","name":"N"}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"a"},{"type":"tool_use","id":5}]}}`,
	`{"type":"assistant","message":{"content":"text content"}}`,
	`{"type":"assistant","timestamp":"2026-05-01T12:00:00.123Z","message":{"content":[{"type":"tool_use","id":"a"}]}}`,
	`{"type":"user","timestamp":"2026-05-01T12:00:00+02:00"}`, `{"timestamp":"not a time"}`, `{"timestamp":""}`, `{"timestamp":"2026-02-30T00:00:00Z"}`,
	`{"type":"custom-title","customTitle":"  my\ttitle  ` + strings.Repeat("long ", 30) + `"}`,
	`{"type":"custom-title","customTitle":null}`, `{"type":"custom-title","customTitle":1}`,
	`{"type":"system","content":"x","level":"info"}`,
	`{"n":-0.5e-7,"m":0,"o":-1,"p":1E5,"q":[true,false,null,{}]}`,
	`{"n":01}`, `{"n":-}`, `{"n":1.}`, `{"n":.5}`, `{"n":1e}`, `{"n":+1}`, `{"n":1 2}`,
	`{"a":[1,]}`, `{"a":{"b":1,}}`, `{"a":1,}`, `{,}`, `{"a" 1}`, `{"a":}`, `{"a":tru}`, `{"a":[}`, `{"a":{]}`, `{"a":[1}]}`,
	`{"a":"b"` + "\x00" + `}`, "{\"a\":1}\x00", "\xef\xbb\xbf{\"type\":\"user\"}",
	`{"parentUuid"{"type"{"uuid"`, `}{`, `{`, `{"`, `{"a`, `{"a"`, `{"a":`, `{"a":"`, `{"a":"\`,
	"\u00a0{\"type\":\"user\",\"message\":{\"content\":\"nbsp around\"}}\u0085",
	`{"a":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`,
	`{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, maxDepth-1) + `1` + strings.Repeat("}", maxDepth-1) + `}`,
	`{"a":` + strings.Repeat(`{"b":`, maxDepth) + `1` + strings.Repeat("}", maxDepth) + `}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"x","input":` + strings.Repeat("[", maxDepth-4) + strings.Repeat("]", maxDepth-4) + `}]}}`,
	`{"type":"user","message":{"content":[{"type":"text","text":"x","input":` + strings.Repeat("[", maxDepth-3) + strings.Repeat("]", maxDepth-3) + `}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","input":{"x":` + strings.Repeat("[", maxDepth-5) + strings.Repeat("]", maxDepth-5) + `}}]}}`,
	`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","input":{"x":` + strings.Repeat("[", maxDepth-4) + strings.Repeat("]", maxDepth-4) + `}}]}}`,
	`{"a":{}}{"a":{}}{"a":{}}{"a":{}}{"a":{}}{"a":{}}{"a":{}}{"a":{}}{"a":{}}{"a":{}}`,
	`{"a":{}} x {"a":{}} y {"a":{}}`,
}

// corpusLines are realistic lines: a transcript with every 2.1.328 line
// type, the dense benchmark lines, and torn and glued versions of them.
func corpusLines() [][]byte {
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), "/home/u/proj ünï", time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	tr.Turn("list the files", "ls -la", "total 0", "Nothing here.")
	tr.CrashMidTool("run \"it\"\tnow", "go test ./... | tee /tmp/out")
	tr.Summary("old summary").FileHistorySnapshot().System("turn_duration", "3s").CustomTitle("my title").Interrupt()
	tr.APIRequestBlob(300)
	out := append([][]byte(nil), tr.Lines()...)
	for _, d := range claudetest.DenseLines() {
		out = append(out, d.Line)
	}
	n := len(out)
	for i := 0; i < n; i++ {
		l := out[i]
		out = append(out, l[:len(l)/2], l[:len(l)-1], claudetest.Glue(l, out[(i+1)%n], len(l)/3), claudetest.GlueWhole(l, out[(i+1)%n]))
	}
	return out
}

// TestParseLineMatchesReference: the scanner reads every tricky and every
// realistic line exactly as the encoding/json parser did.
func TestParseLineMatchesReference(t *testing.T) {
	for _, s := range trickyLines {
		if d := diffParse([]byte(s)); d != "" {
			t.Errorf("%.200q: %s", s, d)
		}
	}
	for _, l := range corpusLines() {
		if d := diffParse(l); d != "" {
			t.Errorf("%.200q: %s", l, d)
		}
	}
}

// TestShortenCompactMatchesCompact: the summary of an input without the
// named keys is Shorten of json.Compact of it.
func TestShortenCompactMatchesCompact(t *testing.T) {
	for _, in := range []string{`{}`, `null`, `[ 1 , 2 ]`, `{ "a" : "x  y" , "b" : [ true , null ] }`, `"\u00e9 \" \\ "`,
		`{"k":"` + strings.Repeat("é ", 200) + `"}`, `{"k":"a\u0000b\u001fc\ud800d"}`, "{\"k\":\"\xff\xfe\"}"} {
		var s lineScan
		s.b = []byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","input":` + in + `}]}}`)
		got, _ := parseLine(s.b)
		want := refSummarizeInput([]byte(in))
		if len(got) != 1 || len(got[0].ToolUses) != 1 || got[0].ToolUses[0].Input != want {
			t.Errorf("%q: got %+v, want %q", in, got, want)
		}
	}
}

// FuzzParseLineReference: on any input the scanner and the encoding/json
// parser agree (lines, errors).
func FuzzParseLineReference(f *testing.F) {
	for _, s := range trickyLines {
		if len(s) < 4096 {
			f.Add([]byte(s))
		}
	}
	for _, l := range corpusLines() {
		f.Add(l)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if d := diffParse(b); d != "" {
			t.Fatalf("%q: %s", b, d)
		}
	})
}

// TestParseLineReusesRepeatedFields: a field whose bytes repeat the last
// line's reuses its string, and every spelling around that reuse (the same
// text escaped, replaced invalid UTF-8, a changed value) still reads as
// the reference parser reads it, in any order.
func TestParseLineReusesRepeatedFields(t *testing.T) {
	cwds := []string{`/w/a`, `/w/\u0061`, "/w/\xff", `/w/\ufffd`, "/w/\xef\xbf\xbd", `/w/a`, `/w/b`, ``}
	var lines [][]byte
	for _, c := range cwds {
		for _, v := range []string{`2.1.328`, `2.1.3\u0032`} {
			lines = append(lines, []byte(`{"type":"user","sessionId":"s1","cwd":"`+c+`","version":"`+v+`","gitBranch":"main","message":{"role":"user","content":"hi"}}`))
		}
	}
	rng := rand.New(rand.NewPCG(9, 10))
	for round := range 200 {
		for _, i := range rng.Perm(len(lines)) {
			if d := diffParse(lines[i]); d != "" {
				t.Fatalf("round %d, %q: %s", round, lines[i], d)
			}
		}
	}
	var s lineScan
	s.b = lines[0]
	if _, ok := s.record(0); !ok {
		t.Fatal("line 0 did not scan")
	}
	first := s.line().Cwd
	next := lineScan{b: bytes.Clone(lines[0]), last: s.last}
	if _, ok := next.record(0); !ok {
		t.Fatal("line 0 did not scan again")
	}
	if again := next.line().Cwd; again != first || unsafe.StringData(again) != unsafe.StringData(first) {
		t.Errorf("the same cwd on the next line was decoded again: %q, %q", again, first)
	}
}
