package reactions

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// A title, a folder, a reason or a waiting text come from agents' files
// and may hold a NUL or other control characters. exec refuses an
// environment or an argument with a NUL, which failed every hooks.d run
// and notification of such a change: they run, with the characters
// dropped (a newline or a tab is a space).
func TestControlCharactersDoNotStopHooksOrNotifications(t *testing.T) {
	hooks, out, bin := t.TempDir(), filepath.Join(t.TempDir(), "env"), t.TempDir()
	writeHook(t, hooks, "10-env", `printf '%s|%s|%s|%s\n' "$SESSIOND_TITLE" "$SESSIOND_CWD" "$SESSIOND_REASON" "$SESSIOND_ID" >> `+out+"\n", 0o700)
	args := filepath.Join(t.TempDir(), "args")
	writeHook(t, bin, "notify-send", `for a; do printf '%s|' "$a"; done >> `+args+"; echo >> "+args+"\n", 0o700)
	t.Setenv("PATH", bin)
	n, err := FindNotifier()
	if err != nil {
		t.Fatal(err)
	}
	r := New(Config{HooksDir: hooks, Notifier: n, Timeout: 5 * time.Second})
	defer r.Close()
	r.Seed(rec("a1", session.StatusRunning, session.ActivityBusy))

	odd := rec("a1", session.StatusRunning, session.ActivityWaiting)
	odd.Title, odd.Cwd = "fix\x00 the\tbuild\n\x1b[31mnow", "/src/a\x00p\np"
	perm := &session.WaitingFor{Kind: session.WaitingPermission, Tool: "Ba\x00sh", Input: "rm -rf \x1b]0;x\x07build\r\nok"}
	e := ev(1, session.EventUpdated, "a1", "running", "running", "waiting", perm)
	e.Reason = "why\x00 not\u0085"
	r.Observe(e, odd)

	testenv.Eventually(t, 10*time.Second, "the hook ran and the notification went out", func() bool {
		return len(lines(t, out)) == 1 && len(lines(t, args)) == 1
	})
	if got, want := lines(t, out)[0], "fix the build [31mnow|/src/ap p|why not|a1"; got != want {
		t.Errorf("the hook's environment: %q, want %q", got, want)
	}
	got := lines(t, args)[0]
	if want := `--app-name=sessiond|--|Claude Code "fix the build [31mnow" (a1) needs you|Permission to use Bash: rm -rf ]0;xbuild ok|`; got != want {
		t.Errorf("notify-send's arguments: %q, want %q", got, want)
	}
	testenv.Eventually(t, 5*time.Second, "both runs counted", func() bool {
		h := r.Health()
		var runs int64
		for _, x := range h.Hooks {
			runs += x.Runs
		}
		return runs == 2
	})
	for _, h := range r.Health().Hooks {
		if h.Failures != 0 {
			t.Errorf("%s failed: %+v", h.Name, h)
		}
	}
}
