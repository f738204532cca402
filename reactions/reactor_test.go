package reactions

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeHook writes an executable shell script named name into dir.
func writeHook(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

func rec(id string, st session.Status, act session.Activity) *session.Record {
	return &session.Record{ID: id, Agent: "claude", Status: st, Activity: act, Cwd: "/src/app", Title: "fix the build"}
}

func ev(seq uint64, typ session.EventType, id string, from, to session.Status, act session.Activity, w *session.WaitingFor) session.Event {
	return session.Event{Seq: seq, Time: time.Now(), Type: typ, SessionID: id, Agent: "claude", From: from, To: to, Activity: act, WaitingFor: w}
}

// lines reads path's lines (none if it does not exist yet).
func lines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func hookHealth(r *Reactor, name string) (h struct {
	Runs, Failures, Dropped int64
	Failing                 bool
	LastError, Skipped      string
}, found bool) {
	for _, hh := range r.Health().Hooks {
		if hh.Name == name {
			h.Runs, h.Failures, h.Dropped, h.Failing = hh.Runs, hh.Failures, hh.Dropped, hh.Failing
			h.LastError, h.Skipped = hh.LastError, hh.Skipped
			return h, true
		}
	}
	return h, false
}

// TestHookGetsTheChange: a hook reads the change as JSON on stdin and as
// SESSIOND_* variables, in the order the log has them; an event that
// changes nothing a hook is about runs nothing; files that are not
// executable, or that others could have written, are named, not run.
func TestHookGetsTheChange(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	record := filepath.Join(out, "changes")
	writeHook(t, dir, "10-record", `{ cat; echo; } >> `+record+`
echo "$SESSIOND_EVENT $SESSIOND_ID $SESSIOND_AGENT $SESSIOND_PREVIOUS_STATUS>$SESSIOND_STATUS $SESSIOND_PREVIOUS_ACTIVITY>$SESSIOND_ACTIVITY wf=$SESSIOND_WAITING_FOR cwd=$SESSIOND_CWD sock=$SESSIOND_SOCKET" >> `+record+`.env
`, 0o700)
	writeHook(t, dir, "20-plain-file", "exit 0\n", 0o600)
	writeHook(t, dir, "30-world-writable", "exit 0\n", 0o777)
	writeHook(t, dir, ".hidden", "exit 0\n", 0o700)
	writeHook(t, dir, "40-backup~", "exit 0\n", 0o700)

	r := New(Config{HooksDir: dir, Socket: "/run/s.sock", Timeout: 5 * time.Second})
	defer r.Close()
	a := rec("a1", session.StatusRunning, session.ActivityIdle)
	r.Seed(a)

	perm := &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "rm -rf build"}
	busy := rec("a1", session.StatusRunning, session.ActivityBusy)
	r.Observe(ev(1, session.EventUpdated, "a1", "running", "running", "busy", nil), busy)
	// Only the owner's problems changed: nothing for hooks.
	r.Observe(ev(2, session.EventUpdated, "a1", "running", "running", "busy", nil), busy)
	r.Observe(ev(3, session.EventUpdated, "a1", "running", "running", "waiting", perm), busy)
	r.Observe(ev(4, session.EventStatus, "a1", "running", "stopped", "", nil), rec("a1", session.StatusStopped, ""))
	// A session sessiond did not know: created, then a status change.
	r.Observe(ev(5, session.EventCreated, "b2", "", "running", "unknown", nil), rec("b2", session.StatusRunning, session.ActivityUnknown))

	testenv.Eventually(t, 10*time.Second, "4 changes recorded", func() bool { return len(lines(t, record+".env")) == 4 })
	env := lines(t, record+".env")
	want := []string{
		"activity a1 claude running>running idle>busy wf= cwd=/src/app sock=/run/s.sock",
		"activity a1 claude running>running busy>waiting wf=permission cwd=/src/app sock=/run/s.sock",
		"status a1 claude running>stopped waiting> wf= cwd=/src/app sock=/run/s.sock",
		"created b2 claude >running >unknown wf= cwd=/src/app sock=/run/s.sock",
	}
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Errorf("hook environments:\n%s\nwant:\n%s", strings.Join(env, "\n"), strings.Join(want, "\n"))
	}
	var changes []Change
	for _, l := range lines(t, record) {
		var c Change
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("stdin is not one JSON change: %v: %s", err, l)
		}
		changes = append(changes, c)
	}
	if len(changes) != 4 {
		t.Fatalf("got %d changes on stdin, want 4", len(changes))
	}
	if c := changes[1]; c.Seq != 3 || c.WaitingFor == nil || c.WaitingFor.Tool != "Bash" || c.WaitingFor.Input != "rm -rf build" ||
		c.Previous == nil || c.Previous.Activity != "busy" || c.Session == nil || c.Session.Title != "fix the build" {
		t.Errorf("the waiting change on stdin: %+v", c)
	}
	if changes[3].Previous != nil {
		t.Errorf("a new session has no previous state, got %+v", changes[3].Previous)
	}

	// A run is counted when its process has exited, a moment after it
	// wrote its last line.
	testenv.Eventually(t, 10*time.Second, "4 runs counted", func() bool { h, _ := hookHealth(r, "10-record"); return h.Runs >= 4 })
	h, _ := hookHealth(r, "10-record")
	if h.Runs != 4 || h.Failures != 0 || h.Failing {
		t.Errorf("10-record health: %+v", h)
	}
	for name, why := range map[string]string{"20-plain-file": "not executable", "30-world-writable": "writable by others"} {
		h, ok := hookHealth(r, name)
		if !ok || !strings.Contains(h.Skipped, why) || h.Runs != 0 {
			t.Errorf("%s: health %+v (found %v), want skipped as %q", name, h, ok, why)
		}
	}
	for _, name := range []string{".hidden", "40-backup~"} {
		if _, ok := hookHealth(r, name); ok {
			t.Errorf("%s is listed; hidden files and backups are not hooks", name)
		}
	}
}

