package inputlog

import (
	"errors"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sessiond/sessiond/adapters"
)

func TestReportLogsChangesOnly(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	l := New(zap.New(core), "Codex data")
	bad := []adapters.InputError{{Input: "/a", Err: errors.New("permission denied")}}
	l.Report(bad)
	l.Report(bad)
	l.Report([]adapters.InputError{{Input: "/a", Err: errors.New("is a directory")}})
	l.Report(nil)
	var got []string
	for _, e := range logs.All() {
		got = append(got, e.Message+" "+e.ContextMap()["input"].(string))
	}
	want := []string{"cannot read Codex data /a", "cannot read Codex data /a", "Codex data readable again /a"}
	if len(got) != len(want) {
		t.Fatalf("logged %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, got[i], want[i])
		}
	}
}
