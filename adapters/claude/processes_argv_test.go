package claude

import (
	"testing"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

func TestArgv(t *testing.T) {
	id := claudetest.NewSessionID()
	cases := []struct {
		argv   []string
		claude bool
		helper bool
		sess   string
	}{
		{[]string{"claude"}, true, false, ""},
		{[]string{"/home/u/.local/share/claude/versions/2.1.328", "--resume", id}, true, false, id},
		{[]string{"node", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "--session-id=" + id}, true, false, id},
		{[]string{"node", "--no-warnings", "/usr/local/bin/claude", "-r", id}, true, false, id},
		{[]string{"claude", "--resume", id, "--fork-session"}, true, false, ""},
		{[]string{"claude", "daemon", "run"}, true, true, ""},
		{[]string{"claude", "--bg-pty-host"}, true, true, ""},
		{[]string{"bash", "-c", "claude --resume " + id}, false, false, ""},
		{[]string{"grep", "claude"}, false, false, ""},
		{[]string{"node", "server.js"}, false, false, ""},
		{nil, false, false, ""},
	}
	for _, c := range cases {
		if got := isClaudeArgv(c.argv); got != c.claude {
			t.Errorf("isClaudeArgv(%q) = %v", c.argv, got)
		}
		if got := isHelperArgv(c.argv); got != c.helper {
			t.Errorf("isHelperArgv(%q) = %v", c.argv, got)
		}
		if c.claude {
			if got, _ := argvSession(c.argv); got != c.sess {
				t.Errorf("argvSession(%q) = %q, want %q", c.argv, got, c.sess)
			}
		}
	}
}
