package api

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzReadSSE: no event stream bytes make the SSE reader panic or loop;
// each event it hands on carries data, and ids are trimmed.
func FuzzReadSSE(f *testing.F) {
	for _, s := range []string{
		"id: 1\ndata: {\"seq\":1,\"type\":\"session.created\",\"session_id\":\"5e55a0c1d2e3\",\"to\":\"starting\"}\n\n",
		": heartbeat\n\nid: 2\ndata: a\ndata: b\n\n",
		"id: 3\ndata: {\"seq\":3,\"typ",
		"data:x\n\ndata:y\n\n\n\n",
		"id:\ndata:\n\n",
		"\r\n\r\nid: 9\r\ndata: z\r\n\r\n",
		"\x00\xff\xfe\n\n",
		"data: " + strings.Repeat("x", 70000) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		n := 0
		err := ReadSSE(bytes.NewReader(b), func(id, data string) error {
			n++
			if id != strings.TrimSpace(id) {
				t.Fatalf("id %q not trimmed", id)
			}
			return nil
		})
		if n > bytes.Count(b, []byte("\n"))+1 {
			t.Fatalf("%d events from %d lines", n, bytes.Count(b, []byte("\n")))
		}
		_ = err // a line over the cap is an error, not a crash
	})
}
