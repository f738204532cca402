package claude

import (
	"os"
	"testing"

	"github.com/sessiond/sessiond/proc"
)

// A claude starting a tool forks, then execs bash: a snapshot in between
// sees a second claude with the same --session-id. It is not an owner.
func TestForkedChildIsNotAClaude(t *testing.T) {
	argv := []string{"/opt/claude/bin/claude", "--session-id", "11111111-2222-4333-8444-555555555555", "-p", "x"}
	row := func(pid, ppid int, argv []string) *proc.Process {
		return &proc.Process{Identity: proc.Identity{BootID: "b", PID: pid, StartTicks: uint64(pid)}, PPID: ppid, State: 'S', UID: os.Getuid(), Cwd: "/w", Argv: argv}
	}
	snap := &proc.Snapshot{BootID: "b", Procs: map[int]*proc.Process{
		500: row(500, 1, argv),
		501: row(501, 500, argv), // the fork, not exec'd yet
		502: row(502, 1, argv),   // another claude resuming it: a real (second) writer
	}}
	v := newProcView(snap, nil, "/root/.claude", "/root")
	got := map[int]bool{}
	for _, cp := range v.byArgv[argv[2]] {
		got[cp.p.Identity.PID] = true
	}
	if len(got) != 2 || !got[500] || !got[502] {
		t.Fatalf("claude processes naming the session: %v, want 500 and 502", got)
	}
}
