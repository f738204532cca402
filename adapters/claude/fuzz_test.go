package claude

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// FuzzParseRegistry: no input makes the registry parser panic, and an
// accepted entry always names a positive pid.
func FuzzParseRegistry(f *testing.F) {
	f.Add([]byte(factSheetEntry))
	e := claudetest.NewEntry(123, "4567", claudetest.HostDomain(), claudetest.NewSessionID(), "/p", "waiting", time.Unix(1, 0))
	b, _ := json.Marshal(e)
	f.Add(b)
	for _, s := range []string{"", "{}", "null", `{"pid":"1"}`, `{"pid":1,"startedAt":"2026-01-01T00:00:00Z","waitingFor":[1]}`,
		`{"pid":1,"pidDomain":"linux::pid:"}`, `{"pid":9223372036854775807}`, `{"pid":1,"procStart":"Mon Jan  2 15:04:05 2006"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := parseRegistry(b)
		if err != nil {
			return
		}
		if e.PID <= 0 {
			t.Fatalf("accepted pid %d", e.PID)
		}
		_, _, _ = splitDomain(e.PIDDomain)
		_, _ = procStartTicks(e.ProcStart)
		_ = procStartMatches(e.ProcStart, 12345)
	})
}
