package proc

import "testing"

// ForkedNotExeced keeps an agent's tool, between its fork and its exec,
// from being taken for a second agent (which would keep a killed
// session's owner alive for as long as the tool runs). Its users'
// tests (Claude's, OpenCode's) hold it only through their own scans;
// this holds the rule itself, case by case.
func TestForkedNotExeced(t *testing.T) {
	agent := []string{"/opt/agent/bin/agent", "--session-id", "s-1", "-p", "x"}
	row := func(pid, ppid int, state byte, argv []string) *Process {
		return &Process{Identity: Identity{BootID: "b", PID: pid, StartTicks: uint64(pid)}, PPID: ppid, State: state, Argv: argv}
	}
	for _, tc := range []struct {
		name   string
		parent *Process // nil: no parent in the snapshot
		child  []string
		want   bool
	}{
		{name: "a child with its live parent's argv", parent: row(500, 1, 'S', agent), child: agent, want: true},
		{name: "a child of a running parent", parent: row(500, 1, 'R', agent), child: agent, want: true},
		{name: "a child of a parent in disk sleep", parent: row(500, 1, 'D', agent), child: agent, want: true},
		// A parent that has exited is no live parent to copy, whatever
		// argv the snapshot holds for it.
		{name: "the parent is a zombie", parent: row(500, 1, 'Z', agent), child: agent},
		{name: "the parent is dead", parent: row(500, 1, 'X', agent), child: agent},
		{name: "the parent is not in the snapshot", child: agent},
		// Kernel threads and processes whose argv cannot be read have
		// none: two empty argvs are not a copy.
		{name: "both argvs empty", parent: row(500, 1, 'S', nil), child: nil},
		{name: "the child's argv empty", parent: row(500, 1, 'S', agent), child: []string{}},
		{name: "exec'd: a different argv", parent: row(500, 1, 'S', agent), child: []string{"/bin/bash", "-c", "make test"}},
		{name: "another session of the same agent", parent: row(500, 1, 'S', agent), child: []string{"/opt/agent/bin/agent", "--session-id", "s-2", "-p", "x"}},
		{name: "the parent's argv a prefix of the child's", parent: row(500, 1, 'S', agent[:3]), child: agent},
		{name: "the child's argv a prefix of the parent's", parent: row(500, 1, 'S', agent), child: agent[:3]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snap := &Snapshot{BootID: "b", Procs: map[int]*Process{}}
			if tc.parent != nil {
				snap.Procs[tc.parent.Identity.PID] = tc.parent
			}
			child := row(501, 500, 'R', tc.child)
			snap.Procs[501] = child
			if got := snap.ForkedNotExeced(child); got != tc.want {
				t.Fatalf("ForkedNotExeced = %v, want %v", got, tc.want)
			}
		})
	}
}
