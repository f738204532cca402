package main

import (
	"strings"
	"testing"
)

// --help of sessionctl lists every command, the global flags and the exit
// codes; --help of each command shows its usage and mentions each of its
// flags and the global ones. Help goes to stdout and exits 0.
func TestHelpMentionsEveryFlag(t *testing.T) {
	flags := map[string][]string{
		"ls":      {"--all", "--agent", "--status"},
		"show":    nil,
		"events":  {"--since", "--follow"},
		"health":  nil,
		"version": nil,
		"launch":  {"--agent", "--cwd", "--prompt", "--tmux", "--env"},
		"resume":  {"--prompt", "--cwd", "--tmux", "--fork"},
		"repair":  {"--apply"},
		"abort":   nil,
		"reap":    {"--apply", "--timeout", "--force"},
		"stop":    {"--timeout", "--force"},
		"wait":    {"--until", "--any", "--timeout"},
		"hook":    {"--verbose"},
		"hooks":   nil,
	}
	out, errs, code := ctl("--help")
	if code != exitOK || errs != "" {
		t.Fatalf("--help: exit %d: %s", code, errs)
	}
	for _, want := range []string{"--socket", "--json", "$SESSIOND_SOCKET",
		"Exit codes: 0 ok, 1 error, 2 usage, 3 daemon unreachable, 4 not found or\nambiguous, 5 timed out (wait)."} {
		if !strings.Contains(out, want) {
			t.Errorf("--help does not mention %s:\n%s", want, out)
		}
	}
	for cmd := range flags {
		if !strings.Contains(out, "\n  "+cmd+" ") {
			t.Errorf("--help does not list %s:\n%s", cmd, out)
		}
	}
	for cmd, fs := range flags {
		out, errs, code := ctl(cmd, "--help")
		if code != exitOK || errs != "" {
			t.Errorf("%s --help: exit %d: %s", cmd, code, errs)
			continue
		}
		if !strings.Contains(out, "Usage:\n  sessionctl "+cmd) {
			t.Errorf("%s --help shows no usage:\n%s", cmd, out)
		}
		for _, f := range append(fs, "--socket", "--json") {
			if !strings.Contains(out, f+" ") {
				t.Errorf("%s --help does not mention %s:\n%s", cmd, f, out)
			}
		}
	}
}
