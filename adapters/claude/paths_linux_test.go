package claude

import (
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// "shell" (2.1.328): the turn ended and a Bash tool runs in the
// background. The session is idle, waiting for the user, not busy.
func TestRegistryShellStatusIsIdle(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	owner := start(t, cwd, nil, "sleep", "120")
	r.WriteRegistry(t, claudetest.LiveEntry(t, owner.pid, id, cwd, "shell"))
	o := mustFind(t, discover(t, newTestAdapter(t, &testFS{}, r.Dir), snapshot(t)), id)
	if o.Activity != session.ActivityIdle {
		t.Fatalf("activity %q (%s), want idle", o.Activity, o.ActivityEvidence)
	}
	if issue(o.InFlight, session.ProblemStaleBusyMarker, "") != nil {
		t.Fatalf("a shell entry is no busy marker: %+v", o.InFlight)
	}
}

// Claude's daemon respawns a crashed background session as
// `claude --resume <root>/projects/<dir>/<id>.jsonl`: the path names it.
func TestArgvResumeTranscriptPath(t *testing.T) {
	id := claudetest.NewSessionID()
	for _, argv := range [][]string{
		{"/usr/bin/claude", "--resume", "/home/u/.claude/projects/-home-u-proj/" + id + ".jsonl", "--allowedTools", "Bash"},
		{"claude", "--resume=/x/" + id + ".jsonl"},
	} {
		if got, flag := argvSession(argv); got != id || flag != "--resume" {
			t.Errorf("%q: %q %q", argv, got, flag)
		}
	}
	if got, _ := argvSession([]string{"claude", "--resume", "/x/" + id + ".jsonl", "--fork-session"}); got != "" {
		t.Errorf("a fork names a new session, got %q", got)
	}
	if got, _ := argvSession([]string{"claude", "--resume", "/x/not-a-uuid.jsonl"}); got != "" {
		t.Errorf("got %q", got)
	}
}

// An MCP stdio server carries CLAUDE_CODE_SESSION_ID but no CLAUDE_PID,
// runs in claude's process group and survives its kill -9 (2.1.328): it
// is an orphan of its session once no claude lives in the group, and not
// before.
func TestMCPServerOrphanedByProcessGroup(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
	tr.Turn("hello", "true", "", "Hi.")
	r.WriteTranscript(t, tr)
	// A "claude" leading its group, with a child that names only the session.
	leader := start(t, cwd, []string{"CLAUDE_CODE_SESSION_ID=" + id, "CLAUDECODE=1"},
		"bash", "-c", `exec -a claude bash -c 'sleep 120 & wait'`)
	waitArgv(t, leader.pid, "claude")
	var server int
	testenv.Eventually(t, 10*time.Second, "the MCP server child", func() bool {
		for _, p := range snapshot(t).Procs {
			if p.PPID == leader.pid && p.PGID == leader.pid {
				server = p.Identity.PID
				return true
			}
		}
		return false
	})
	a := newTestAdapter(t, &testFS{}, r.Dir)
	o := mustFind(t, discover(t, a, snapshot(t)), id)
	if is := issue(o.Problems, session.ProblemOrphanProcesses, ""); is != nil {
		t.Fatalf("an MCP server of a live claude is no orphan: %+v", is)
	}
	leader.kill()
	var o2 = o
	testenv.Eventually(t, 10*time.Second, "the MCP server attributed as an orphan", func() bool {
		o2 = mustFind(t, discover(t, a, snapshot(t)), id)
		is := issue(o2.Problems, session.ProblemOrphanProcesses, "")
		return is != nil && is.Process != nil && is.Process.PID == server
	})
}
