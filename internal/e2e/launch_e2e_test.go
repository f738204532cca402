package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

func fakeClaude(t testing.TB) string {
	t.Helper()
	return daemontest.Binaries(t).FakeClaude
}

// launchEnv is an env whose daemon launches the fake claude.
func launchEnv(t *testing.T) (*env, string) {
	e := newEnv(t)
	proj := filepath.Join(e.Home, "proj")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	return e, proj
}

func (e *env) launchJSON(args ...string) (api.LaunchResponse, string, int) {
	e.T.Helper()
	out, errs, code := e.Ctl(append([]string{"--json"}, args...)...)
	var r api.LaunchResponse
	if code == 0 {
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			e.T.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	return r, errs, code
}

func (e *env) waitStatus(id string, want session.Status, within time.Duration) api.Session {
	e.T.Helper()
	var s api.Session
	testenv.EventuallyOK(e.T, within, fmt.Sprintf("session %s %s", id, want), func() (bool, string) {
		s = e.Show(id)
		return s.Status == want, fmt.Sprintf("%s (%s)", s.Status, s.StatusReason)
	})
	return s
}

func (e *env) waitCursor(id string) api.Session {
	e.T.Helper()
	var s api.Session
	testenv.Eventually(e.T, 5*time.Second, "a resume cursor of session "+id, func() bool {
		s = e.Show(id)
		return s.Resume != nil
	})
	return s
}

func argvLog(t *testing.T, path string) [][]string {
	t.Helper()
	b, _ := os.ReadFile(path)
	var out [][]string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if l == "" {
			continue
		}
		var a []string
		json.Unmarshal([]byte(l), &a)
		out = append(out, a)
	}
	return out
}

// Launch answers at once with the process recorded; the upstream id is the
// one chosen up front; the cursor is written once the agent's data shows
// it; resume continues the same upstream id under the same sessiond id.
func TestLaunchAndResumeClaude(t *testing.T) {
	e, proj := launchEnv(t)
	argvPath := filepath.Join(e.Dir, "argv.log")
	os.Setenv("FAKE_AGENT_ARGV_LOG", argvPath)
	defer os.Unsetenv("FAKE_AGENT_ARGV_LOG")
	e.StartDaemon("--claude-bin", fakeClaude(t))

	start := time.Now()
	r, errs, code := e.launchJSON("launch", "--agent", "claude", "--cwd", proj, "--prompt", "list the files")
	took := time.Since(start)
	if code != 0 {
		t.Fatalf("launch: exit %d: %s", code, errs)
	}
	t.Logf("launch answered in %s (sessionctl round trip)", took)
	s := r.Session
	if !s.Launched || s.PID == 0 || s.UpstreamID == "" || (s.Status != session.StatusStarting && s.Status != session.StatusRunning) {
		t.Fatalf("launch answer: %+v", s)
	}
	if r.LogPath == "" || !strings.HasPrefix(r.LogPath, e.StateDir) {
		t.Errorf("log path %q not under the state dir", r.LogPath)
	}
	done := e.waitStatus(s.ID, session.StatusStopped, 5*time.Second)
	if done.Exit == nil || done.Exit.Code != 0 {
		t.Errorf("exit status: %+v", done.Exit)
	}
	s = e.waitCursor(s.ID)
	cur := s.Resume
	if cur.UpstreamID != r.Session.UpstreamID || cur.Cwd != proj || cur.Agent != "claude" || cur.Root != filepath.Join(e.Home, ".claude") || cur.SchemaVersion != 1 {
		t.Fatalf("cursor: %+v", cur)
	}
	transcript := filepath.Join(e.Home, ".claude", "projects", strings.ReplaceAll(proj, "/", "-"), cur.UpstreamID+".jsonl")
	before, err := os.ReadFile(transcript)
	if err != nil {
		t.Fatal(err)
	}

	r2, errs, code := e.launchJSON("resume", s.ID[:6], "--prompt", "and now the tests")
	if code != 0 {
		t.Fatalf("resume: exit %d: %s", code, errs)
	}
	if r2.Session.ID != s.ID || r2.Session.UpstreamID != cur.UpstreamID || r2.Fresh || r2.Forked || r2.Session.PID == s.PID {
		t.Fatalf("resume answer: %+v", r2)
	}
	e.waitStatus(s.ID, session.StatusStopped, 5*time.Second)
	after, _ := os.ReadFile(transcript)
	if len(after) <= len(before) || !strings.Contains(string(after), "and now the tests") {
		t.Fatalf("the same transcript did not grow: %d -> %d bytes", len(before), len(after))
	}
	argvs := argvLog(t, argvPath)
	if len(argvs) != 2 || strings.Join(argvs[1][1:3], " ") != "--resume "+cur.UpstreamID {
		t.Fatalf("argv of the resume: %v", argvs)
	}
	// The event trail: created starting, ..., stopped, starting (resumed), ..., stopped.
	out, _, _ := e.Ctl("events", "--json")
	if strings.Count(out, `"to": "starting"`) != 2 {
		t.Errorf("want two starting events, got:\n%s", out)
	}
}

