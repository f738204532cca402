//go:build linux

package opencode

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// fakeOpenCode starts the test binary as an "opencode" process with cwd
// dir holding db open. It returns the process and the pid of its tool
// subprocess (0 without one); both are killed at cleanup.
func fakeOpenCode(t *testing.T, dir, db string, withTool bool, args ...string) (*exec.Cmd, int) {
	t.Helper()
	var env []string
	if withTool {
		env = append(env, helperToolEnv+"=1")
	}
	return startFakeOpenCode(t, dir, db, env, args...)
}

// startFakeOpenCode is fakeOpenCode with env added to the fake's.
func startFakeOpenCode(t *testing.T, dir, db string, env []string, args ...string) (*exec.Cmd, int) {
	t.Helper()
	cmd := &exec.Cmd{Path: os.Args[0], Args: append([]string{"opencode"}, args...), Dir: dir}
	cmd.Env = append(append(os.Environ(), helperDBEnv+"="+db), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	toolPID := 0
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if toolPID > 0 {
			syscall.Kill(toolPID, syscall.SIGKILL)
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		if n, ok := strings.CutPrefix(line, "tool "); ok {
			toolPID, _ = strconv.Atoi(n)
		}
		if line == "ready" {
			return cmd, toolPID
		}
	}
	t.Fatalf("fake opencode did not start: %v", sc.Err())
	return nil, 0
}

// judge applies the tracker's rule (invariant 1, docs/design.md) to what the
// adapter reported plus the owners seen before: running while any
// candidate lives; with every candidate dead, interrupted if work was in
// flight, else stopped.
func judge(t *testing.T, host *proc.Host, seen map[proc.Identity]bool, o adapters.Observed) session.Status {
	t.Helper()
	for _, ow := range o.Owners {
		seen[ow.Identity] = true
	}
	if len(seen) == 0 {
		return session.StatusUnknown
	}
	for id := range seen {
		if host.Probe(id).Liveness == proc.Alive {
			return session.StatusRunning
		}
	}
	if len(o.InFlight) > 0 {
		return session.StatusInterrupted
	}
	return session.StatusStopped
}

func realDiscover(t *testing.T, a *Adapter, host *proc.Host) adapters.Observation {
	t.Helper()
	snap, err := host.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	obs, err := a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func killAndReap(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// A live `opencode run` (a real process holding the test's real database,
// cwd in the session's directory) owns its session: running. After its
// kill -9 the data keeps the in-flight shape: interrupted, with its tool
// subprocess reported as an orphan.
func TestRealProcessRunningThenInterrupted(t *testing.T) {
	dataDir, work := t.TempDir(), t.TempDir()
	dbPath := filepath.Join(dataDir, "opencode.db")
	db := opencodetest.MustCreate(t, dbPath)
	old, _ := db.Finished(work, time.Now().Add(-time.Hour))

	cmd, toolPID := fakeOpenCode(t, work, dbPath, true, "run", "fix the tests")
	sh, err := db.InterruptedMidTool(work, time.Now()) // written by "it", after its start
	if err != nil {
		t.Fatal(err)
	}
	createdNow(t, db, sh.SessionID)
	host := proc.NewHost()
	a := New(Config{DataDir: dataDir})
	seen := map[proc.Identity]bool{}

	obs := realDiscover(t, a, host)
	o := find(t, obs, sh.SessionID)
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != cmd.Process.Pid || !o.Owners[0].Inferred {
		t.Fatalf("owners %+v, want the fake opencode pid %d (inferred)", o.Owners, cmd.Process.Pid)
	}
	if st := judge(t, host, seen, o); st != session.StatusRunning || o.Activity != session.ActivityBusy {
		t.Fatalf("live owner: %s / %s, want running / busy", st, o.Activity)
	}
	if prev := find(t, obs, old.SessionID); len(prev.Owners) != 0 {
		t.Errorf("a session written before the process started got owners %+v", prev.Owners)
	}

	killAndReap(t, cmd)
	obs = realDiscover(t, a, host)
	o = find(t, obs, sh.SessionID)
	if len(o.Owners) != 0 {
		t.Fatalf("dead owner still reported: %+v", o.Owners)
	}
	if st := judge(t, host, seen, o); st != session.StatusInterrupted {
		t.Fatalf("after kill -9: %s, want interrupted", st)
	}
	if got := issueKeys(o.InFlight, session.ProblemOrphanedToolCall); len(got) != 1 || got[0] != sh.ToolPartID {
		t.Errorf("in flight %+v", o.InFlight)
	}
	if got := issueKeys(o.Problems, session.ProblemOrphanProcesses); len(got) != 1 || got[0] != strconv.Itoa(toolPID) {
		t.Errorf("orphans %+v, want the tool pid %d", o.Problems, toolPID)
	}
}

// Two opencode processes in one directory: both are candidates, the
// session runs while either lives, and is interrupted only when both died.
func TestRealProcessesTwoInOneDirectory(t *testing.T) {
	dataDir, work := t.TempDir(), t.TempDir()
	dbPath := filepath.Join(dataDir, "opencode.db")
	db := opencodetest.MustCreate(t, dbPath)
	p1, _ := fakeOpenCode(t, work, dbPath, false)
	p2, _ := fakeOpenCode(t, work, dbPath, false, "run", "hello")
	sh, err := db.InterruptedMidTool(work, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	createdNow(t, db, sh.SessionID)
	host := proc.NewHost()
	a := New(Config{DataDir: dataDir})
	seen := map[proc.Identity]bool{}

	o := find(t, realDiscover(t, a, host), sh.SessionID)
	if len(o.Owners) != 2 {
		t.Fatalf("owners %+v, want two candidates", o.Owners)
	}
	if st := judge(t, host, seen, o); st != session.StatusRunning {
		t.Fatalf("both alive: %s", st)
	}
	killAndReap(t, p1)
	o = find(t, realDiscover(t, a, host), sh.SessionID)
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != p2.Process.Pid {
		t.Fatalf("after the first died: owners %+v", o.Owners)
	}
	if st := judge(t, host, seen, o); st != session.StatusRunning {
		t.Fatalf("one alive: %s, want running", st)
	}
	killAndReap(t, p2)
	o = find(t, realDiscover(t, a, host), sh.SessionID)
	if st := judge(t, host, seen, o); st != session.StatusInterrupted {
		t.Fatalf("both dead: %s, want interrupted", st)
	}
}

// createdNow sets a session's creation to now: a run creates its session
// after it starts (the shapes' default is a minute before their last write).
func createdNow(t *testing.T, db *opencodetest.DB, id string) {
	t.Helper()
	if _, err := db.SQL().Exec("UPDATE session SET time_created = ? WHERE id = ?", time.Now().UnixMilli(), id); err != nil {
		t.Fatal(err)
	}
}

// Two `opencode run <message>` at once in one directory (one database, one
// cwd): each session is owned by the run whose message is its first
// prompt, never by the other, so killing one interrupts only its own.
// (Before, both were candidates of both, and the survivor kept the dead
// one's session running.)
func TestRealRunsInOneDirectoryOwnTheirOwnSessions(t *testing.T) {
	dataDir, work := t.TempDir(), t.TempDir()
	dbPath := filepath.Join(dataDir, "opencode.db")
	db := opencodetest.MustCreate(t, dbPath)
	old, _ := db.Finished(work, time.Now().Add(-time.Hour))
	runs := map[string]*exec.Cmd{}
	shapes := map[string]opencodetest.Shape{}
	for _, msg := range []string{"Run the long job, marker RUN-A", "Run the long job, marker RUN-B"} {
		runs[msg], _ = fakeOpenCode(t, work, dbPath, false, append([]string{"run"}, strings.Fields(msg)...)...)
	}
	for _, msg := range []string{"Run the long job, marker RUN-B", "Run the long job, marker RUN-A"} {
		sh, err := db.InterruptedMidTool(work, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		createdNow(t, db, sh.SessionID)
		if err := db.Part(opencodetest.Part{MessageID: sh.UserMessageID, SessionID: sh.SessionID, Type: "text", Text: msg}); err != nil {
			t.Fatal(err)
		}
		shapes[msg] = sh
	}
	host := proc.NewHost()
	a := New(Config{DataDir: dataDir})
	obs := realDiscover(t, a, host)
	for msg, sh := range shapes {
		o := find(t, obs, sh.SessionID)
		if len(o.Owners) != 1 || o.Owners[0].Identity.PID != runs[msg].Process.Pid || o.Owners[0].Inferred {
			t.Errorf("session of %q: owners %+v, want only pid %d, named by its message", msg, o.Owners, runs[msg].Process.Pid)
		}
	}
	if o := find(t, obs, old.SessionID); len(o.Owners) != 0 {
		t.Errorf("a session from before both runs got owners %+v", o.Owners)
	}
}

// A restart that continues from saved state never makes a live owner
// dead nor a dead one running. While sessiond is down an opencode starts
// in an old session's directory and resumes it (a new turn, in flight):
// the restored adapter must see that write, or the process would look
// started after the session's last write and be no candidate. Then, down
// again, the process is killed: the next restart finds no owner and the
// turn still in flight.
func TestRealProcessAcrossRestarts(t *testing.T) {
	dataDir, work := t.TempDir(), t.TempDir()
	dbPath := filepath.Join(dataDir, "opencode.db")
	db := opencodetest.MustCreate(t, dbPath)
	old, _ := db.Finished(work, time.Now().Add(-time.Hour))
	host := proc.NewHost()
	s := store{}
	first := New(Config{DataDir: dataDir})
	if o := find(t, realDiscover(t, first, host), old.SessionID); len(o.Owners) != 0 || len(o.InFlight) != 0 {
		t.Fatalf("old session: %+v", o)
	}
	s.save(first)

	// sessiond is down.
	cmd, _ := fakeOpenCode(t, work, dbPath, false)
	time.Sleep(10 * time.Millisecond)
	now := time.Now()
	um := opencodetest.Message{ID: opencodetest.NewID("msg"), SessionID: old.SessionID, Role: "user", Created: now}
	am := opencodetest.Message{ID: opencodetest.NewID("msg"), SessionID: old.SessionID, Cwd: work, Created: now}
	for _, m := range []opencodetest.Message{um, am} {
		if err := db.Message(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Part(opencodetest.Part{MessageID: am.ID, SessionID: old.SessionID, Tool: "bash", Status: "running", Start: now}); err != nil {
		t.Fatal(err)
	}

	second := New(Config{DataDir: dataDir})
	second.Restore(s.clone())
	seen := map[proc.Identity]bool{}
	o := find(t, realDiscover(t, second, host), old.SessionID)
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != cmd.Process.Pid {
		t.Fatalf("after the restart: owners %+v, want the live opencode %d", o.Owners, cmd.Process.Pid)
	}
	if st := judge(t, host, seen, o); st != session.StatusRunning || o.Activity != session.ActivityBusy {
		t.Fatalf("after the restart: %s / %s, want running / busy", st, o.Activity)
	}
	fresh := find(t, realDiscover(t, New(Config{DataDir: dataDir}), host), old.SessionID)
	if !slices.Equal(ownerPIDs(o), ownerPIDs(fresh)) || o.Activity != fresh.Activity || !o.LastActivity.Equal(fresh.LastActivity) {
		t.Errorf("restored %v %s %v, a fresh read %v %s %v", ownerPIDs(o), o.Activity, o.LastActivity, ownerPIDs(fresh), fresh.Activity, fresh.LastActivity)
	}
	s.save(second)

	// Down again; the owner is killed meanwhile.
	killAndReap(t, cmd)
	third := New(Config{DataDir: dataDir})
	third.Restore(s.clone())
	o = find(t, realDiscover(t, third, host), old.SessionID)
	if len(o.Owners) != 0 {
		t.Fatalf("dead owner reported after the restart: %+v", o.Owners)
	}
	if st := judge(t, host, seen, o); st != session.StatusInterrupted {
		t.Fatalf("after the owner died while sessiond was down: %s, want interrupted", st)
	}
}
