package claude

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/proc"
)

// A claude with no CLAUDE_CONFIG_DIR writes to $HOME/.claude: to our
// default root when its HOME is ours (or unknown), to its own home's
// otherwise. A claude of another home (a sandbox, another test's world)
// never makes a session of ours — found by the crash-consistency loop,
// whose sessiond took the real-agent tests' claude processes for its own.
func TestClaudeOfAnotherHomeIsNotOurs(t *testing.T) {
	id := "11111111-2222-4333-8444-555555555555"
	row := func(pid int, env map[string]string) *proc.Process {
		return &proc.Process{Identity: proc.Identity{BootID: "b", PID: pid, StartTicks: uint64(pid)}, PPID: 1, State: 'S', Cwd: "/w", UID: os.Getuid(),
			Argv: []string{"claude", "--session-id", id, "-p", "x"}, Env: env}
	}
	snap := &proc.Snapshot{BootID: "b", Procs: map[int]*proc.Process{
		500: row(500, map[string]string{"HOME": "/home/u/"}),
		501: row(501, map[string]string{"HOME": "/tmp/sandbox"}),
		502: row(502, map[string]string{}),
		503: row(503, nil), // environment unreadable
		504: row(504, map[string]string{"HOME": "/tmp/sandbox", "CLAUDE_CONFIG_DIR": "/home/u/.claude"}),
	}}
	v := newProcView(snap, nil, "/data/claude", "/home/u")
	roots := map[int]string{}
	for _, cp := range v.claude {
		roots[cp.p.Identity.PID] = cp.root
	}
	want := map[int]string{500: "/data/claude", 501: "/tmp/sandbox/.claude", 502: "/data/claude", 503: "", 504: "/home/u/.claude"}
	for pid, r := range want {
		if roots[pid] != r {
			t.Errorf("pid %d: root %q, want %q", pid, roots[pid], r)
		}
	}

	// Through Discover: a claude of another home naming a session id makes
	// no session in our root.
	dir := t.TempDir()
	claudetest.NewRoot(t, filepath.Join(dir, ".claude"))
	a := New(Config{Roots: []string{filepath.Join(dir, ".claude")}, NoLearnedRoots: true, Home: dir})
	snap = &proc.Snapshot{BootID: "b", Procs: map[int]*proc.Process{501: row(501, map[string]string{"HOME": "/tmp/sandbox"})}}
	obs, err := a.Discover(context.Background(), snap)
	if err != nil || obs.Len() != 0 {
		t.Fatalf("a claude of another home: %v, sessions %+v", err, obs.All())
	}
	snap.Procs[501].Env["HOME"] = dir
	obs, err = a.Discover(context.Background(), snap)
	if err != nil || obs.Len() != 1 || obs.All()[0].UpstreamID != id {
		t.Fatalf("a claude of our home: %v, sessions %+v", err, obs.All())
	}
}

// A HOME reached through a symlink is still sessiond's home: that claude
// writes to our root and owns the session its argv names.
func TestClaudeHomeThroughSymlinkIsOurs(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(home, link); err != nil {
		t.Fatal(err)
	}
	snap := &proc.Snapshot{BootID: "b", Procs: map[int]*proc.Process{
		500: {Identity: proc.Identity{BootID: "b", PID: 500, StartTicks: 500}, PPID: 1, State: 'S', Cwd: "/w", UID: os.Getuid(),
			Argv: []string{"claude", "-p", "x"}, Env: map[string]string{"HOME": link}},
	}}
	v := newProcView(snap, nil, filepath.Join(home, ".claude"), home)
	if len(v.claude) != 1 || v.claude[0].root != filepath.Join(home, ".claude") {
		t.Fatalf("a claude whose HOME links to ours: %+v", v.claude)
	}
}

// A claude of another user names a session of ours in its argv (or runs
// in its directory): it is never the owner. Its data lives in its own home;
// and a process whose environment cannot be read would otherwise match
// every root.
func TestClaudeOfAnotherUserIsNotOurs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed")
	}
	r, _ := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, "/", time.Now())
	tr.User("hello")
	r.WriteTranscript(t, tr)
	script := `exec -a "$0" bash -c 'sleep 120; true' "$@"`
	other := start(t, "/", nil, setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
		"bash", "-c", script, "claude", "--session-id", id)
	waitArgv(t, other.pid, "claude")
	o := mustFind(t, discover(t, newTestAdapter(t, &testFS{}, r.Dir), snapshot(t)), id)
	for _, ow := range o.Owners {
		if ow.Identity.PID == other.pid {
			t.Fatalf("another user's claude (pid %d) owns our session: %+v", other.pid, o.Owners)
		}
	}
}