// The 409, 400 and 503 paths, the fresh start, and the fast failures.
func TestResumeRefusals(t *testing.T) {
	e, proj := launchEnv(t)
	e.StartDaemon("--claude-bin", fakeClaude(t))
	r, errs, code := e.launchJSON("launch", "--agent", "claude", "--cwd", proj, "--prompt", "run the tests", "--env", "FAKE_CLAUDE_TOOL_SLEEP=300")
	if code != 0 {
		t.Fatalf("launch: %d %s", code, errs)
	}
	id := r.Session.ID
	t.Cleanup(func() { syscall.Kill(-r.Session.PID, syscall.SIGKILL) })
	e.waitStatus(id, session.StatusRunning, 5*time.Second)
	e.waitCursor(id)

	// Single writer: 409 while the owner lives.
	_, errs, code = e.Ctl("resume", id, "--prompt", "again")
	if code != 1 || !strings.Contains(errs, "already running as pid") {
		t.Fatalf("resume while running: exit %d: %s", code, errs)
	}
	// ... unless it forks.
	f, errs, code := e.launchJSON("resume", id, "--fork", "--prompt", "fork it")
	if code != 0 || !f.Forked || f.Session.ID == id || f.Session.UpstreamID == r.Session.UpstreamID {
		t.Fatalf("fork while running: exit %d %s %+v", code, errs, f)
	}
	e.waitStatus(f.Session.ID, session.StatusStopped, 5*time.Second)
	// A fork into another directory runs there: its tools, its transcript.
	other := filepath.Join(e.Home, "other")
	os.MkdirAll(other, 0o755)
	f2, errs, code := e.launchJSON("resume", id, "--cwd", other, "--prompt", "fork elsewhere")
	if code != 0 || !f2.Forked || f2.Session.Cwd != other {
		t.Fatalf("fork into %s: exit %d %s %+v", other, code, errs, f2)
	}
	e.waitStatus(f2.Session.ID, session.StatusStopped, 5*time.Second)
	forked := filepath.Join(e.Home, ".claude", "projects", strings.ReplaceAll(other, "/", "-"), f2.Session.UpstreamID+".jsonl")
	if _, err := os.Stat(forked); err != nil {
		t.Errorf("the fork's transcript is not in its own project folder: %v", err)
	}

	syscall.Kill(r.Session.PID, syscall.SIGKILL)
	s := e.waitStatus(id, session.StatusInterrupted, 3*time.Second)
	if s.Problem(session.ProblemOrphanedToolCall) == nil {
		t.Errorf("killed mid tool without orphaned_tool_call: %+v", s.Problems)
	}

	// Could not tell: the projects folder is not a folder. 503, nothing launched.
	projects := filepath.Join(e.Home, ".claude", "projects")
	os.Rename(projects, projects+".away")
	os.WriteFile(projects, []byte("x"), 0o600)
	_, errs, code = e.Ctl("resume", id, "--prompt", "again")
	if code != 1 || !strings.Contains(errs, "cannot tell whether") {
		t.Fatalf("resume with unreadable data: exit %d: %s", code, errs)
	}
	if e.Show(id).Status != session.StatusInterrupted {
		t.Fatal("something was launched on a 503")
	}
	os.Remove(projects)
	os.Rename(projects+".away", projects)

	// Confirmed missing: the transcript is gone. A fresh session, same id.
	os.RemoveAll(filepath.Join(projects, strings.ReplaceAll(proj, "/", "-"), r.Session.UpstreamID+".jsonl"))
	fr, errs, code := e.launchJSON("resume", id, "--prompt", "start over")
	if code != 0 || !fr.Fresh || fr.Session.ID != id || fr.Session.UpstreamID == r.Session.UpstreamID || fr.Reason == "" {
		t.Fatalf("resume of a deleted transcript: exit %d %s %+v", code, errs, fr)
	}
	e.waitStatus(id, session.StatusStopped, 5*time.Second)
}