// pidAlive reports whether pid is a live process, not a zombie.
func pidAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestHangingHookKilledAtLimit: a hook that hangs, and what it started,
// are killed at the limit; it is named failing, and the other hook went
// on meanwhile; Observe never waited for either.
func TestHangingHookKilledAtLimit(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	dir, out := t.TempDir(), t.TempDir()
	pids := filepath.Join(out, "pids")
	// The hook ignores SIGTERM, so only the SIGKILL after killAfter ends
	// it; its background child holds stdout open.
	writeHook(t, dir, "hang", `trap '' TERM
sleep 300 &
echo $$ $! >> `+pids+`
cat >/dev/null
while :; do sleep 1; done
`, 0o700)
	done := filepath.Join(out, "done")
	writeHook(t, dir, "quick", `echo $SESSIOND_SEQ >> `+done+"\n", 0o700)

	limit := 300 * time.Millisecond
	r := New(Config{HooksDir: dir, Timeout: limit, Concurrency: 2})
	defer r.Close()
	r.Seed(rec("a1", session.StatusRunning, session.ActivityIdle))
	r.Observe(ev(1, session.EventUpdated, "a1", "running", "running", "busy", nil), nil)
	r.Observe(ev(2, session.EventUpdated, "a1", "running", "running", "idle", nil), nil)

	testenv.Eventually(t, 10*time.Second, "quick ran for both changes", func() bool { return len(lines(t, done)) == 2 })
	if h, _ := hookHealth(r, "hang"); h.Runs != 0 {
		t.Fatalf("the first hang run ended before its limit: %+v", h)
	}
	testenv.Eventually(t, 10*time.Second, "hang failed twice", func() bool { h, _ := hookHealth(r, "hang"); return h.Failures == 2 })
	h, _ := hookHealth(r, "hang")
	if !h.Failing || !strings.Contains(h.LastError, "killed at its limit of 300ms") {
		t.Errorf("hang health: %+v", h)
	}
	for _, l := range lines(t, pids) {
		for _, f := range strings.Fields(l) {
			pid, _ := strconv.Atoi(f)
			testenv.Eventually(t, 10*time.Second, "pid "+f+" killed", func() bool { return !pidAlive(pid) })
		}
	}
	if n := len(lines(t, pids)); n != 2 {
		t.Errorf("hang started %d times, want 2", n)
	}
}

