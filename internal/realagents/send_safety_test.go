package realagents

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// Two multi-line prompts sent at once to one idle interactive claude,
// typed in a tmux pane as people run it: each prompt reaches the model
// whole and once, or is refused; they are never swapped or mixed, and a
// prompt is never reported delivered when the model never got it. (Both
// went into one tmux buffer named after the pane: one pasted the other's
// text, and both answered delivered.)
func TestClaudeTwoMultilineSendsAtOnce(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.seedClaudeHome(w.proj())
	var mu sync.Mutex
	var asked []string // the user texts that started a turn
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) {
		if n := len(r.Messages); n > 0 && len(r.Messages[n-1].ToolResults) == 0 {
			mu.Lock()
			asked = append(asked, r.LastUserText())
			mu.Unlock()
		}
		return fakemodel.Say("Read it."), true
	})
	turns := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), asked...)
	}
	w.startDaemon("--claude-bin", bin, "--grace", "5s")
	p, _, reg := w.startClaudeInPane(bin)
	w.checkPane(reg.SessionID, p)
	s := w.waitUpstream(reg.SessionID, 15*time.Second, "running and idle", runningWith(session.ActivityIdle))
	w.step("claude idle in its pane")

	prompt := func(tag string) string {
		return fmt.Sprintf("First line of prompt %s-7f2.\nSecond line of prompt %s-7f2.\nThird line of prompt %s-7f2, the last.", tag, tag, tag)
	}
	type result struct {
		tag, out, errs string
		code           int
	}
	res := make([]result, 2)
	var wg sync.WaitGroup
	for i, tag := range []string{"ALPHA", "BRAVO"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, errs, code := w.Ctl("send", s.ID, prompt(tag))
			res[i] = result{tag, out, errs, code}
		}()
	}
	wg.Wait()
	var delivered []string
	for _, r := range res {
		switch {
		case r.code == 0 && strings.Contains(r.out, "delivered"):
			delivered = append(delivered, r.tag)
		case r.code == 1 && strings.Contains(r.errs, "has not taken it up yet"):
		default:
			t.Errorf("send %s: exit %d %q %q; want delivered, or refused while the other is taken up", r.tag, r.code, r.out, r.errs)
		}
	}
	if len(delivered) == 0 {
		t.Fatalf("neither prompt was delivered: %+v", res)
	}
	w.step(fmt.Sprintf("two sends at once: %d delivered", len(delivered)))
	w.waitFor(60*time.Second, "the model got a turn for each delivered prompt", func() (bool, string) {
		return len(turns()) >= len(delivered), fmt.Sprintf("turns %q\n%s", turns(), compactScreen(p.capture()))
	})
	// Idle again after the last turn, and a moment more for a turn that
	// should not come.
	w.waitUpstream(reg.SessionID, 60*time.Second, "idle after the delivered turns", runningWith(session.ActivityIdle))
	time.Sleep(2 * time.Second)
	got := turns()
	if len(got) != len(delivered) {
		t.Fatalf("the model got %d turns %q for %d delivered prompts %v", len(got), got, len(delivered), delivered)
	}
	for i, tag := range delivered {
		text := got[i]
		for _, line := range strings.Split(prompt(tag), "\n") {
			if strings.Count(text, line) != 1 {
				t.Errorf("turn %d (%s) lacks, or repeats, the line %q: %q", i, tag, line, text)
			}
		}
		for _, other := range []string{"ALPHA", "BRAVO"} {
			if other != tag && strings.Contains(text, other) {
				t.Errorf("turn %d (%s) holds the other prompt's text: %q", i, tag, text)
			}
		}
	}
}

// The agent in a shell pane exits, and sessiond, noticing exits only by
// polling (--no-exit-events, and no pass due), still reads it running and
// idle: a send types nothing, so nothing reaches the shell under it (its
// history and a marker file a typed command would create say so).
func TestClaudeSendAfterItExited(t *testing.T) {
	bin := agentBin(t, claudeBinEnv, "@anthropic-ai/claude-code")
	w := newWorld(t)
	w.seedClaudeHome(w.proj())
	w.model.SetHandler(func(r *fakemodel.Request) (fakemodel.Reply, bool) { return fakemodel.Say("Hello."), true })
	// The config root exists, as a user's does: sessiond watches it from
	// the start, and with no pass due the watch is how it sees claude.
	for _, d := range []string{"sessions", "projects"} {
		if err := os.MkdirAll(filepath.Join(w.claudeRoot(), d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	w.startDaemon("--claude-bin", bin, "--grace", "5s", "--no-exit-events", "--reconcile-interval", "1h")
	history := filepath.Join(w.Dir, "bash_history")
	marker := filepath.Join(w.Dir, "typed-into-the-shell")
	ts := w.startTmux(bin)
	p := ts.newPane(w.proj())
	p.typeLine("export HISTFILE=" + history + " PROMPT_COMMAND='history -a' PS1='ready$ '")
	p.typeLine("claude")
	var cl procInfo
	w.waitFor(60*time.Second, "claude started in the pane, registered idle", func() (bool, string) {
		var ok bool
		if cl, ok = p.child(func(procInfo) bool { return true }); !ok {
			return false, compactScreen(p.capture())
		}
		reg, ok := readClaudeReg(w.claudeRoot(), cl.PID)
		return ok && reg.Status == "idle" && strings.Contains(p.capture(), "❯"), compactScreen(p.capture())
	})
	reg, _ := readClaudeReg(w.claudeRoot(), cl.PID)
	w.checkPane(reg.SessionID, p)
	s := w.waitUpstream(reg.SessionID, 15*time.Second, "running and idle", runningWith(session.ActivityIdle))
	w.step("claude idle in a shell's pane")

	if err := syscall.Kill(cl.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w.waitFor(10*time.Second, "the shell's prompt back in the pane", func() (bool, string) {
		// The shell's prompt is printed where the cursor was, among what
		// claude left on the screen.
		return !alive(cl.PID) && strings.Contains(p.capture(), "\nready$ "), fmt.Sprintf("alive %v\n%q", alive(cl.PID), p.capture())
	})
	if x, _ := w.session(s.ID); x.Status != session.StatusRunning || x.Activity != session.ActivityIdle {
		t.Fatalf("sessiond noticed the exit already (%s/%s): nothing tests the blind spot", x.Status, x.Activity)
	}
	w.step("claude killed; sessiond still reads it idle")
	_, errs, code := w.Ctl("send", s.ID, "touch "+marker)
	if code != 1 || !strings.Contains(errs, "nothing was typed") {
		t.Errorf("send after claude exited: exit %d %q; want 1 and why nothing was typed", code, errs)
	}
	time.Sleep(time.Second)
	if _, err := os.Stat(marker); err == nil {
		t.Fatalf("the shell ran the prompt typed into it:\n%s", compactScreen(p.capture()))
	}
	h, _ := os.ReadFile(history)
	if strings.Contains(string(h), "touch") || strings.Contains(p.capture(), "touch") {
		t.Fatalf("the prompt reached the shell: history %q\n%s", h, compactScreen(p.capture()))
	}
	w.step("send refused; nothing reached the shell")
}