// A missing binary leaves no record; an agent that exits within seconds is
// stopped with the log tail in a launch_failed problem.
func TestLaunchFailures(t *testing.T) {
	e, proj := launchEnv(t)
	e.StartDaemon("--claude-bin", filepath.Join(e.Dir, "no-such-claude"))
	_, errs, code := e.Ctl("launch", "--agent", "claude", "--cwd", proj, "--prompt", "x")
	if code != 1 || !strings.Contains(errs, "not found") {
		t.Fatalf("missing binary: exit %d: %s", code, errs)
	}
	out, _, _ := e.Ctl("ls", "--all", "--json")
	if strings.Contains(out, `"id"`) {
		t.Fatalf("a record was left behind:\n%s", out)
	}
	_, errs, code = e.Ctl("launch", "--agent", "nope", "--cwd", proj)
	if code != 1 || !strings.Contains(errs, "unknown agent") {
		t.Fatalf("unknown agent: exit %d: %s", code, errs)
	}
	_, errs, code = e.Ctl("launch", "--agent", "claude", "--cwd", filepath.Join(proj, "missing"), "--prompt", "x")
	if code != 1 || !strings.Contains(errs, "missing") {
		t.Fatalf("missing cwd: exit %d: %s", code, errs)
	}

	e2, proj2 := launchEnv(t)
	os.Setenv("FAKE_CLAUDE_EXIT", "1")
	defer os.Unsetenv("FAKE_CLAUDE_EXIT")
	e2.StartDaemon("--claude-bin", fakeClaude(t))
	r, errs, code := e2.launchJSON("launch", "--agent", "claude", "--cwd", proj2, "--prompt", "x")
	if code != 0 {
		t.Fatalf("launch: %d %s", code, errs)
	}
	var p *session.Problem
	testenv.EventuallyOK(t, 5*time.Second, "the fast exit stopped with launch_failed", func() (bool, string) {
		s := e2.Show(r.Session.ID)
		p = s.Problem(session.ProblemLaunchFailed)
		return p != nil && s.Status == session.StatusStopped, fmt.Sprintf("%s %+v", s.Status, s.Problems)
	})
	if !strings.Contains(p.Detail, "Please run /login") || !strings.Contains(p.Detail, "code 1") {
		t.Fatalf("launch_failed detail: %q", p.Detail)
	}
}

// A malformed cursor or an unknown schema version is refused with 400.
func TestResumeBadCursor(t *testing.T) {
	e, proj := launchEnv(t)
	now := time.Now()
	stopped := now
	e.Seed(
		&session.Record{ID: "bad000000001", Agent: "claude", UpstreamID: "u-1", Status: session.StatusStopped, CreatedAt: now, StoppedAt: &stopped,
			Resume: &session.ResumeCursor{SchemaVersion: 9, Agent: "claude", UpstreamID: "u-1", Cwd: proj, Root: e.Home}},
		&session.Record{ID: "bad000000002", Agent: "claude", UpstreamID: "u-2", Status: session.StatusStopped, CreatedAt: now, StoppedAt: &stopped,
			Resume: &session.ResumeCursor{SchemaVersion: 1, Agent: "claude", UpstreamID: "", Cwd: "relative", Root: e.Home}},
		&session.Record{ID: "bad000000003", Agent: "claude", UpstreamID: "u-3", Status: session.StatusStopped, CreatedAt: now, StoppedAt: &stopped},
	)
	e.StartDaemon("--claude-bin", fakeClaude(t))
	for id, want := range map[string]string{"bad000000001": "schema_version 9", "bad000000002": "malformed", "bad000000003": "no resume cursor"} {
		_, errs, code := e.Ctl("resume", id, "--prompt", "x")
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("resume %s: exit %d: %s (want %q)", id, code, errs, want)
		}
	}
}

