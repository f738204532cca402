package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// A permission request of the real Codex (adapters/codex/testdata).
const permissionPayload = `{"session_id":"01a2108f-4c6c-7c41-a692-d6ed6edf0c4c","turn_id":"01a2108f-59d9-7dd1-a249-45ae1dc86873","cwd":"/tmp/w","hook_event_name":"PermissionRequest","model":"fake-model","permission_mode":"default","tool_name":"Bash","tool_input":{"command":"sleep 6; echo hi","description":"May I run the job?"}}`

// runHook runs the built `sessionctl hook` as an agent would, and returns
// its exit code, stdout, stderr and how long it took.
func runHook(t *testing.T, e *daemontest.Env, stdin io.Reader, args ...string) (int, string, string, time.Duration) {
	t.Helper()
	cmd := exec.Command(e.Sessionctl, append([]string{"--socket", e.Socket, "hook"}, args...)...)
	cmd.Env = e.Environ()
	cmd.Stdin = stdin
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String(), took
}

// The hook never holds up or fails the agent: with sessiond down, with a
// socket that never answers, with stdin never closed, it exits 0 within
// its budget (the bound below is ten times that: it checks that nothing
// waits on a timeout of its own, not the machine's speed), and writes
// nothing on stdout.
func TestHookNeverHoldsTheAgent(t *testing.T) {
	e := daemontest.NewEnv(t)
	if err := os.MkdirAll(filepath.Dir(e.Socket), 0o700); err != nil {
		t.Fatal(err)
	}
	// Claude Code and Codex run the same command; each agent's route is
	// checked (the payload is read as JSON only, not as either's shape).
	check := func(what string, stdin io.Reader, wantErr string) {
		t.Helper()
		// A stdin never closed (an *os.File) stays the same file for
		// both runs; any other is read once and given to each.
		var payload []byte
		if _, ok := stdin.(*os.File); !ok {
			var err error
			if payload, err = io.ReadAll(stdin); err != nil {
				t.Fatal(err)
			}
		}
		for _, agent := range []string{"claude", "codex"} {
			in := stdin
			if payload != nil {
				in = bytes.NewReader(payload)
			}
			code, out, errs, took := runHook(t, e, in, agent, "--verbose")
			t.Logf("%s, %s: exit %d after %s: %s", agent, what, code, took.Round(time.Millisecond), strings.TrimSpace(errs))
			if code != 0 || out != "" || took > 10*hookBudget+time.Second {
				t.Fatalf("%s, %s: exit %d, stdout %q, took %s", agent, what, code, out, took)
			}
			if !strings.Contains(errs, wantErr) {
				t.Fatalf("%s, %s: --verbose said %q, want it to say %q", agent, what, errs, wantErr)
			}
		}
	}
	check("sessiond down", strings.NewReader(permissionPayload), "not reachable")
	check("not JSON", strings.NewReader("{oops"), "not JSON")

	// A socket that accepts and never answers.
	l, err := net.Listen("unix", e.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	check("sessiond hangs", strings.NewReader(permissionPayload), "deadline")

	// An agent that never closes the hook's stdin (an *os.File, so that
	// exec does not wait on copying into it).
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if _, err := w.Write([]byte(permissionPayload)); err != nil {
		t.Fatal(err)
	}
	check("stdin left open", r, "stdin not closed")
}

// A hook counts for the session it names only from the owner's process
// tree: the same payload from elsewhere changes nothing; from below the
// owner it makes the session waiting for that permission at once; kill -9
// of the owner still ends the session (no hook fires then).
func TestHookFromTheOwnerOnly(t *testing.T) {
	e := daemontest.NewEnv(t)
	payload := filepath.Join(e.Dir, "payload.json")
	if err := os.WriteFile(payload, []byte(permissionPayload), 0o644); err != nil {
		t.Fatal(err)
	}
	// The owner: a shell that runs the hook when told to, then lives on.
	owner, start, oid := startOwnerShell(t, e, `read go; "$0" --socket "$1" hook codex < "$2"; exec sleep 300`, e.Sessionctl, e.Socket, payload)
	const id = "c0de00000001"
	e.Seed(&session.Record{ID: id, Agent: "codex", UpstreamID: "01a2108f-4c6c-7c41-a692-d6ed6edf0c4c", Status: session.StatusRunning,
		Activity: session.ActivityBusy, Owner: &oid, Cwd: "/tmp/w", CreatedAt: time.Now(), Problems: []session.Problem{}})
	d := e.StartDaemon()
	_ = d

	// From the test process: read and kept, but not the owner's.
	code, _, errs, _ := runHook(t, e, strings.NewReader(permissionPayload), "codex", "--verbose")
	if code != 0 || !strings.Contains(errs, `"taken":true`) || !strings.Contains(errs, `"activity":"waiting"`) {
		t.Fatalf("hook from elsewhere: exit %d: %s", code, errs)
	}
	time.Sleep(1500 * time.Millisecond) // several passes (200 ms each)
	if s := e.Show(id); s.Activity != session.ActivityBusy || s.WaitingFor != nil {
		t.Fatalf("a hook from outside the owner's tree was taken: %s %+v", s.Activity, s.WaitingFor)
	}

	sent := time.Now()
	if _, err := start.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	var s api.Session
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s = e.Show(id)
		if s.Activity == session.ActivityWaiting || time.Now().After(deadline) {
			break
		}
	}
	want := session.WaitingFor{Kind: session.WaitingPermission, Tool: "Bash", Input: "sleep 6; echo hi"}
	if s.Activity != session.ActivityWaiting || s.WaitingFor == nil || *s.WaitingFor != want || s.ActivitySource != session.SourceHook || s.ActivitySince == nil {
		t.Fatalf("after the owner's hook: %s from %q waiting %+v", s.Activity, s.ActivitySource, s.WaitingFor)
	}
	t.Logf("waiting %s after the owner ran the hook", time.Since(sent).Round(time.Millisecond))
	if out, _, _ := e.Ctl("show", id); !strings.Contains(out, "permission for Bash: sleep 6; echo hi") || !strings.Contains(out, "from the hook") {
		t.Fatalf("show:\n%s", out)
	}
	if out, _, _ := e.Ctl("ls"); !strings.Contains(out, "waiting (permission)") {
		t.Fatalf("ls:\n%s", out)
	}

	if err := owner.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		s = e.Show(id)
		if s.Status.Terminal() || time.Now().After(deadline) {
			break
		}
	}
	if !s.Status.Terminal() || s.WaitingFor != nil || s.ActivitySource != "" {
		t.Fatalf("after kill -9 of the owner: %s, waiting %+v", s.Status, s.WaitingFor)
	}
}

