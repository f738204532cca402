package pi

import (
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/proc"
)

func piProcess(pid int, cwd string, argv ...string) *proc.Process {
	if len(argv) == 0 {
		// Pi 0.73.1 sets process.title: its cmdline is "pi" and the NULs
		// of the argv it overwrote.
		argv = []string{"pi", "", "", ""}
	}
	return &proc.Process{Identity: proc.Identity{BootID: "b", PID: pid, StartTicks: uint64(pid)}, PPID: 1, UID: uidOf(), Cwd: cwd, Argv: argv}
}

func snapOf(ps ...*proc.Process) *proc.Snapshot {
	s := &proc.Snapshot{BootID: "b", Procs: map[int]*proc.Process{}}
	for _, p := range ps {
		s.Procs[p.Identity.PID] = p
	}
	return s
}

// Nothing in Pi's data names its process: the pi processes working in a
// session's directory that started before its last write are its
// candidates, all of them; one that holds the file open or names it with
// --session owns it exactly, and is no candidate of the others.
func TestOwners(t *testing.T) {
	root := t.TempDir()
	cwd := "/home/u/proj"
	p1 := writeSession(t, root, cwd, id1, user(1, "a"), say(2, "b", "stop"))
	writeSession(t, root, cwd, id2, user(1, "a"), callBash(2, "c", "x"))
	writeSession(t, root, "/elsewhere", id3, user(1, "a"))
	now := time.Now()
	host := &fakeHost{open: map[int][]string{}, start: map[int]time.Time{
		101: now.Add(-time.Hour), 102: now.Add(-time.Hour), 103: now.Add(time.Hour), 104: now.Add(-time.Hour), 105: now.Add(-time.Hour)}}
	a := New(Config{Roots: []string{root}, Host: host})
	snap := snapOf(
		piProcess(101, cwd),
		piProcess(102, cwd),
		piProcess(103, cwd), // started after every write
		&proc.Process{Identity: proc.Identity{BootID: "b", PID: 104, StartTicks: 104}, UID: uidOf(), Cwd: cwd, Argv: []string{"vim", "pi"}},
		piProcess(105, "/elsewhere", "node", "/x/node_modules/.bin/pi", "--no-session"),
	)
	// A copy of 101 between the fork and the exec of a tool: no pi.
	fork := piProcess(108, cwd)
	fork.PPID = 101
	snap.Procs[108] = fork
	host.start[108] = now.Add(-time.Hour)
	obs, _ := discover(t, a, snap)
	pids := func(id string) (out []int, inferred bool) {
		for _, o := range obs[id].Owners {
			out = append(out, o.Identity.PID)
			inferred = o.Inferred
		}
		return out, inferred
	}
	if got, inf := pids(id1); len(got) != 2 || got[0]+got[1] != 203 || !inf {
		t.Errorf("%s owners %v inferred %v, want 101 and 102 inferred", id1, got, inf)
	}
	if got, _ := pids(id3); len(got) != 0 {
		t.Errorf("%s owners %v, want none (105 writes no session)", id3, got)
	}

	// 101 holds id1's file open: it owns it exactly, and is no candidate
	// of id2.
	host.open[101] = []string{p1}
	obs, _ = discover(t, a, snap)
	if o := obs[id1].Owners; len(o) != 1 || o[0].Identity.PID != 101 || o[0].Inferred || !strings.Contains(o[0].Evidence, "open") {
		t.Errorf("%s owners %+v, want 101 exactly", id1, o)
	}
	if got, _ := pids(id2); len(got) != 1 || got[0] != 102 {
		t.Errorf("%s owners %v, want 102", id2, got)
	}

	// --session with the id's start, or the file's path.
	delete(host.open, 101)
	snap.Procs[106] = piProcess(106, "/tmp", "node", "/x/pi-coding-agent/dist/cli.js", "--session", id3)
	snap.Procs[107] = piProcess(107, "/tmp", "pi", "--model", "m1", "--session="+p1)
	host.start[106], host.start[107] = now, now
	obs, _ = discover(t, a, snap)
	if o := obs[id3].Owners; len(o) != 1 || o[0].Identity.PID != 106 || o[0].Inferred {
		t.Errorf("%s owners %+v, want 106 by --session", id3, o)
	}
	if o := obs[id1].Owners; len(o) != 1 || o[0].Identity.PID != 107 || o[0].Inferred {
		t.Errorf("%s owners %+v, want 107 by --session", id1, o)
	}
	// A prefix of several ids: Pi takes one of them, sessiond cannot
	// tell which, so it is a candidate of each.
	snap.Procs[106] = piProcess(106, "/tmp", "node", "/x/pi-coding-agent/dist/cli.js", "--session", "019ac0de")
	obs, _ = discover(t, a, snap)
	if o := obs[id3].Owners; len(o) != 1 || o[0].Identity.PID != 106 || !o[0].Inferred {
		t.Errorf("%s owners %+v, want 106 inferred", id3, o)
	}
}

func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		argv []string
		ok   bool
	}{
		{[]string{"pi", "", ""}, true},
		{[]string{"/usr/bin/node", "/h/.cache/x/node_modules/.bin/pi", "-p", "hi"}, true},
		{[]string{"node", "/h/lib/node_modules/@mariozechner/pi-coding-agent/dist/cli.js"}, true},
		{[]string{"node", "/h/other/dist/cli.js"}, false},
		{[]string{"vim", "pi"}, false},
		{[]string{"python3", "pi"}, false},
		{nil, false},
	} {
		if _, ok := commandLine(c.argv); ok != c.ok {
			t.Errorf("commandLine(%q) = %v", c.argv, ok)
		}
	}
	a := parseArgs([]string{"--model", "--session", "-c", "--session-dir=/d", "--no-session", "--", "--session", "x"})
	if a.Session != "" || !a.Continue || a.SessionDir != "/d" || !a.NoSession {
		t.Errorf("parseArgs: %+v", a)
	}
}
