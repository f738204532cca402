package claudetest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestProjectDirName(t *testing.T) {
	for in, want := range map[string]string{"/home/u/proj": "-home-u-proj", "/tmp/a_b.c d": "-tmp-a-b-c-d", "/x/Ä": "-x---"} {
		if got := projectDirName(in); got != want {
			t.Errorf("projectDirName(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every line is one JSON object; conversation lines start with parentUuid
// and every line carries its type, as Claude Code writes them.
func TestTranscriptShapes(t *testing.T) {
	tr := NewTranscript(NewSessionID(), "/home/u/proj", time.Now())
	tr.Turn("hi", "ls", "out", "done")
	tr.CrashMidTool("again", "sleep 1")
	types := map[string]bool{}
	for _, l := range tr.Lines() {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		typ, _ := m["type"].(string)
		types[typ] = true
		if (typ == "user" || typ == "assistant") && !bytes.HasPrefix(l, []byte(`{"parentUuid":`)) {
			t.Fatalf("conversation line does not start with parentUuid: %.60s", l)
		}
	}
	for _, want := range []string{"queue-operation", "user", "attachment", "atis-latch", "api-request-shape", "api-request", "tools-used", "assistant", "last-prompt", "cost-state"} {
		if !types[want] {
			t.Errorf("no %s line", want)
		}
	}
}

func TestWriteSparse(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p", "x.jsonl")
	WriteSparse(t, p, 10<<20, []byte("head\n"), []byte("tail\n"))
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != 10<<20 {
		t.Fatalf("%v %v", fi, err)
	}
	b, _ := os.ReadFile(p)
	if !bytes.HasPrefix(b, []byte("head\n")) || !bytes.HasSuffix(b, []byte("\ntail\n")) {
		t.Fatal("ends not written")
	}
}
