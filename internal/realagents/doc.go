// Package realagents is the test tier that runs the real, pinned Claude
// Code, OpenCode, Codex, Pi and GitHub Copilot CLIs under the built
// sessiond and sessionctl, offline against the fake model server of
// internal/testkit/fakemodel, and crashes them for real: kill -9 mid tool
// call, orphaned python3 children, a killed daemon.
//
// The CLIs come from scripts/install-agents.sh, found through the
// SESSIOND_<AGENT>_BIN variables it prints; without them every test skips
// with a loud reason. Each test has its own HOME and XDG dirs, so the real
// ~/.claude, ~/.local/share/opencode, ~/.codex, ~/.pi and ~/.copilot are
// never touched, and every process a test starts (agents, their tool
// children, servers, the daemon) carries a marker in its environment and
// is killed when the test ends.
//
// Only the tests live here; this file exists so the package has a name and
// a comment outside them.
package realagents
