package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/daemontest"
)

// runWithin runs sessiond's main logic in-process and returns its exit
// code. A run that is expected to fail at once but serves instead is
// stopped by ending its context (run handles it as a normal stop) after
// limit, and the test fails.
func runWithin(t *testing.T, limit time.Duration, args []string, stdout, stderr *bytes.Buffer) int {
	t.Helper()
	var out, buf daemontest.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &buf) }()
	select {
	case code := <-done:
		if stdout != nil {
			stdout.WriteString(out.String())
		}
		stderr.WriteString(buf.String())
		return code
	case <-time.After(limit):
		cancel()
		<-done
		t.Fatalf("sessiond %v still ran after %s; want it to exit at once:\n%s", args, limit, buf.String())
		return -1
	}
}

// isolate points everything sessiond reads from the environment at a
// fresh directory and returns it. The directory is short: Unix socket
// paths are capped at 104 bytes on macOS.
func isolate(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sdm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SESSIOND_") || strings.HasPrefix(k, "XDG_") ||
			k == "CLAUDE_CONFIG_DIR" || k == "CODEX_HOME" || k == "NOTIFY_SOCKET" || k == "WATCHDOG_USEC" {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("HOME", filepath.Join(d, "home"))
	return d
}

// A --socket in a directory others can write to (no sticky bit) is
// refused with exit 1, naming the directory, and the directory is left as
// it was.
func TestSocketInOpenDirectoryExitsOne(t *testing.T) {
	d := isolate(t)
	open := filepath.Join(d, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := runWithin(t, 10*time.Second, []string{"--state-dir", filepath.Join(d, "state"), "--socket", filepath.Join(open, "s.sock"), "--claude-learn-roots=false"}, nil, &stderr)
	if code != ExitError || !strings.Contains(stderr.String(), open) || !strings.Contains(stderr.String(), "writable by") {
		t.Fatalf("exit %d, want %d naming %s:\n%s", code, ExitError, open, stderr.String())
	}
	if fi, err := os.Stat(open); err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("the directory was changed: %v %v", fi.Mode(), err)
	}
}

// durationEnv are the environment variables sessiond reads as durations.
var durationEnv = []string{"SESSIOND_OPENCODE_REPAIR_GRACE", "SESSIOND_RECONCILE_INTERVAL", "SESSIOND_GRACE", "SESSIOND_STALL_AFTER"}

// A malformed duration in the environment is a usage error naming the
// variable and its value, not a silent fall back to the default: a unit
// file's SESSIOND_GRACE=5 minutes would otherwise run with 30s unnoticed.
func TestMalformedDurationInEnvironment(t *testing.T) {
	for _, key := range durationEnv {
		t.Run(key, func(t *testing.T) {
			isolate(t)
			t.Setenv(key, "5 minutes")
			var stderr bytes.Buffer
			_, err := parse(nil, &stderr)
			if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), `"5 minutes"`) {
				t.Fatalf("parse with %s=5 minutes: %v; want an error naming both", key, err)
			}
		})
	}
	// The whole command: exit 2, with the variable on stderr.
	d := isolate(t)
	t.Setenv("SESSIOND_GRACE", "5 minutes")
	var stderr bytes.Buffer
	code := runWithin(t, 10*time.Second, []string{"--state-dir", filepath.Join(d, "state"), "--claude-learn-roots=false"}, nil, &stderr)
	if code != ExitUsage || !strings.Contains(stderr.String(), "SESSIOND_GRACE") || !strings.Contains(stderr.String(), "5 minutes") {
		t.Fatalf("exit %d, want %d naming SESSIOND_GRACE and its value:\n%s", code, ExitUsage, stderr.String())
	}
}

// A flag on the command line wins over the environment, so a malformed
// variable it overrides is not in the way; a non-positive one is named as
// the variable it came from.
func TestDurationFlagOverridesEnvironment(t *testing.T) {
	isolate(t)
	t.Setenv("SESSIOND_GRACE", "5 minutes")
	o, err := parse([]string{"--grace", "10s"}, &bytes.Buffer{})
	if err != nil || o.grace != 10*time.Second {
		t.Fatalf("--grace 10s over SESSIOND_GRACE=5 minutes: %v %v", o, err)
	}
	t.Setenv("SESSIOND_GRACE", "0s")
	if _, err := parse(nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "SESSIOND_GRACE") {
		t.Fatalf("SESSIOND_GRACE=0s: %v; want an error naming the variable", err)
	}
	if _, err := parse([]string{"--grace", "-1s"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--grace") {
		t.Fatalf("--grace -1s: %v; want an error naming the flag", err)
	}
}

// A boolean variable is read as a boolean: "false" turns nothing on, "0"
// turns learning off, and anything else is a usage error naming it.
func TestBooleanEnvironment(t *testing.T) {
	isolate(t)
	t.Setenv("SESSIOND_NO_EXIT_EVENTS", "false")
	t.Setenv("SESSIOND_CLAUDE_LEARN_ROOTS", "0")
	o, err := parse(nil, &bytes.Buffer{})
	if err != nil || o.noExitEvts || o.learnRoots {
		t.Fatalf("NO_EXIT_EVENTS=false LEARN_ROOTS=0: %+v %v; want exit events on, learning off", o, err)
	}
	for _, key := range []string{"SESSIOND_NO_EXIT_EVENTS", "SESSIOND_CLAUDE_LEARN_ROOTS"} {
		t.Setenv(key, "nope")
		if _, err := parse(nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), `"nope"`) {
			t.Fatalf("%s=nope: %v; want an error naming it", key, err)
		}
		t.Setenv(key, "true")
	}
}