// TestBehindHookDropsAndCloseKills: a hook far behind has changes
// dropped and counted, not queued without bound; Close kills the run in
// progress and returns.
func TestBehindHookDropsAndCloseKills(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	started := filepath.Join(out, "started")
	writeHook(t, dir, "slow", "echo $$ >> "+started+"\nexec sleep 300\n", 0o700)
	r := New(Config{HooksDir: dir, Timeout: time.Hour})
	r.Seed(rec("a1", session.StatusRunning, session.ActivityIdle))
	acts := []session.Activity{"busy", "idle"}
	for i := 0; i < queueLen+10; i++ {
		r.Observe(ev(uint64(i+1), session.EventUpdated, "a1", "running", "running", acts[i%2], nil), nil)
	}
	h, _ := hookHealth(r, "slow")
	if h.Dropped < 9 {
		t.Errorf("dropped %d changes, want at least 9 of %d past a queue of %d", h.Dropped, queueLen+10, queueLen)
	}
	testenv.Eventually(t, 10*time.Second, "slow started", func() bool { return len(lines(t, started)) == 1 })
	pid, _ := strconv.Atoi(lines(t, started)[0])
	r.Close()
	if pidAlive(pid) {
		t.Errorf("pid %d still runs after Close", pid)
	}
	if err := syscall.Kill(pid, 0); err == nil && pidAlive(pid) {
		t.Errorf("the hook outlived Close")
	}
	// A closed reactor takes no more changes.
	r.Observe(ev(1000, session.EventUpdated, "a1", "running", "running", "waiting", nil), nil)
}

type fakeNotifier struct {
	mu   sync.Mutex
	msgs []message
}

func (f *fakeNotifier) Name() string { return "fake" }
func (f *fakeNotifier) Notify(_ context.Context, summary, body string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.msgs = append(f.msgs, message{summary, body})
	return nil
}

// TestNotifications: a notification when a session needs its user, and
// only then.
func TestNotifications(t *testing.T) {
	n := &fakeNotifier{}
	r := New(Config{Notifier: n})
	defer r.Close()
	r.Seed(rec("a1", session.StatusRunning, session.ActivityIdle))
	a := rec("a1", session.StatusRunning, session.ActivityBusy)
	q := &session.WaitingFor{Kind: session.WaitingQuestion, Question: "Which database?"}
	in := &session.WaitingFor{Kind: session.WaitingInput}
	steps := []session.Event{
		ev(1, session.EventUpdated, "a1", "running", "running", "busy", nil),
		ev(2, session.EventUpdated, "a1", "running", "running", "waiting", q),
		ev(3, session.EventUpdated, "a1", "running", "running", "waiting", q), // the same question
		ev(4, session.EventUpdated, "a1", "running", "running", "busy", nil),
		ev(5, session.EventUpdated, "a1", "running", "running", "idle", in),
		ev(6, session.EventStatus, "a1", "running", "interrupted", "", nil),
		ev(7, session.EventStatus, "a1", "interrupted", "stopped", "", nil), // repaired: not news
		ev(8, session.EventCreated, "b2", "", "running", "busy", nil),
		ev(9, session.EventStatus, "b2", "running", "stopped", "", nil),
	}
	steps[5].Reason = "owner died mid-turn"
	for _, e := range steps {
		r.Observe(e, a)
	}
	want := []message{
		{`Claude Code "fix the build" (a1) needs you`, "Question: Which database?"},
		{`Claude Code "fix the build" (a1) finished its turn`, "It waits for your next prompt."},
		{`Claude Code "fix the build" (a1) was interrupted`, "owner died mid-turn"},
		{`Claude Code "fix the build" (b2) ended`, "its process exited"},
	}
	testenv.Eventually(t, 10*time.Second, "4 notifications", func() bool { n.mu.Lock(); defer n.mu.Unlock(); return len(n.msgs) >= len(want) })
	time.Sleep(50 * time.Millisecond) // room for a wrong fifth
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.msgs) != len(want) {
		t.Fatalf("notifications:\n%q\nwant:\n%q", n.msgs, want)
	}
	for i := range want {
		if n.msgs[i] != want[i] {
			t.Errorf("notification %d: %q, want %q", i, n.msgs[i], want[i])
		}
	}
	n.mu.Unlock()
	testenv.Eventually(t, 10*time.Second, "the runs counted", func() bool { h := r.Health(); return len(h.Hooks) == 1 && h.Hooks[0].Runs >= int64(len(want)) })
	n.mu.Lock()
	if h := r.Health(); h.Notify != "fake" || len(h.Hooks) != 1 || h.Hooks[0].Runs != int64(len(want)) {
		t.Errorf("health: %+v", h)
	}
}

