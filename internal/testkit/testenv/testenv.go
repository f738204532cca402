// Package testenv builds the environment of the sessiond, sessionctl and
// agent processes that tests and benchmarks start: the caller's own, less
// everything that could point them at the real user's files or daemon,
// plus a home, a socket and a state dir of their own; and it waits, in
// tests, for what those processes do to show (Eventually).
package testenv

import (
	"os"
	"strings"
)

// Isolated returns the current environment without HOME, CLAUDE_CONFIG_DIR,
// the XDG_* directories, sessiond's own SESSIOND_* settings (CI exports
// SESSIOND_CLAUDE_BIN for the real-agents tier) and systemd's notify and
// watchdog variables, then sets HOME, SESSIOND_SOCKET and
// SESSIOND_STATE_DIR.
func Isolated(home, socket, stateDir string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", k == "CLAUDE_CONFIG_DIR", k == "CODEX_HOME", k == "NOTIFY_SOCKET", k == "WATCHDOG_USEC",
			strings.HasPrefix(k, "XDG_"), strings.HasPrefix(k, "SESSIOND_"):
			continue
		}
		out = append(out, kv)
	}
	return append(out, "HOME="+home, "SESSIOND_SOCKET="+socket, "SESSIOND_STATE_DIR="+stateDir)
}