// `hooks install` into a root, `hooks status`, `hooks uninstall`: the
// settings file comes back byte-identical, --dry-run changes nothing.
func TestHooksInstallUninstallCLI(t *testing.T) {
	e := daemontest.NewEnv(t)
	root := filepath.Join(e.Home, "claude-root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	settings := filepath.Join(root, "settings.json")
	orig := "{\n    \"theme\": \"dark\",\n    \"permissions\": {\"allow\": [\"Bash(ls:*)\"]}\n}\n"
	if err := os.WriteFile(settings, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := e.Ctl("hooks", "install", "claude", "--root", root, "--dry-run")
	if b, _ := os.ReadFile(settings); code != 0 || string(b) != orig || !strings.Contains(out, "would change") || !strings.Contains(out, "+") {
		t.Fatalf("dry run: exit %d %s\n%s\nfile:\n%s", code, errs, out, b)
	}
	out, errs, code = e.Ctl("hooks", "install", "claude", "--root", root)
	if code != 0 || !strings.Contains(out, "changed") {
		t.Fatalf("install: exit %d %s\n%s", code, errs, out)
	}
	b, _ := os.ReadFile(settings)
	if !strings.Contains(string(b), e.Sessionctl) || !strings.Contains(string(b), "hook claude") || !strings.Contains(string(b), `"theme": "dark"`) {
		t.Fatalf("installed settings:\n%s", b)
	}
	var st []struct {
		Path    string
		Events  []string
		Missing []string
	}
	e.CtlJSON(&st, "hooks", "status", "claude", "--root", root)
	if len(st) != 1 || len(st[0].Events) == 0 || len(st[0].Missing) != 0 {
		t.Fatalf("status: %+v", st)
	}
	if out, _, code = e.Ctl("hooks", "install", "claude", "--root", root); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("second install: %s", out)
	}
	if out, errs, code = e.Ctl("hooks", "uninstall", "claude", "--root", root); code != 0 {
		t.Fatalf("uninstall: exit %d %s %s", code, out, errs)
	}
	if b, _ := os.ReadFile(settings); string(b) != orig {
		t.Fatalf("after uninstall:\n%q\nwant:\n%q", b, orig)
	}
	if _, errs, code = e.Ctl("hooks", "install", "nope"); code != exitUsage {
		t.Fatalf("unknown agent: exit %d %s", code, errs)
	}
	if _, errs, code = e.Ctl("hooks", "install", "codex", "--root", filepath.Join(e.Home, "missing")); code != exitError || !strings.Contains(errs, "missing") {
		t.Fatalf("missing root: exit %d %s", code, errs)
	}
}

// The settings file of a dotfiles repository, linked into the root:
// written through the link, which stays; put back byte for byte. An
// event that is not an array is refused with exit 1, naming the file and
// the event, and nothing is written.
func TestHooksInstallActsSafely(t *testing.T) {
	e := daemontest.NewEnv(t)
	root := filepath.Join(e.Home, "claude-root")
	dots := filepath.Join(e.Home, "dotfiles")
	for _, d := range []string{root, dots} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	settings := filepath.Join(root, "settings.json")
	target := filepath.Join(dots, "claude-settings.json")
	orig := "{\n  \"cleanupPeriodDays\": 12345678901234567890,\n  \"ratio\": 1.0\n}\n"
	if err := os.WriteFile(target, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../dotfiles/claude-settings.json", settings); err != nil {
		t.Fatal(err)
	}
	out, errs, code := e.Ctl("hooks", "install", "claude", "--root", root, "--dry-run")
	if b, _ := os.ReadFile(target); code != 0 || string(b) != orig || !strings.Contains(out, "would change") {
		t.Fatalf("dry run through a link: exit %d %s\n%s\nfile:\n%s", code, errs, out, b)
	}
	if _, err := os.Lstat(settings + ".sessiond-backup"); !os.IsNotExist(err) {
		t.Fatalf("dry run wrote a backup: %v", err)
	}
	out, errs, code = e.Ctl("hooks", "install", "claude", "--root", root)
	if code != 0 || !strings.Contains(out, "the link stays") {
		t.Fatalf("install through a link: exit %d %s\n%s", code, errs, out)
	}
	if l, err := os.Readlink(settings); err != nil || l != "../dotfiles/claude-settings.json" {
		t.Fatalf("after install, %s -> %q, %v: want the link kept", settings, l, err)
	}
	b, _ := os.ReadFile(target)
	if !strings.Contains(string(b), "hook claude") || !strings.Contains(string(b), "12345678901234567890") || !strings.Contains(string(b), "1.0") {
		t.Fatalf("the linked file after install:\n%s", b)
	}
	if out, errs, code = e.Ctl("hooks", "uninstall", "claude", "--root", root); code != 0 {
		t.Fatalf("uninstall: exit %d %s %s", code, out, errs)
	}
	if l, err := os.Readlink(settings); err != nil || l != "../dotfiles/claude-settings.json" {
		t.Fatalf("after uninstall, %s -> %q, %v: want the link kept", settings, l, err)
	}
	if b, _ := os.ReadFile(target); string(b) != orig {
		t.Fatalf("the linked file after uninstall:\n%q\nwant:\n%q", b, orig)
	}

	bad := `{"hooks": {"Stop": {"hooks": [{"type": "command", "command": "say done"}]}}}`
	if err := os.WriteFile(target, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code = e.Ctl("hooks", "install", "claude", "--root", root)
	if code != exitError || !strings.Contains(errs, settings) || !strings.Contains(errs, `"Stop"`) || !strings.Contains(errs, "not an array") {
		t.Fatalf("an event that is not an array: exit %d, stderr %q; want exit 1 naming %s and Stop", code, errs, settings)
	}
	t.Logf("refused: %s", strings.TrimSpace(errs))
	if b, _ := os.ReadFile(target); string(b) != bad {
		t.Fatalf("the refused file changed:\n%s", b)
	}
	if _, err := os.Lstat(settings + ".sessiond-backup"); !os.IsNotExist(err) {
		t.Fatalf("a backup was written for a refused install: %v", err)
	}
}

// Two `hooks install` at once (the same command, or another socket)
// leave a valid file with sessiond's hooks, from one of them whole, and
// a backup that puts the file back byte for byte; the one that finds
// the file written by the other under it says so and exits 1.
func TestHooksInstallConcurrent(t *testing.T) {
	e := daemontest.NewEnv(t)
	orig := "{\n\t\"model\": \"opus\",\n\t\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"say done\"}]}]},\n\t\"big\": 12345678901234567890\n}\n"
	changed := 0
	for round := range 6 {
		root := filepath.Join(e.Home, fmt.Sprintf("root%d", round))
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		settings := filepath.Join(root, "settings.json")
		if err := os.WriteFile(settings, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
		sockets := []string{"/run/a.sock", "/run/a.sock"}
		if round%2 == 1 {
			sockets[1] = "/run/b.sock"
		}
		var cmds []*exec.Cmd
		var stderrs []*bytes.Buffer
		for _, sock := range sockets {
			cmd := exec.Command(e.Sessionctl, "--socket", sock, "hooks", "install", "claude", "--root", root)
			cmd.Env = e.Environ()
			var errb bytes.Buffer
			cmd.Stderr = &errb
			cmds, stderrs = append(cmds, cmd), append(stderrs, &errb)
		}
		for _, c := range cmds {
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
		}
		ok := 0
		for i, c := range cmds {
			err := c.Wait()
			code := 0
			if ee, isExit := err.(*exec.ExitError); isExit {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			switch {
			case code == 0:
				ok++
			case code == exitError && strings.Contains(stderrs[i].String(), "changed since it was read"):
				changed++
				t.Logf("round %d: %s", round, strings.TrimSpace(stderrs[i].String()))
			default:
				t.Fatalf("round %d: install with %s: exit %d: %s", round, sockets[i], code, stderrs[i].String())
			}
		}
		if ok == 0 {
			t.Fatalf("round %d: neither install succeeded", round)
		}
		b, _ := os.ReadFile(settings)
		if !json.Valid(b) || !strings.Contains(string(b), `"say done"`) || !strings.Contains(string(b), "12345678901234567890") {
			t.Fatalf("round %d: the file after two installs at once:\n%s", round, b)
		}
		var st []struct {
			Missing  []string
			Commands []string
			Backup   bool
		}
		e.CtlJSON(&st, "hooks", "status", "claude", "--root", root)
		if len(st) != 1 || len(st[0].Missing) != 0 || len(st[0].Commands) != 1 || !st[0].Backup {
			t.Fatalf("round %d: status after two installs at once: %+v\n%s", round, st, b)
		}
		if out, errs, code := e.Ctl("hooks", "uninstall", "claude", "--root", root); code != 0 {
			t.Fatalf("round %d: uninstall: exit %d %s %s", round, code, out, errs)
		}
		if b, _ := os.ReadFile(settings); string(b) != orig {
			t.Fatalf("round %d: after uninstall:\n%q\nwant:\n%q", round, b, orig)
		}
	}
	t.Logf("%d of 12 installs found the file changed under them", changed)
}

// Codex's app-server owns every TUI session and runs all their tools: a
// tool of one session that posts a hook naming another descends from that
// other session's owner too. Its CODEX_THREAD_ID (the tool's own session)
// gives it away, and the hook is refused; the agent's own hook (no such
// variable) is taken.
func TestHookFromAToolOfAnotherCodexSession(t *testing.T) {
	e := daemontest.NewEnv(t)
	const other = "01a2108f-0000-7000-8000-00000000000a"
	payload := filepath.Join(e.Dir, "payload.json")
	if err := os.WriteFile(payload, []byte(permissionPayload), 0o644); err != nil {
		t.Fatal(err)
	}
	// The owner of both sessions: a shell that, when told, runs the hook
	// first as a tool of the other session, then as itself.
	_, step, oid := startOwnerShell(t, e, `read go; CODEX_THREAD_ID="$3" "$0" --socket "$1" hook codex --verbose < "$2" 2>"$4.tool"; read go; "$0" --socket "$1" hook codex --verbose < "$2" 2>"$4.own"; exec sleep 300`,
		e.Sessionctl, e.Socket, payload, other, filepath.Join(e.Dir, "said"))
	const id = "c0de00000002"
	for i, up := range []string{"01a2108f-4c6c-7c41-a692-d6ed6edf0c4c", other} {
		e.Seed(&session.Record{ID: fmt.Sprintf("c0de0000000%d", i+2), Agent: "codex", UpstreamID: up, Status: session.StatusRunning,
			Activity: session.ActivityBusy, Owner: &oid, Cwd: "/tmp/w", CreatedAt: time.Now(), Problems: []session.Problem{}})
	}
	e.StartDaemon()
	said := func(which string) string {
		var b []byte
		for deadline := time.Now().Add(5 * time.Second); len(b) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			b, _ = os.ReadFile(filepath.Join(e.Dir, "said."+which))
		}
		return string(b)
	}

	step.Write([]byte("go\n"))
	if s := said("tool"); !strings.Contains(s, `"taken":false`) || !strings.Contains(s, "is a tool of codex session "+other) {
		t.Fatalf("the hook from a tool of another session: %s", s)
	}
	time.Sleep(1500 * time.Millisecond) // several passes (200 ms each)
	if s := e.Show(id); s.Activity != session.ActivityBusy || s.WaitingFor != nil {
		t.Fatalf("a hook from a tool of another session was taken: %s %+v", s.Activity, s.WaitingFor)
	}

	step.Write([]byte("go\n"))
	if s := said("own"); !strings.Contains(s, `"taken":true`) {
		t.Fatalf("the owner's own hook: %s", s)
	}
	testWait := func() api.Session {
		var s api.Session
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if s = e.Show(id); s.Activity == session.ActivityWaiting || time.Now().After(deadline) {
				return s
			}
		}
	}
	if s := testWait(); s.Activity != session.ActivityWaiting || s.WaitingFor == nil || s.WaitingFor.Kind != session.WaitingPermission {
		t.Fatalf("after the owner's own hook: %s %+v", s.Activity, s.WaitingFor)
	}
}

// startOwnerShell starts `sh -c script args...` in e's environment as a
// session's owner, which goes on each time a line is written to step;
// it is killed when the test ends.
func startOwnerShell(t *testing.T, e *daemontest.Env, script string, args ...string) (owner *exec.Cmd, step io.Writer, id proc.Identity) {
	t.Helper()
	owner = exec.Command("sh", append([]string{"-c", script}, args...)...)
	owner.Env = e.Environ()
	in, err := owner.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { owner.Process.Kill(); owner.Wait() })
	if id, err = proc.NewHost().Identify(owner.Process.Pid); err != nil {
		t.Fatal(err)
	}
	return owner, in, id
}
