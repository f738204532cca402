package realagents

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// bgWorker is a worker of Claude's background daemon, as
// <root>/daemon/roster.json lists it.
type bgWorker struct {
	PID            int    `json:"pid"` // the pty host
	SessionID      string `json:"sessionId"`
	Attempt        int    `json:"attempt"`
	ReplPID        int    `json:"replPid"`
	ReplProcStart  string `json:"replProcStart"`
	Cwd            string `json:"cwd"`
	RendezvousSock string `json:"rendezvousSock"`
}

type bgRoster struct {
	SupervisorPID int                 `json:"supervisorPid"`
	Workers       map[string]bgWorker `json:"workers"`
}

func readRoster(root string) (bgRoster, error) {
	var r bgRoster
	b, err := os.ReadFile(filepath.Join(root, "daemon", "roster.json"))
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

var backgroundedRE = regexp.MustCompile(`backgrounded · ([0-9a-f]{8})`)

// Matrix: `claude --bg`. Claude's own daemon runs the
// session in a REPL under a pty host; the REPL (roster replPid, registry
// kind "bg") owns it, not the pty host nor the daemon: running and busy
// with the REPL as owner. kill -9 of the REPL: interrupted with its
// problems. Claude's daemon then respawns it with --resume (same session
// id, a new REPL): running again with the new REPL as owner, the old tool
// an orphan.
func TestClaudeBackgroundSession(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.seedClaudeHome(w.proj())
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"LONG-b6a": longJob("")}))
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	w.watchLiveNeverDead()
	w.step("daemon ready")

	_, out := w.start("claude --bg", w.proj(), bin, "--bg", "Run the long job, marker LONG-b6a")
	w.waitFor(60*time.Second, "claude --bg returned", func() (bool, string) {
		return backgroundedRE.MatchString(out.String()), out.String()
	})
	m := backgroundedRE.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("claude --bg printed no short id:\n%s", out.String())
	}
	short := m[1]
	root := w.claudeRoot()
	var ros bgRoster
	var wk bgWorker
	roster := func() (bool, string) {
		var err error
		ros, err = readRoster(root)
		wk = ros.Workers[short]
		b, _ := json.Marshal(ros.Workers)
		return err == nil && wk.ReplPID > 0, fmt.Sprintf("%v %s", err, b)
	}
	w.waitFor(60*time.Second, "the roster names the REPL of "+short, roster)
	t.Cleanup(func() { removeClaudeDaemonDir(t, wk.RendezvousSock) })
	w.step("backgrounded " + short)

	diag := func() string {
		st, _ := os.ReadFile(filepath.Join(root, "jobs", short, "state.json"))
		return tail(string(st), 1500)
	}
	repl := wk.ReplPID
	py := w.waitClaudeTool(repl, 60*time.Second, diag)
	up := py.Env["CLAUDE_CODE_SESSION_ID"]
	if up != wk.SessionID || wk.Cwd != w.proj() {
		t.Fatalf("the tool says session %s, the roster %+v", up, wk)
	}
	reg, ok := readClaudeReg(root, repl)
	t.Logf("REPL %d %q (pty host %d, daemon %d): registry kind %q entrypoint %q jobId %q",
		repl, cmdline(repl), wk.PID, ros.SupervisorPID, reg.Kind, reg.Entrypoint, reg.JobID)
	if !ok || reg.Kind != "bg" || reg.SessionID != up || reg.JobID != short {
		t.Fatalf("registry entry of the REPL %d: %+v (found %v)", repl, reg, ok)
	}
	if ticks, _ := procStart(repl); fmt.Sprint(ticks) != wk.ReplProcStart {
		t.Errorf("roster replProcStart %s, the REPL's start ticks %d", wk.ReplProcStart, ticks)
	}
	w.step("tool running in the REPL")
	s := w.waitUpstream(up, 15*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, repl, "the bg REPL (roster replPid)")
	w.step("running/busy, owner the REPL")

	s = w.killInterrupted(s, repl, session.ProblemOrphanedToolCall, session.ProblemStaleBusyMarker, session.ProblemOrphanProcesses)
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(py.PID)+" ") {
		t.Errorf("orphan_processes %q does not name the orphaned python3 %d", d, py.PID)
	}

	// Claude's daemon respawns the session: a new pty host and REPL,
	// attempt 2, the same session id.
	w.waitFor(90*time.Second, "Claude's daemon respawned "+short, func() (bool, string) {
		ok, seen := roster()
		return ok && wk.Attempt >= 2 && wk.ReplPID != repl && alive(wk.ReplPID), seen + "\n" + diag()
	})
	repl2 := wk.ReplPID
	t.Logf("respawned: REPL %d %q, attempt %d, session %s", repl2, cmdline(repl2), wk.Attempt, wk.SessionID)
	if wk.SessionID != up {
		t.Fatalf("the respawn runs session %s, not %s", wk.SessionID, up)
	}
	w.step("respawned by Claude's daemon")
	s = w.waitUpstream(up, 15*time.Second, "running again with the new REPL as owner", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.PID == repl2
	})
	w.checkOwner(s, repl2, "the respawned bg REPL")
	t.Logf("revived: %s/%s owner %d (%s), problems %v", s.Status, s.Activity, s.PID, s.OwnerEvidence, problemKinds(s))
	if alive(py.PID) {
		if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(py.PID)+" ") {
			t.Errorf("after the revival, orphan_processes %q does not name the first REPL's python3 %d, still running", d, py.PID)
		}
	}
	w.step("running again, owner the new REPL")
}

// removeClaudeDaemonDir removes the directory Claude's background daemon
// made for this world under /tmp/cc-daemon-<uid>/ (a constant in Claude,
// not under TMPDIR), named by one of its sockets.
func removeClaudeDaemonDir(t *testing.T, sock string) {
	for d := filepath.Dir(sock); d != "/" && d != "."; d = filepath.Dir(d) {
		if strings.HasPrefix(filepath.Base(filepath.Dir(d)), "cc-daemon-") {
			if err := os.RemoveAll(d); err != nil {
				t.Logf("remove %s: %v", d, err)
			}
			return
		}
	}
}