// A launched agent outlives sessiond's kill -9, is re-adopted by identity
// at restart, and its later exit is noticed (by pidfd; sessiond is no
// longer its parent).
func TestLaunchedSessionReadoptedAfterDaemonCrash(t *testing.T) {
	e, proj := launchEnv(t)
	d := e.StartDaemon("--claude-bin", fakeClaude(t))
	r, errs, code := e.launchJSON("launch", "--agent", "claude", "--cwd", proj, "--prompt", "long job", "--env", "FAKE_CLAUDE_TOOL_SLEEP=300")
	if code != 0 {
		t.Fatalf("launch: %d %s", code, errs)
	}
	pid := r.Session.PID
	t.Cleanup(func() { syscall.Kill(-pid, syscall.SIGKILL) })
	e.waitStatus(r.Session.ID, session.StatusRunning, 5*time.Second)
	d.Cmd.Process.Signal(syscall.SIGKILL)
	<-d.Done
	time.Sleep(100 * time.Millisecond)
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the agent died with sessiond: %v", err)
	}
	e.StartDaemon("--claude-bin", fakeClaude(t))
	s := e.Show(r.Session.ID)
	if s.Status != session.StatusRunning || s.PID != pid {
		t.Fatalf("after restart: %s pid %d", s.Status, s.PID)
	}
	syscall.Kill(-pid, syscall.SIGKILL) // its process group: the agent and its tools
	killed := time.Now()
	e.waitStatus(r.Session.ID, session.StatusInterrupted, 3*time.Second)
	t.Logf("re-adopted session interrupted %s after its kill", time.Since(killed).Round(time.Millisecond))
}

// tmux mode: the interactive CLI in a detached tmux session named after the
// sessiond id; the owner is the pane's process.
func TestLaunchTmux(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (.ci/run installs it): tmux mode not tested")
	}
	e, proj := launchEnv(t)
	// A tmux server of the test's own, not the user's.
	os.Setenv("TMUX_TMPDIR", e.Dir)
	defer os.Unsetenv("TMUX_TMPDIR")
	e.StartDaemon("--claude-bin", fakeClaude(t))
	r, errs, code := e.launchJSON("launch", "--agent", "claude", "--cwd", proj, "--tmux", "--prompt", "hello")
	if code != 0 {
		t.Fatalf("launch --tmux: %d %s", code, errs)
	}
	name := "sessiond-" + r.Session.ID
	t.Cleanup(func() { exec.Command("tmux", "kill-session", "-t", "="+name).Run() })
	if r.Attach != "tmux attach -t "+name || r.Session.Tmux != name {
		t.Fatalf("attach %q tmux %q", r.Attach, r.Session.Tmux)
	}
	out, err := exec.Command("tmux", "display-message", "-p", "-t", "="+name+":", "#{pane_pid}").Output()
	if err != nil || strings.TrimSpace(string(out)) != strconv.Itoa(r.Session.PID) {
		t.Fatalf("pane pid %q (%v), owner %d", out, err, r.Session.PID)
	}
	e.waitStatus(r.Session.ID, session.StatusRunning, 5*time.Second)
	exec.Command("tmux", "kill-session", "-t", "="+name).Run()
	e.waitStatus(r.Session.ID, session.StatusStopped, 3*time.Second)
	human, _, _ := e.Ctl("show", r.Session.ID)
	if !strings.Contains(human, "tmux attach -t "+name) || !strings.Contains(human, "Mode:") {
		t.Errorf("show lacks the tmux details:\n%s", human)
	}
}
