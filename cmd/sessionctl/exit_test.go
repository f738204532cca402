package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// exitCase is one command line, the exit code it must end with and what
// its stderr must say (nothing at all for exit 0).
type exitCase struct {
	args []string
	code int
	says string
}

func checkExits(t *testing.T, cases []exitCase) {
	t.Helper()
	for _, c := range cases {
		_, errs, code := ctl(c.args...)
		if code != c.code || !strings.Contains(errs, c.says) || (c.code == exitOK && errs != "") {
			t.Errorf("sessionctl %s: exit %d, want %d saying %q:\n%s", strings.Join(c.args, " "), code, c.code, c.says, errs)
		}
	}
}

// Every command's exit codes against a real daemon, as the help promises
// them: 0 ok, 1 error (the daemon refused), 2 usage, 4 not found or
// ambiguous. The cases run in order: the last stops victimID.
func TestExitCodes(t *testing.T) {
	w := newWorld(t)
	const usage = "Run 'sessionctl --help' for usage."
	checkExits(t, []exitCase{
		{[]string{"ls"}, exitOK, ""},
		{[]string{"list", "--all", "--agent", "claude"}, exitOK, ""},
		{[]string{"nosuch"}, exitUsage, `unknown command "nosuch" for "sessionctl"`},
		{[]string{"ls", "extra"}, exitUsage, usage},
		{[]string{"ls", "--bogus"}, exitUsage, "unknown flag: --bogus"},
		{[]string{"ls", "--status", "bogus"}, exitError, `unknown status "bogus"`},

		{[]string{"show", runningID}, exitOK, ""},
		{[]string{"show", "5e55000000a"}, exitOK, ""},
		{[]string{"show"}, exitUsage, "show takes one session id"},
		{[]string{"show", ""}, exitUsage, "show takes one session id, not an empty string"},
		{[]string{"show", "nope"}, exitNotFound, `no session matches "nope"`},
		{[]string{"show", "5e55"}, exitNotFound, "candidates: " + runningID + " " + stoppedID},

		{[]string{"events"}, exitOK, ""},
		{[]string{"events", "--since", "2"}, exitOK, ""},
		{[]string{"events", "extra"}, exitUsage, "events takes no arguments"},
		{[]string{"events", "--since", "x"}, exitUsage, `invalid argument "x" for "--since"`},

		{[]string{"health"}, exitOK, ""},
		{[]string{"health", "extra"}, exitUsage, "health takes no arguments"},

		{[]string{"version"}, exitOK, ""},
		{[]string{"version", "extra"}, exitUsage, "version takes no arguments"},

		{[]string{"launch", "--agent", "claude", "--cwd", w.proj, "--prompt", "list the files"}, exitOK, ""},
		{[]string{"launch", "--cwd", w.proj}, exitUsage, "launch needs --agent"},
		{[]string{"launch", "--agent", "claude", "--env", "NOVALUE"}, exitUsage, `--env "NOVALUE": want KEY=VALUE`},
		{[]string{"launch", "--agent", "nosuch", "--cwd", w.proj}, exitError, `unknown agent "nosuch"`},

		{[]string{"resume"}, exitUsage, "resume takes one session id"},
		{[]string{"resume", "nope"}, exitNotFound, `no session matches "nope"`},
		{[]string{"resume", runningID, "--prompt", "again"}, exitError, "has no resume cursor yet"},

		{[]string{"repair", stoppedID}, exitOK, ""},
		{[]string{"repair"}, exitUsage, "repair takes one session id"},
		{[]string{"repair", stoppedID, "--force"}, exitUsage, "unknown flag: --force"},
		{[]string{"repair", "nope"}, exitNotFound, `no session matches "nope"`},

		{[]string{"abort", stoppedID}, exitOK, ""},
		{[]string{"abort", runningID}, exitError, "use stop"},
		{[]string{"abort"}, exitUsage, "abort takes one session id"},
		{[]string{"abort", "5e55"}, exitNotFound, "candidates:"},

		{[]string{"reap", stoppedID}, exitOK, ""},
		{[]string{"reap", runningID}, exitError, "its tool processes are not orphans"},
		{[]string{"reap", stoppedID, "--timeout", "30s"}, exitError, `timeout "30s": want a duration between 0 and 25s`},
		{[]string{"reap", "a", "b"}, exitUsage, "reap takes one session id"},
		{[]string{"reap", "nope"}, exitNotFound, `no session matches "nope"`},

		{[]string{"stop", stoppedID}, exitError, "is not running"},
		{[]string{"stop", victimID, "--timeout", "soon"}, exitUsage, `invalid argument "soon" for "--timeout"`},
		{[]string{"stop"}, exitUsage, "stop takes one session id"},
		{[]string{"stop", "nope"}, exitNotFound, `no session matches "nope"`},
		{[]string{"stop", victimID, "--timeout", "2s"}, exitOK, ""},
		{[]string{"stop", victimID}, exitError, "is not running (stopped)"},
	})
}

// With no daemon on the socket every command that asks it exits 3 and
// says so; version still answers for sessionctl, with exit 0.
func TestUnreachableExitsThree(t *testing.T) {
	d, err := os.MkdirTemp("", "sc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	sock := filepath.Join(d, "none.sock")
	var cases []exitCase
	for _, args := range [][]string{{"ls"}, {"show", "x"}, {"events"}, {"health"}, {"launch", "--agent", "claude", "--cwd", d},
		{"resume", "x"}, {"repair", "x"}, {"abort", "x"}, {"reap", "x"}, {"stop", "x"}} {
		cases = append(cases, exitCase{append([]string{"--socket", sock}, args...), exitUnreachable, "not reachable"})
	}
	cases = append(cases, exitCase{[]string{"--socket", sock, "version"}, exitOK, ""})
	checkExits(t, cases)
	if out, _, _ := ctl("--socket", sock, "version"); !strings.Contains(out, "sessiond   (not reachable at "+sock+")") {
		t.Errorf("version without a daemon:\n%s", out)
	}
}

// A daemon that answers with an error (here a 500 for everything) makes
// every command that asks it exit 1, naming the daemon's message.
func TestDaemonErrorExitsOne(t *testing.T) {
	d, err := os.MkdirTemp("", "sc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	sock := filepath.Join(d, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":"the store is unreadable (test)","code":"internal"}`)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	var cases []exitCase
	for _, args := range [][]string{{"ls"}, {"show", "x"}, {"events"}, {"health"}, {"launch", "--agent", "claude", "--cwd", d},
		{"resume", "x"}, {"repair", "x"}, {"abort", "x"}, {"reap", "x"}, {"stop", "x"}} {
		cases = append(cases, exitCase{append([]string{"--socket", sock}, args...), exitError, "the store is unreadable (test)"})
	}
	checkExits(t, cases)
}
