package realagents

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
)

// tmuxServer is a private tmux server of one world (its own socket under
// the test dir, no user config), whose panes run a plain interactive bash
// with the world's environment: agents are started in them by typing, as
// people do.
type tmuxServer struct {
	w    *world
	sock string
	env  []string
	n    int
}

// pane is one tmux pane and the pid of the shell in it.
type pane struct {
	ts       *tmuxServer
	ID       string
	ShellPID int
}

// startTmux makes the world's tmux server (started by its first pane).
// Typing `claude` or `opencode` in a pane runs the pinned CLIs: their
// directories lead PATH.
func (w *world) startTmux(bins ...string) *tmuxServer {
	w.t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		skipLoudly(w.t, "REAL AGENTS NOT TESTED: tmux is not on PATH (%v); the interactive scenarios run the agents in tmux panes", err)
	}
	path := os.Getenv("PATH")
	for _, b := range bins {
		path = filepath.Dir(b) + string(os.PathListSeparator) + path
	}
	var env []string
	for _, kv := range w.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "TERM=") && !strings.HasPrefix(kv, "TMUX") && !ciVariable(kv) {
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+path, "TERM=xterm-256color", "SHELL=/bin/bash")
	ts := &tmuxServer{w: w, sock: filepath.Join(w.Dir, "tmux.sock"), env: env}
	w.t.Cleanup(func() { ts.run("kill-server") })
	return ts
}

// ciVariable: a variable by which a CLI tells it runs in CI (CI=true in
// .ci/run). A person's terminal has none, and Gemini CLI, seeing one,
// never starts its TUI ("No input provided via stdin").
func ciVariable(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	switch name {
	case "CI", "CONTINUOUS_INTEGRATION", "BUILD_ID", "BUILD_NUMBER", "RUN_ID", "GITHUB_ACTIONS":
		return true
	}
	return strings.HasPrefix(name, "CI_")
}

// run runs one tmux command against the world's server, bounded in time.
func (ts *tmuxServer) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-S", ts.sock, "-f", "/dev/null"}, args...)...)
	cmd.Env = ts.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tmux %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// newPane opens a window with an interactive bash in dir.
func (ts *tmuxServer) newPane(dir string) *pane {
	ts.w.t.Helper()
	shell := []string{"bash", "--norc", "--noprofile", "-i"}
	format := []string{"-P", "-F", "#{pane_id} #{pane_pid}"}
	var args []string
	if ts.n == 0 {
		args = append(append([]string{"new-session", "-d", "-s", "main", "-x", "200", "-y", "50", "-c", dir}, format...), shell...)
	} else {
		args = append(append([]string{"new-window", "-d", "-t", "main", "-c", dir}, format...), shell...)
	}
	ts.n++
	out, err := ts.run(args...)
	if err != nil {
		ts.w.t.Fatal(err)
	}
	f := strings.Fields(out)
	if len(f) != 2 || atoi(f[1]) <= 0 {
		ts.w.t.Fatalf("tmux pane: %q", out)
	}
	return &pane{ts: ts, ID: f[0], ShellPID: atoi(f[1])}
}

// typeLine types text into the pane and presses Enter, as a person would:
// the text first, then Enter once the pane shows it.
func (p *pane) typeLine(text string) {
	p.ts.w.t.Helper()
	if _, err := p.ts.run("send-keys", "-t", p.ID, "-l", text); err != nil {
		p.ts.w.t.Fatal(err)
	}
	probe := text
	if len(probe) > 20 {
		probe = probe[:20]
	}
	p.ts.w.waitFor(10*time.Second, "the pane shows the typed text", func() (bool, string) {
		s := p.capture()
		return strings.Contains(s, probe), s
	})
	p.keys("Enter")
}

// submit types a prompt into an Ink TUI (Gemini CLI, Qwen Code) and waits
// until the screen shows ack. Under load these TUIs drop an Enter that
// arrives while they still re-render the end of the previous turn: the
// prompt then sits in the input box and the turn never starts (CI run of
// 0d65838: "Run the long job" typed, never sent, 60 s lost). Enter is
// pressed again only while the input box still holds the prompt, which is
// when the box's empty-input placeholder (placeholder) is missing and ack
// is not yet shown; an Enter on an empty box or a screen that moved on is
// never sent.
func (p *pane) submit(text, placeholder, ack string, within time.Duration) {
	p.ts.w.t.Helper()
	p.typeLine(text)
	deadline := time.Now().Add(within)
	lastEnter := time.Now()
	presses := 1
	for {
		s := p.capture()
		if strings.Contains(s, ack) {
			if presses > 1 {
				p.ts.w.t.Logf("%q took %d Enter presses", text, presses)
			}
			return
		}
		if time.Now().After(deadline) {
			p.ts.w.t.Fatalf("the pane shows %s: not within %s after %d Enter presses; last seen:\n%s", ack, within, presses, compactScreen(s))
		}
		if !strings.Contains(s, placeholder) && time.Since(lastEnter) > 3*time.Second {
			p.keys("Enter")
			lastEnter = time.Now()
			presses++
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// keys sends tmux key names (Enter, Escape, …).
func (p *pane) keys(keys ...string) {
	p.ts.w.t.Helper()
	if _, err := p.ts.run(append([]string{"send-keys", "-t", p.ID}, keys...)...); err != nil {
		p.ts.w.t.Fatal(err)
	}
}

// capture is the pane's visible text.
func (p *pane) capture() string {
	out, err := p.ts.run("capture-pane", "-p", "-t", p.ID)
	if err != nil {
		return err.Error()
	}
	return out
}

// waitScreen waits until the pane shows want.
func (p *pane) waitScreen(within time.Duration, want string) {
	p.ts.w.t.Helper()
	p.ts.w.waitFor(within, "the pane shows "+want, func() (bool, string) {
		s := p.capture()
		return strings.Contains(s, want), compactScreen(s)
	})
}

// child finds the live process started by the pane's shell whose argv
// matches.
func (p *pane) child(match func(procInfo) bool) (procInfo, bool) {
	for _, c := range procs(func(c procInfo) bool { return c.PPID == p.ShellPID }) {
		if match(c) {
			return c, true
		}
	}
	return procInfo{}, false
}

// compactScreen drops a captured screen's blank lines and trailing blanks.
func compactScreen(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimRight(l, " "); l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// checkPane waits until the session shows p, of the world's tmux server,
// as its pane.
func (w *world) checkPane(up string, p *pane) api.Session {
	w.t.Helper()
	return w.waitUpstream(up, 5*time.Second, "in tmux pane "+p.ID+" of "+p.ts.sock, func(s api.Session) bool {
		return s.Pane != nil && s.Pane.ID == p.ID && s.Pane.Socket == p.ts.sock
	})
}