// TestFindNotifierRunsNotifySend: the notify-send found on PATH is run
// with the summary and the body as they are, even when they look like
// flags.
func TestFindNotifierRunsNotifySend(t *testing.T) {
	bin, out := t.TempDir(), filepath.Join(t.TempDir(), "args")
	writeHook(t, bin, "notify-send", `for a; do echo "$a"; done > `+out+"\n", 0o700)
	t.Setenv("PATH", bin)
	n, err := FindNotifier()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(context.Background(), "-x needs you", `Permission to use Bash: echo "hi"`); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(lines(t, out), "|")
	if want := `--app-name=sessiond|--|-x needs you|Permission to use Bash: echo "hi"`; got != want {
		t.Errorf("notify-send got %q, want %q", got, want)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := FindNotifier(); err == nil || !strings.Contains(err.Error(), "notify-send nor osascript") {
		t.Errorf("no notifier on PATH: err %v", err)
	}
}

func TestAppleString(t *testing.T) {
	if got, want := appleString(`say "hi" \ bye`), `"say \"hi\" \\ bye"`; got != want {
		t.Errorf("appleString = %s, want %s", got, want)
	}
}

// TestUnsafeHooksNotRun: a symlink is judged by its target; a hooks
// directory others can write runs nothing and says why; a hook made
// writable by others after a change was queued for it is not run.
func TestUnsafeHooksNotRun(t *testing.T) {
	dir, other, out := t.TempDir(), t.TempDir(), t.TempDir()
	ran := filepath.Join(out, "ran")
	writeHook(t, other, "shared", "echo shared >> "+ran+"\n", 0o777)
	if err := os.Symlink(filepath.Join(other, "shared"), filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	writeHook(t, other, "mine", "echo mine >> "+ran+"\n", 0o700)
	if err := os.Symlink(filepath.Join(other, "mine"), filepath.Join(dir, "good-link")); err != nil {
		t.Fatal(err)
	}
	started := filepath.Join(out, "started")
	slow := writeHook(t, dir, "slow", "echo start >> "+started+"; sleep 1; echo slow >> "+ran+"\n", 0o700)

	r := New(Config{HooksDir: dir, Timeout: 5 * time.Second, Concurrency: 2})
	defer r.Close()
	r.Seed(rec("a1", session.StatusRunning, session.ActivityIdle))
	r.Observe(ev(1, session.EventUpdated, "a1", "running", "running", "busy", nil), nil)
	r.Observe(ev(2, session.EventUpdated, "a1", "running", "running", "idle", nil), nil)
	if h, _ := hookHealth(r, "link"); !strings.Contains(h.Skipped, "its target") || !strings.Contains(h.Skipped, "writable by others") {
		t.Errorf("link to a world-writable file: %+v", h)
	}
	// While slow's first run runs, its second change waits; the file
	// turns world-writable.
	testenv.Eventually(t, 10*time.Second, "slow's first run started", func() bool { return len(lines(t, started)) == 1 })
	if err := os.Chmod(slow, 0o777); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "slow's two changes done", func() bool { h, _ := hookHealth(r, "slow"); return h.Runs == 2 })
	if h, _ := hookHealth(r, "slow"); h.Failures != 1 || !strings.Contains(h.LastError, "not run: writable by others") || len(lines(t, started)) != 1 {
		t.Errorf("slow after chmod 777: %+v", h)
	}
	testenv.Eventually(t, 10*time.Second, "good-link ran twice", func() bool { h, _ := hookHealth(r, "good-link"); return h.Runs == 2 })

	// A directory others can write runs nothing.
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	before := len(lines(t, ran))
	r.Observe(ev(3, session.EventUpdated, "a1", "running", "running", "busy", nil), nil)
	if h := r.Health(); !strings.Contains(h.HooksDirError, "writable by others") || len(h.Hooks) != 0 {
		t.Errorf("world-writable hooks dir: %+v", h)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(lines(t, ran)); n != before {
		t.Errorf("%d hook runs in a world-writable directory", n-before)
	}
}

// TestHealthBeforeAnyChange: a hook that will not run is named in health
// from the start, not only once a change has come.
func TestHealthBeforeAnyChange(t *testing.T) {
	dir := t.TempDir()
	writeHook(t, dir, "ok", "exit 0\n", 0o700)
	writeHook(t, dir, "not-exec", "exit 0\n", 0o600)
	r := New(Config{HooksDir: dir})
	defer r.Close()
	if h, ok := hookHealth(r, "not-exec"); !ok || !strings.Contains(h.Skipped, "not executable") {
		t.Errorf("not-exec before any change: %+v (listed %v)", h, ok)
	}
	if h, ok := hookHealth(r, "ok"); !ok || h.Skipped != "" || h.Runs != 0 {
		t.Errorf("ok before any change: %+v (listed %v)", h, ok)
	}
}

// TestHookEnvNotInherited: a SESSIOND_* variable of sessiond's own
// environment never reaches a hook as this change's; every variable is
// set, empty when the change does not know it.
func TestHookEnvNotInherited(t *testing.T) {
	base := []string{"PATH=/bin", "SESSIOND_CWD=/stale", "SESSIOND_TITLE=stale", "SESSIOND_PREVIOUS_STATUS=stale", "SESSIOND_SOCKET=/stale.sock", "HOME=/h"}
	c := &Change{Kind: KindCreated, SessionID: "x", Agent: "claude", State: State{Status: session.StatusRunning}}
	env := hookEnv(base, c, "")
	got := map[string][]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = append(got[k], v)
	}
	for _, k := range []string{"SESSIOND_CWD", "SESSIOND_TITLE", "SESSIOND_PREVIOUS_STATUS", "SESSIOND_PREVIOUS_ACTIVITY", "SESSIOND_WAITING_FOR"} {
		if v := got[k]; len(v) != 1 || v[0] != "" {
			t.Errorf("%s = %q, want set once, empty", k, v)
		}
	}
	if v := got["SESSIOND_SOCKET"]; v != nil {
		t.Errorf("SESSIOND_SOCKET = %q, want unset when sessiond has no socket to give", v)
	}
	if v := got["SESSIOND_ID"]; len(v) != 1 || v[0] != "x" {
		t.Errorf("SESSIOND_ID = %q", v)
	}
	if got["PATH"] == nil || got["HOME"] == nil {
		t.Errorf("the rest of the environment is kept: %q", env)
	}
	env = hookEnv(base, c, "/run/s.sock")
	if n := strings.Count(strings.Join(env, "\n"), "SESSIOND_SOCKET="); n != 1 || !strings.Contains(strings.Join(env, "\n"), "SESSIOND_SOCKET=/run/s.sock") {
		t.Errorf("socket: %q", env)
	}
}

// TestSeedManyAtOnce: the daemon seeds every record in one call. Each
// seeded session's first change is compared with its seeded state (an
// update to the same state is no change), a later Seed adds to the first,
// and a session never seeded has no previous state.
func TestSeedManyAtOnce(t *testing.T) {
	r := New(Config{})
	defer r.Close()
	var recs []*session.Record
	for i := range 20 {
		act := session.ActivityIdle
		if i%2 == 1 {
			act = session.ActivityBusy
		}
		recs = append(recs, rec(fmt.Sprintf("s%02d", i), session.StatusRunning, act))
	}
	r.Seed(recs[:10]...)
	r.Seed(recs[10:]...)
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, rc := range recs {
		same := r.change(ev(uint64(i+1), session.EventUpdated, rc.ID, "running", "running", rc.Activity, nil), rc)
		if same != nil {
			t.Errorf("%s: an update to its seeded state is a change: %+v", rc.ID, same)
		}
		c := r.change(ev(uint64(i+1), session.EventUpdated, rc.ID, "running", "running", session.ActivityWaiting, nil), rc)
		if c == nil || c.Previous == nil || c.Previous.Activity != rc.Activity {
			t.Errorf("%s: change %+v, want one from its seeded activity %q", rc.ID, c, rc.Activity)
		}
	}
	if c := r.change(ev(99, session.EventUpdated, "new", "running", "running", session.ActivityBusy, nil), nil); c == nil || c.Previous != nil {
		t.Errorf("unseeded session: %+v, want a change with no previous state", c)
	}
}
