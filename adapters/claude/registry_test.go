package claude

import (
	"errors"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters/claude/transcript"
)

// The entry shown in docs/agents/claude.md, as 2.1.328 writes it.
const factSheetEntry = `{"pid":6925,"sessionId":"3ab8568e-0000-4000-8000-000000000001","cwd":"/home/u/proj","startedAt":1795346466101,
 "procStart":"99240","version":"2.1.328","kind":"interactive","entrypoint":"sdk-cli",
 "pidDomain":"linux:0f3c1e9a-1111-2222-3333-444455556666:pid:[4026531836]","messagingSocketPath":"/tmp/cc-socks/6925.sock",
 "name":"proj-48","status":"busy","updatedAt":1795346466061,"statusUpdatedAt":1795346466061}`

func TestParseRegistry(t *testing.T) {
	e, err := parseRegistry([]byte(factSheetEntry))
	if err != nil {
		t.Fatal(err)
	}
	if e.PID != 6925 || e.SessionID != "3ab8568e-0000-4000-8000-000000000001" || e.Cwd != "/home/u/proj" ||
		e.ProcStart != "99240" || e.Status != "busy" || e.Version != "2.1.328" || e.Name != "proj-48" {
		t.Fatalf("entry = %+v", e)
	}
	if m, ns, ok := splitDomain(e.PIDDomain); !ok || m != "0f3c1e9a-1111-2222-3333-444455556666" || ns != "pid:[4026531836]" {
		t.Fatalf("pidDomain %q read as machine %q namespace %q (%v)", e.PIDDomain, m, ns, ok)
	}
	if !e.StartedAt.Equal(time.UnixMilli(1795346466101)) || !e.StatusUpdatedAt.Equal(time.UnixMilli(1795346466061)) {
		t.Fatalf("times %v %v", e.StartedAt, e.StatusUpdatedAt)
	}

	// Other hosts and versions: numbers as strings, no status, waitingFor
	// as an object, unknown fields.
	e, err = parseRegistry([]byte(`{"pid":"42","procStart":99240,"status":"Waiting","waitingFor":{"tool":"Bash"},"extra":[1]}`))
	if err != nil || e.PID != 42 || e.ProcStart != "99240" || e.Status != "waiting" || e.WaitingFor != `{"tool":"Bash"}` {
		t.Fatalf("flexible entry = %+v, %v", e, err)
	}
	for _, bad := range []string{``, `null`, `[]`, `{"pid":0}`, `{"pid":-1}`, `{"sessionId":"x"}`, `{"pid":"abc"}`, `{"pid":1e99}`, `{"pid":6925,`} {
		if _, err := parseRegistry([]byte(bad)); !errors.Is(err, errBadRegistry) {
			t.Errorf("%q: err %v", bad, err)
		}
	}
}

func TestProcStartMatches(t *testing.T) {
	if !procStartMatches("99240", 99240) || procStartMatches("99240", 99241) || procStartMatches("", 0) || procStartMatches("099240", 99240) {
		t.Fatal("linux procStart must compare verbatim")
	}
	// macOS: lstart text, local time, to the second.
	start := time.Date(2026, 5, 1, 9, 3, 7, 250_000_000, time.Local)
	lstart := start.Format("Mon Jan _2 15:04:05 2006")
	if !procStartMatches(lstart, uint64(start.UnixMicro())) {
		t.Fatalf("lstart %q does not match", lstart)
	}
	if procStartMatches(lstart, uint64(start.Add(2*time.Second).UnixMicro())) {
		t.Fatal("lstart matched another second")
	}
	if v, ok := procStartTicks(lstart); !ok || v != uint64(start.Truncate(time.Second).UnixMicro()) {
		t.Fatalf("procStartTicks(%q) = %d %v", lstart, v, ok)
	}
	if _, ok := procStartTicks("garbage"); ok {
		t.Fatal("garbage procStart read")
	}
}

func TestRegistryNames(t *testing.T) {
	for name, want := range map[string]bool{"6925.json": true, "1.json": true, "6925.ab12cd34.key": false, "6925.json.tmp": false, "x.json": false, ".json": false} {
		if isRegistryName(name) != want {
			t.Errorf("isRegistryName(%q) != %v", name, want)
		}
	}
	for name, want := range map[string]bool{"3ab8568e-0000-4000-8000-000000000001.jsonl": true, "agent-1234.jsonl": false, "3ab8568e-0000-4000-8000-000000000001.json": false} {
		if transcript.IsName(name) != want {
			t.Errorf("IsName(%q) != %v", name, want)
		}
	}
}
