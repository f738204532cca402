package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// Codex everywhere a user looks, from rollouts the real codex exec wrote
// (internal/testkit/codextest) in the default home ~/.codex: `ls --agent
// codex` and its filters, show, health's adapter line and the metrics.
// The killed one left its writer lock file behind, held by nobody.
func TestCodexInListingsHealthAndMetrics(t *testing.T) {
	e := newEnv(t)
	home := filepath.Join(e.Home, ".codex")
	day := filepath.Join(home, "sessions", "2026", "11", "25")
	const done, killed = "01a2100e-6a76-7f61-8169-3d1e21ad66f1", "01a2100e-73e8-7692-b08b-41c0e0969ddc"
	for id, fx := range map[string]string{done: "done.jsonl", killed: "killed.jsonl"} {
		b := codextest.Fixture(fx)
		if err := os.MkdirAll(day, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(day, "rollout-2026-11-25T00-15-09-"+id+".jsonl"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	locks := filepath.Join(home, "thread-writer-locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(locks, killed+".lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.StartDaemon("--grace", "1s")

	var ls api.SessionList
	testenv.EventuallyOK(t, 10*time.Second, "both Codex sessions listed and settled", func() (bool, string) {
		e.CtlJSON(&ls, "ls", "--all", "--agent", "codex")
		byUp := map[string]api.Session{}
		for _, s := range ls.Sessions {
			byUp[s.UpstreamID] = s
		}
		return len(ls.Sessions) == 2 && byUp[done].Status == session.StatusStopped && byUp[killed].Status == session.StatusInterrupted, sessionsLine(ls)
	})
	var only api.SessionList
	e.CtlJSON(&only, "ls", "--all", "--agent", "codex", "--status", "interrupted")
	if len(only.Sessions) != 1 || only.Sessions[0].UpstreamID != killed || only.Sessions[0].Agent != "codex" {
		t.Errorf("--status interrupted: %s", sessionsLine(only))
	}
	s := e.Show(killed[:13])
	if s.Title != "run it" || s.Cwd != "/tmp/cx/work" || s.Resume == nil || s.Resume.Root != home || s.Problem(session.ProblemOrphanedToolCall) == nil {
		t.Errorf("show %s: %+v", killed, s)
	}
	var claude api.SessionList
	e.CtlJSON(&claude, "ls", "--all", "--agent", "claude")
	if len(claude.Sessions) != 0 {
		t.Errorf("--agent claude lists Codex sessions: %s", sessionsLine(claude))
	}

	var h api.Health
	e.CtlJSON(&h, "health")
	var found bool
	for _, a := range h.Adapters {
		if a.Name == "codex" {
			found = true
			if a.Sessions != 2 || a.LastError != "" || a.LastScan.IsZero() {
				t.Errorf("health's codex adapter: %+v", a)
			}
		}
	}
	if !found {
		t.Errorf("health lists no codex adapter: %+v", h.Adapters)
	}

	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", e.Socket)
	}}}
	resp, err := c.Get("http://sessiond/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`sessiond_sessions{agent="codex",status="interrupted"} 1`, `sessiond_sessions{agent="codex",status="stopped"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func sessionsLine(l api.SessionList) string {
	var out []string
	for _, s := range l.Sessions {
		out = append(out, s.Agent+"/"+s.UpstreamID+"="+string(s.Status))
	}
	return strings.Join(out, " ")
}
