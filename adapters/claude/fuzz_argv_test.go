package claude

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzArgv: no command line of another process (/proc/<pid>/cmdline,
// NUL-separated) makes the claude argv readers panic; a session id taken
// from an argv is one of its arguments and a uuid.
func FuzzArgv(f *testing.F) {
	for _, argv := range [][]string{
		{"claude", "--resume", "3ab8568e-0000-4000-8000-000000000001", "-p", "again"},
		{"/home/u/.local/share/claude/versions/2.1.328", "--session-id=3ab8568e-0000-4000-8000-000000000002"},
		{"node", "--max-old-space-size=4096", "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js", "-r", "3ab8568e-0000-4000-8000-000000000003", "--fork-session"},
		{"claude", "daemon", "run"},
		{"claude", "--bg-spare"},
		{"claude", "--", "--resume", "3ab8568e-0000-4000-8000-000000000004"},
		{"bash", "-c", "claude --resume"},
	} {
		f.Add([]byte(strings.Join(argv, "\x00") + "\x00"))
	}
	f.Add([]byte("claude\x00--resume"))
	f.Add([]byte("\x00\x00\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		argv := strings.Split(string(bytes.TrimSuffix(b, []byte{0})), "\x00")
		_ = isClaudeArgv(argv)
		_ = isHelperArgv(argv)
		_ = shortArgv(argv)
		id, flag := argvSession(argv)
		if id == "" {
			return
		}
		if !uuidRE.MatchString(id) || (flag != "--session-id" && flag != "--resume") {
			t.Fatalf("argvSession(%q) = %q, %q", argv, id, flag)
		}
		if !strings.Contains(string(b), id) {
			t.Fatalf("id %q is not in the command line", id)
		}
	})
}
