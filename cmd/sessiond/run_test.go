package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/lib/buildinfo"
)

// --help prints to stderr (as the flag package does) every flag, the
// signals and the exit codes, and exits 0.
func TestHelpNamesEveryFlag(t *testing.T) {
	isolate(t)
	for _, arg := range []string{"--help", "-h"} {
		var stdout, stderr bytes.Buffer
		if code := runWithin(t, 10*time.Second, []string{arg}, &stdout, &stderr); code != ExitOK {
			t.Fatalf("%s: exit %d:\n%s", arg, code, stderr.String())
		}
		help := stderr.String()
		for _, flag := range []string{"state-dir", "socket", "claude-dir", "claude-bin", "claude-learn-roots",
			"opencode-dir", "opencode-bin", "opencode-repair-grace", "reconcile-interval", "grace", "stall-after",
			"log-level", "log-format", "no-exit-events", "auto-repair", "version"} {
			if !strings.Contains(help, "\n  -"+flag+" ") && !strings.Contains(help, "\n  -"+flag+"\n") {
				t.Errorf("%s does not list -%s:\n%s", arg, flag, help)
			}
		}
		for _, more := range []string{"$SESSIOND_STATE_DIR", "$SESSIOND_SOCKET", "SIGHUP", "Exit codes", "17 another sessiond"} {
			if !strings.Contains(help, more) {
				t.Errorf("%s does not mention %s:\n%s", arg, more, help)
			}
		}
		if stdout.Len() != 0 {
			t.Errorf("%s printed to stdout: %q", arg, stdout.String())
		}
	}
}

// --version prints one line to stdout and exits 0 without serving.
func TestVersion(t *testing.T) {
	isolate(t)
	var stdout, stderr bytes.Buffer
	if code := runWithin(t, 10*time.Second, []string{"--version"}, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	if got, want := stdout.String(), "sessiond "+buildinfo.Version(version)+"\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
}

// A bad command line exits 2 at once, naming what is wrong.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--bogus"}, "bogus"},
		{[]string{"serve"}, `unexpected argument "serve"`},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--grace", "soon"}, "grace"},
		{[]string{"--grace", "-1s"}, "--grace must be positive"},
		{[]string{"--auto-repair", "everything"}, "everything"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			d := isolate(t)
			var stderr bytes.Buffer
			args := append([]string{"--state-dir", filepath.Join(d, "state"), "--socket", filepath.Join(d, "s.sock")}, c.args...)
			if code := runWithin(t, 10*time.Second, args, nil, &stderr); code != ExitUsage || !strings.Contains(stderr.String(), c.says) {
				t.Errorf("exit %d, want %d saying %q:\n%s", code, ExitUsage, c.says, stderr.String())
			}
		})
	}
}

// sessiond serves its API on the socket it is given, with both agents'
// adapters, until its context ends (as on SIGTERM), then exits 0. A second
// sessiond on the same store, or on the same socket, exits 17 at once.
func TestServesUntilItsContextEnds(t *testing.T) {
	d := isolate(t)
	sock := filepath.Join(d, "s.sock")
	stateDir := filepath.Join(d, "state")
	args := []string{"--state-dir", stateDir, "--socket", sock, "--claude-learn-roots=false", "--reconcile-interval", "200ms"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr daemontest.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, io.Discard, &stderr) }()

	c := api.NewClient(sock)
	if err := c.WaitReady(context.Background(), 10*time.Second); err != nil {
		cancel()
		<-done
		t.Fatalf("not serving on %s: %v\n%s", sock, err, stderr.String())
	}
	h, err := c.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.PID != os.Getpid() || h.Socket != sock || filepath.Dir(h.StorePath) != stateDir || h.Version != buildinfo.Version(version) {
		t.Errorf("health %+v: want this process, socket %s, a store in %s, version %s", h, sock, stateDir, buildinfo.Version(version))
	}
	adapters := map[string]bool{}
	for _, a := range h.Adapters {
		adapters[a.Name] = true
	}
	if !adapters["claude"] || !adapters["opencode"] {
		t.Errorf("adapters %+v, want claude and opencode", h.Adapters)
	}

	for what, second := range map[string][]string{
		"the same store":  {"--state-dir", stateDir, "--socket", filepath.Join(d, "t.sock"), "--claude-learn-roots=false"},
		"the same socket": {"--state-dir", filepath.Join(d, "other"), "--socket", sock, "--claude-learn-roots=false"},
	} {
		var errs bytes.Buffer
		if code := runWithin(t, 10*time.Second, second, nil, &errs); code != ExitAlreadyRunning || !strings.Contains(errs.String(), "another sessiond is already running") {
			t.Errorf("a second sessiond on %s: exit %d, want %d:\n%s", what, code, ExitAlreadyRunning, errs.String())
		}
	}

	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Fatalf("exit %d after its context ended, want 0:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("still serving 10s after its context ended:\n%s", stderr.String())
	}
}
