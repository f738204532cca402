package jsonscan

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

var validCases = []string{
	`{}`, `[]`, ` {"a":1} `, `"x"`, `0`, `-0.5e+10`, `1E5`, `true`, `false`, `null`,
	`{"a":[1,2,{"b":null}],"c":"\u00e9\n\"\\\/"}`, "\"\xff\xfe\"", `[[[[]]]]`,
	`{"a":1,}`, `[1,]`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `nul`, `"\x"`, `"\u12"`,
	"\"a\tb\"", "\"a\x00\"", `{"a":1}}`, `[1 2]`, ``, ` `, `"`, `{"a":"b`, `[`, `{`, `{"a":}`, `{,}`, `[,1]`,
	"\"\\ud800\"", `"\uD834\uDD1E"`, `{"a":1 , "b" : [ 1 , 2 ] }`, "\t[\r\n]\n",
	strings.Repeat("[", 10000) + strings.Repeat("]", 10000),
	strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000),
	strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001),
	`"` + strings.Repeat("abcdefgh", 9) + `"`, `"` + strings.Repeat("abcdefg\\n", 9) + `"`,
}

// TestValidIsJSONValid: Valid accepts exactly what json.Valid accepts.
func TestValidIsJSONValid(t *testing.T) {
	for _, c := range validCases {
		if got, want := Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid says %v", c, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, c := range validCases {
		if len(c) < 200 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := Valid(b), json.Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

var testPruner = &Pruner{Drop: []string{"result", "output"}, Keep: []string{"args"}}

func TestPrune(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{"a":1}`, `{"a":1}`},
		{`{"result":1}`, `{}`},
		{`{ "result" : 1 }`, `{  }`},
		{`{"result":1,"a":2}`, `{"a":2}`},
		{`{"a":2,"result":1}`, `{"a":2}`},
		{`{"a":2, "result":[1,{"x":"y"}] ,"b":3}`, `{"a":2 ,"b":3}`},
		{`{"result":1,"output":2,"a":3,"output":4,"b":5,"result":6}`, `{"a":3,"b":5}`},
		{`{"result":1,"output":2}`, `{}`},
		{`[{"result":1},{"x":{"output":"o","y":[{"result":2}]}}]`, `[{},{"x":{"y":[{}]}}]`},
		{`{"args":{"result":1},"ARGS":{"output":2},"x":{"args":{"output":3}}}`, `{"args":{"result":1},"ARGS":{"output":2},"x":{"args":{"output":3}}}`},
		{`{"res\u0075lt":{"output":1},"Result":2}`, `{"res\u0075lt":{"output":1},"Result":2}`},
		{"{\"r\xc3\xa9\":{\"output\":1}}", "{\"r\xc3\xa9\":{\"output\":1}}"},
		{`"result"`, `"result"`},
		{`{"a":"result","b":["output"]}`, `{"a":"result","b":["output"]}`},
	} {
		got, ok := testPruner.Prune(nil, []byte(c.in))
		if !ok || string(got) != c.want {
			t.Errorf("Prune(%s) = %s, %v; want %s", c.in, got, ok, c.want)
		}
	}
	for _, bad := range []string{`{"result":1,}`, `{"result":}`, `{"result":1 "a":2}`, `{"result":"\x"}`, `{"a":1,"result":[}`, `[1,]`, `{"result":1}x`} {
		if got, ok := testPruner.Prune(nil, []byte(bad)); ok || got != nil {
			t.Errorf("Prune(%s) = %s, %v; want not ok", bad, got, ok)
		}
	}
	// Nothing dropped: the text itself, not a copy.
	in := []byte(`{"a":{"b":[1,2]}}`)
	if got, _ := testPruner.Prune(make([]byte, 0, 64), in); &got[0] != &in[0] {
		t.Error("a text with nothing to drop was copied")
	}
}

// FuzzPrune: Prune accepts what json.Valid accepts, and its text decodes
// as the input does once the dropped keys are taken out of both (except
// inside kept values): it drops those members and no other byte.
func FuzzPrune(f *testing.F) {
	for _, c := range validCases {
		if len(c) < 200 {
			f.Add([]byte(c))
		}
	}
	f.Add([]byte(`{"a":2, "result":[1,{"x":"y"}] ,"b":3,"args":{"output":1},"c":[{"output":{"result":1}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		out, ok := testPruner.Prune(nil, b)
		if ok != json.Valid(b) {
			t.Fatalf("Prune(%q) ok = %v, json.Valid says %v", b, ok, !ok)
		}
		if !ok {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Prune(%q) = %q: not JSON", b, out)
		}
		if len(out) > len(b) {
			t.Fatalf("Prune(%q) = %q: longer", b, out)
		}
		var in, pruned any
		decode(t, b, &in)
		decode(t, out, &pruned)
		if in, pruned := strip(in), strip(pruned); !reflect.DeepEqual(in, pruned) {
			t.Fatalf("Prune(%q) = %q: decodes to %v, the input to %v", b, out, pruned, in)
		}
	})
}

func decode(t *testing.T, b []byte, v any) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
}

// strip takes the dropped keys out of a decoded value, except inside the
// values of keys Prune keeps whole.
func strip(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			switch {
			case !isASCII(k) || strings.EqualFold(k, "args"):
			case k == "result" || k == "output":
				delete(v, k)
			default:
				v[k] = strip(x)
			}
		}
	case []any:
		for i := range v {
			v[i] = strip(v[i])
		}
	}
	return v
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func BenchmarkPrune(b *testing.B) {
	line := []byte(`{"id":"m1","type":"gemini","toolCalls":[{"id":"c1","name":"run_shell_command","args":{"command":"go test ./..."},"result":[{"functionResponse":{"id":"c1","response":{"output":` +
		string(mustJSON(strings.Repeat("ok  \tgithub.com/x/y\t0.01s\n\"quoted\"\tand some more test output here\n", 200))) + `}}}],"status":"success","resultDisplay":"ok"}]}`)
	b.SetBytes(int64(len(line)))
	b.Run("Prune", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = testPruner.Prune(buf, line)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			json.Valid(line)
		}
	})
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// BenchmarkString: a tool's output as agents log it, a line of test
// output (an escape every ~35 bytes), and prose without escapes.
func BenchmarkString(b *testing.B) {
	for _, tc := range []struct{ name, text string }{
		{"output", strings.Repeat("=== RUN   TestDecode/case_12\n--- PASS: TestDecode/case_12 (0.01s)\n    decode_test.go:80: got \"1f\", want \"2e\"\n", 100)},
		{"prose", strings.Repeat("The quick brown fox jumps over the lazy dog, and then some more words follow. ", 100)},
	} {
		s := mustJSON(tc.text)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if _, _, ok := String(s, 0); !ok {
					b.Fatal("not a string")
				}
			}
		})
	}
}
