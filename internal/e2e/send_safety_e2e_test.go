package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/lib/shell"
	"github.com/sessiond/sessiond/session"
)

// shellPane is a tmux pane running an interactive bash, as a user's
// terminal: the test types the fake claude into it, as people start
// claude. The shell writes its history after every command, so a test
// can tell whether anything reached it.
type shellPane struct {
	e       *env
	socket  string
	id      string
	history string
	prompts string // the fake claude's log of the prompts it took
}

func newShellPane(e *env) *shellPane {
	t := e.T
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed (.ci/run installs it): sending into a pane not tested")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed: a user's shell pane not tested")
	}
	// A user who runs claude has its config root: sessiond watches it from
	// the start (a test with no passes due relies on the watch).
	for _, d := range []string{"sessions", "projects"} {
		if err := os.MkdirAll(filepath.Join(e.Home, ".claude", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	p := &shellPane{e: e, socket: filepath.Join(e.Dir, "t.sock"), history: filepath.Join(e.Dir, "history"), prompts: filepath.Join(e.Dir, "prompts")}
	cmd := exec.Command("tmux", "-S", p.socket, "-f", "/dev/null", "new-session", "-d", "-x", "160", "-y", "40", "-P", "-F", "#{pane_id}",
		"bash", "--norc", "--noprofile", "-i")
	cmd.Env = append(e.Environ(), "PS1=$ ", "HISTFILE="+p.history, "PROMPT_COMMAND=history -a")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tmux new-session: %v", err)
	}
	t.Cleanup(func() { exec.Command("tmux", "-S", p.socket, "kill-server").Run() })
	p.id = strings.TrimSpace(string(out))
	testenv.Eventually(t, 5*time.Second, "the shell's prompt", func() bool { return strings.Contains(p.capture(), "$") })
	return p
}

func (p *shellPane) capture() string {
	out, _ := exec.Command("tmux", "-S", p.socket, "capture-pane", "-p", "-t", p.id).Output()
	return string(out)
}

// typeLine types text and Enter, as the user at the pane.
func (p *shellPane) typeLine(text string) {
	p.e.T.Helper()
	for _, keys := range [][]string{{"-l", text}, {"Enter"}} {
		if out, err := exec.Command("tmux", append([]string{"-S", p.socket, "send-keys", "-t", p.id}, keys...)...).CombinedOutput(); err != nil {
			p.e.T.Fatalf("send-keys: %v: %s", err, out)
		}
	}
}

func (p *shellPane) keys(keys ...string) {
	p.e.T.Helper()
	if out, err := exec.Command("tmux", append([]string{"-S", p.socket, "send-keys", "-t", p.id}, keys...)...).CombinedOutput(); err != nil {
		p.e.T.Fatalf("send-keys: %v: %s", err, out)
	}
}

// startClaude types the fake claude into the shell, with env knobs, and
// waits until sessiond shows its session running and idle in this pane.
// It returns the session and the fake's pid.
func (p *shellPane) startClaude(proj string, knobs ...string) (api.Session, int) {
	e := p.e
	knobs = append(knobs, "FAKE_CLAUDE_PROMPT_LOG="+p.prompts)
	p.typeLine("cd " + shell.Quote(proj) + " && " + strings.Join(knobs, " ") + " " + shell.Quote(fakeClaude(e.T)))
	var s api.Session
	testenv.EventuallyOK(e.T, 15*time.Second, "the typed claude running and idle in its pane", func() (bool, string) {
		var all api.SessionList
		e.CtlJSON(&all, "ls", "--all")
		for _, x := range all.Sessions {
			if x.Cwd == proj && x.Status == session.StatusRunning {
				s = x
			}
		}
		return s.Activity == session.ActivityIdle && s.Pane != nil && s.Pane.ID == p.id, fmt.Sprintf("%+v\n%s", s, p.capture())
	})
	return s, s.PID
}

// taken is the prompts the fake claude took, in order.
func (p *shellPane) taken() []string {
	f, err := os.Open(p.prompts)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var s string
		if json.Unmarshal(sc.Bytes(), &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

func (p *shellPane) shellHistory() string {
	b, _ := os.ReadFile(p.history)
	return string(b)
}

// Two prompts sent at once to one idle session: each arrives whole and
// once, or is refused; a prompt is never reported delivered when it did
// not arrive. (Both went in before: they were typed over each other, and
// both answered "delivered".)
func TestSendTwoAtOnce(t *testing.T) {
	e, proj := launchEnv(t)
	p := newShellPane(e)
	e.StartDaemon("--claude-bin", fakeClaude(t))
	s, _ := p.startClaude(proj)

	const n = 4
	type result struct {
		prompt, out, errs string
		code              int
	}
	res := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prompt := fmt.Sprintf("prompt number %d of %d, to arrive whole", i, n)
			out, errs, code := e.Ctl("send", s.ID, prompt)
			res[i] = result{prompt, out, errs, code}
		}()
	}
	wg.Wait()
	var delivered []string
	for _, r := range res {
		switch {
		case r.code == 0 && strings.Contains(r.out, "delivered"):
			delivered = append(delivered, r.prompt)
		case r.code == 1 && strings.Contains(r.errs, "has not taken it up yet"):
		default:
			t.Errorf("send %q: exit %d %q %q; want delivered, or refused while another prompt is taken up", r.prompt, r.code, r.out, r.errs)
		}
	}
	if len(delivered) == 0 {
		t.Fatalf("none of %d prompts was delivered: %+v", n, res)
	}
	testenv.EventuallyOK(t, 10*time.Second, "every delivered prompt taken", func() (bool, string) {
		return len(p.taken()) >= len(delivered), fmt.Sprintf("taken %q, delivered %q\n%s", p.taken(), delivered, p.capture())
	})
	time.Sleep(500 * time.Millisecond) // room for a prompt that should not be there
	got := p.taken()
	slices.Sort(got)
	slices.Sort(delivered)
	if !slices.Equal(got, delivered) {
		t.Fatalf("the fake claude took %q; delivered were %q", got, delivered)
	}
}

// The agent in a shell pane exits, and sessiond has not noticed (exits
// noticed only by polling, and no pass due): a send types nothing into
// the shell under it, which would run it. The same for a suspended agent,
// and a queued prompt waits until the agent is back in its pane.
func TestSendNeverTypesIntoTheShell(t *testing.T) {
	e, proj := launchEnv(t)
	p := newShellPane(e)
	e.StartDaemon("--claude-bin", fakeClaude(t), "--no-exit-events", "--reconcile-interval", "1h")
	s, pid := p.startClaude(proj)
	marker := filepath.Join(e.Dir, "ran")
	command := "touch " + marker

	// Suspended (^Z): the shell has the terminal.
	p.keys("C-z")
	testenv.EventuallyOK(t, 5*time.Second, "the agent suspended", func() (bool, string) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		return strings.Contains(string(b), ") T "), string(b)
	})
	_, errs, code := e.Ctl("send", s.ID, command)
	if code != 1 || !strings.Contains(errs, "nothing was typed") || !strings.Contains(errs, "stopped (suspended)") {
		t.Errorf("send to a suspended agent: exit %d %q; want 1 and why nothing was typed", code, errs)
	}
	var q api.SendResponse
	e.CtlJSON(&q, "send", s.ID, "--when-idle", "a queued prompt for when it is back")
	if q.Queued == nil || !strings.Contains(q.Queued.Error, "suspended") {
		t.Fatalf("send --when-idle to a suspended agent: %+v; want it queued, saying why it waits", q)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil || strings.Contains(p.shellHistory(), "touch") {
		t.Fatalf("the shell ran the prompt:\n%s", p.capture())
	}
	p.typeLine("fg")
	testenv.EventuallyOK(t, 20*time.Second, "the queued prompt taken once the agent was back", func() (bool, string) {
		return len(p.taken()) == 1 && p.taken()[0] == "a queued prompt for when it is back", fmt.Sprintf("%q\n%s", p.taken(), p.capture())
	})

	// Exited a moment before: killed; no exit event, no pass.
	testenv.EventuallyOK(t, 10*time.Second, "idle again after the queued turn", func() (bool, string) {
		x := e.Show(s.ID)
		return x.Activity == session.ActivityIdle && !x.PromptAt.IsZero() && x.ActivitySince.After(*x.PromptAt), fmt.Sprintf("%+v", x)
	})
	syscall.Kill(pid, syscall.SIGKILL)
	testenv.EventuallyOK(t, 5*time.Second, "the shell's prompt back", func() (bool, string) {
		return strings.Contains(p.capture(), "Killed"), p.capture()
	})
	if x := e.Show(s.ID); x.Status != session.StatusRunning || x.Activity != session.ActivityIdle {
		t.Fatalf("sessiond noticed the exit already (%s/%s): the test does not test the blind spot", x.Status, x.Activity)
	}
	_, errs, code = e.Ctl("send", s.ID, command)
	if code != 1 || !strings.Contains(errs, "nothing was typed") || !strings.Contains(errs, "is gone") {
		t.Errorf("send after the agent exited: exit %d %q; want 1 and why nothing was typed", code, errs)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the shell ran the prompt typed into it:\n%s", p.capture())
	}
	if h := p.shellHistory(); strings.Contains(h, "touch") || strings.Contains(p.capture(), "touch") {
		t.Fatalf("the prompt reached the shell: history %q\n%s", h, p.capture())
	}
}

// The prompt a session was handed is recorded on it: until the session
// shows activity after it, another is refused or stays queued, also
// after sessiond restarts (the gate lived in memory, and a direct send
// had none).
func TestSendWaitsForTheLastPromptAcrossRestarts(t *testing.T) {
	e, proj := launchEnv(t)
	p := newShellPane(e)
	args := []string{"--claude-bin", fakeClaude(t)}
	d := e.StartDaemon(args...)
	s, _ := p.startClaude(proj, "FAKE_CLAUDE_TAKE_AFTER=6s")
	if out, errs, code := e.Ctl("send", s.ID, "first"); code != 0 {
		t.Fatalf("send first: exit %d %q %q", code, out, errs)
	}
	x := e.Show(s.ID)
	if x.PromptAt == nil || x.Activity != session.ActivityIdle {
		t.Fatalf("after the send: %+v; want idle with prompt_delivered_at", x)
	}
	if _, errs, code := e.Ctl("send", s.ID, "second"); code != 1 || !strings.Contains(errs, "has not taken it up yet") {
		t.Errorf("a second send while the first is not taken up: exit %d %q", code, errs)
	}
	d.Kill()
	e.StartDaemon(args...)
	if _, errs, code := e.Ctl("send", s.ID, "third"); code != 1 || !strings.Contains(errs, "has not taken it up yet") {
		t.Errorf("a send after a restart while the first is not taken up: exit %d %q", code, errs)
	}
	var q api.SendResponse
	e.CtlJSON(&q, "send", s.ID, "--when-idle", "fourth")
	if q.Queued == nil {
		t.Fatalf("--when-idle: %+v", q)
	}
	testenv.EventuallyOK(t, 30*time.Second, "the first taken, then the queued one", func() (bool, string) {
		return len(p.taken()) == 2, fmt.Sprintf("%q", p.taken())
	})
	time.Sleep(time.Second)
	if got := strings.Join(p.taken(), "|"); got != "first|fourth" {
		t.Fatalf("the agent took %q, want first|fourth", got)
	}
}

// A stop cancels the session's queued prompts: one queued before would
// resume the session its user just stopped.
func TestStopCancelsQueuedPrompts(t *testing.T) {
	e, proj := launchEnv(t)
	p := newShellPane(e)
	e.StartDaemon("--claude-bin", fakeClaude(t))
	s, _ := p.startClaude(proj, "FAKE_CLAUDE_TURN=60s")
	if _, errs, code := e.Ctl("send", s.ID, "a long turn"); code != 0 {
		t.Fatalf("send: exit %d %q", code, errs)
	}
	testenv.EventuallyOK(t, 10*time.Second, "busy", func() (bool, string) {
		x := e.Show(s.ID)
		return x.Activity == session.ActivityBusy, string(x.Activity)
	})
	var q api.SendResponse
	e.CtlJSON(&q, "send", s.ID, "--when-idle", "after the long turn")
	if q.Queued == nil {
		t.Fatalf("--when-idle: %+v", q)
	}
	res, errs, code := e.action("stop", s.ID)
	if code != 0 {
		t.Fatalf("stop: exit %d %q", code, errs)
	}
	found := false
	for _, st := range res.Steps {
		found = found || st.Action == "cancel the queued prompts" && st.Outcome == "done"
	}
	if !found {
		t.Errorf("stop's steps do not say the queued prompt was cancelled: %+v", res.Steps)
	}
	e.waitStatus(s.ID, session.StatusInterrupted, 10*time.Second)
	time.Sleep(2 * time.Second) // passes enough for the queue to resume it, if it would
	var all []session.Send
	e.CtlJSON(&all, "sends", s.ID, "--all")
	if len(all) != 1 || all[0].State != session.SendCancelled || !strings.Contains(all[0].Error, "stopped") {
		t.Fatalf("the queued prompt after the stop: %+v", all)
	}
	if x := e.Show(s.ID); x.Status == session.StatusStarting || x.Status == session.StatusRunning {
		t.Fatalf("the stopped session was resumed: %+v", x)
	}
}
