package jsonenc

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var stringSeeds = []string{
	"", "plain", "<script>&amp;</script>", `"\`, "\b\f\n\r\t", "\x00\x01\x1f\x7f",
	"é日本😀", "\u2028 and \u2029", "\xff", "\xe2\x80", "\xed\xa0\x80", "a\xc0\xafb",
}

// TestStringIsMarshal holds String to json.Marshal on the seeds and on
// every single byte and rune boundary around the escapes.
func TestStringIsMarshal(t *testing.T) {
	check := func(s string) {
		t.Helper()
		want, _ := json.Marshal(s)
		if got := String([]byte("x"), s); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("String(%q) = %s, json.Marshal %s", s, got[1:], want)
		}
	}
	for _, s := range stringSeeds {
		check(s)
	}
	for b := range 256 {
		check(string([]byte{byte(b)}))
		check("a" + string([]byte{byte(b)}) + "z")
	}
	for r := rune(0); r < 0x3000; r++ {
		check(string(r))
	}
	check(string(rune(utf8.MaxRune)))
}

// TestStringEveryLane holds String to json.Marshal with each byte value
// (and multi-byte runes) at every position of strings long enough for
// the eight-byte path: in each lane of a word and across word
// boundaries, among plain bytes, so a lane test that takes a plain byte
// for a special one, or misses one, fails.
func TestStringEveryLane(t *testing.T) {
	var specials []string
	for b := range 256 {
		specials = append(specials, string([]byte{byte(b)}))
	}
	specials = append(specials, "é", "日", "😀", "\u2028", "\u2029", "\xe2\x80", "<&>")
	const n = 17
	for _, sp := range specials {
		for at := 0; at <= n; at++ {
			for _, fill := range []byte{'a', ' ', '!', '#', '$', '\'', '=', '?', '~'} {
				s := strings.Repeat(string(fill), at) + sp + strings.Repeat(string(fill), n-at)
				want, _ := json.Marshal(s)
				if got := String(nil, s); !bytes.Equal(got, want) {
					t.Fatalf("String(%q) = %s, json.Marshal %s", s, got, want)
				}
			}
		}
	}
}

func TestTimeIsMarshal(t *testing.T) {
	for _, tm := range []time.Time{
		{},
		time.Date(2026, 11, 27, 1, 2, 3, 456789000, time.UTC),
		time.Date(2026, 11, 27, 1, 2, 3, 0, time.FixedZone("", 5*3600+1800)),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.FixedZone("", -12*3600)),
		time.Now(), // with a monotonic reading
	} {
		want, err := json.Marshal(tm)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Time(nil, tm)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Time(%v) = %s, %v; json.Marshal %s", tm, got, err, want)
		}
	}
	for _, bad := range []time.Time{
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		if _, err := json.Marshal(bad); err == nil {
			t.Fatalf("json.Marshal(%v) did not fail", bad)
		}
		if _, err := Time(nil, bad); err == nil {
			t.Fatalf("Time(%v) did not fail", bad)
		}
	}
}

func FuzzString(f *testing.F) {
	for _, s := range stringSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := String(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("String(%q) = %s, json.Marshal %s", s, got, want)
		}
	})
}

// BenchmarkString: the strings of a realistic record (ids, paths, a
// title, a model name, a status).
//
//	go test -run='^$' -bench=BenchmarkString ./lib/jsonenc/
func BenchmarkString(b *testing.B) {
	strs := []string{
		"3fa2c81b9d0e", "claude", "running", "a1b2c3d4-e5f6-4789-abcd-0123456789ab",
		"/home/ada/src/github.com/acme/widgets/services/billing",
		"/home/ada/.claude/projects/-home-ada-src-github-com-acme-widgets/a1b2c3d4-e5f6-4789-abcd-0123456789ab.jsonl",
		"Refactor the billing service's retry loop so it backs off exponentially & logs each attempt",
		"claude-opus-4-5-20251101", "main", "2.1.328",
	}
	size := 0
	for _, s := range strs {
		size += len(s)
	}
	b.SetBytes(int64(size))
	var dst []byte
	for b.Loop() {
		dst = dst[:0]
		for _, s := range strs {
			dst = String(dst, s)
		}
	}
}
