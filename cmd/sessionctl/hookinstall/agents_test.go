package hookinstall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Gemini CLI's and Copilot CLI's settings.json, as a user's: their own
// keys and hooks, kept in a dotfiles repository and linked into the
// root. An install writes sessiond's hooks through the link with each
// agent's timeout unit (Gemini CLI: milliseconds, 5000; Copilot: seconds,
// 5) and matcher; the uninstall gives the file back byte for byte, the
// link still a link.
func TestGeminiCopilotSettings(t *testing.T) {
	for _, c := range []struct {
		agent    Agent
		settings string
		timeout  float64
		matched  string
	}{
		{Gemini, "{\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}},\n  \"hooks\": {\n    \"AfterAgent\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify done\", \"timeout\": 60000}]}]\n  }\n}\n",
			5000, "BeforeTool"},
		{Copilot, "{\"model\":\"gpt-5\",\"hooks\":{\"Stop\":[{\"hooks\":[{\"type\":\"command\",\"command\":\"say done\"}]}]},\"n\":12345678901234567890}",
			5, "PreToolUse"},
	} {
		t.Run(c.agent.Name, func(t *testing.T) {
			root, dots := t.TempDir(), t.TempDir()
			target := filepath.Join(dots, c.agent.Name+"-settings.json")
			write(t, target, c.settings)
			link := filepath.Join(root, c.agent.File)
			symlink(t, target, link)

			p := install(t, c.agent, root, c.agent.Command("/usr/local/bin/sessionctl", "/run/sd.sock"))
			if !strings.Contains(p.Note, "symlink") {
				t.Errorf("note %q does not say the file is written through the link", p.Note)
			}
			isLinkTo(t, link, target, "after install")
			b, _ := os.ReadFile(target)
			var doc struct {
				Hooks map[string][]struct {
					Matcher string `json:"matcher"`
					Hooks   []struct {
						Type    string  `json:"type"`
						Command string  `json:"command"`
						Timeout float64 `json:"timeout"`
					} `json:"hooks"`
				} `json:"hooks"`
			}
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatalf("installed file is not JSON: %v\n%s", err, b)
			}
			for _, ev := range c.agent.Events {
				groups := doc.Hooks[ev]
				if len(groups) == 0 {
					t.Fatalf("no %s hook:\n%s", ev, b)
				}
				g := groups[len(groups)-1]
				if len(g.Hooks) != 1 || g.Hooks[0].Type != "command" || g.Hooks[0].Command != "/usr/local/bin/sessionctl --socket /run/sd.sock hook "+c.agent.Name ||
					g.Hooks[0].Timeout != c.timeout {
					t.Errorf("%s: %+v, want the command with timeout %v", ev, g, c.timeout)
				}
				if (g.Matcher == "*") != (ev == c.matched || c.agent.Matched[ev]) {
					t.Errorf("%s: matcher %q", ev, g.Matcher)
				}
			}
			if !strings.Contains(string(b), "12345678901234567890") && strings.Contains(c.settings, "12345678901234567890") {
				t.Errorf("a number changed:\n%s", b)
			}
			if st := c.agent.Status(root); !st.Installed() || !st.Backup {
				t.Errorf("status %+v", st)
			}

			uninstall(t, c.agent, root)
			isLinkTo(t, link, target, "after uninstall")
			if b, _ := os.ReadFile(target); string(b) != c.settings {
				t.Fatalf("after uninstall:\n%s\nwant the file as it was:\n%s", b, c.settings)
			}
			if _, err := os.Stat(backupPath(link)); !os.IsNotExist(err) {
				t.Errorf("backup left: %v", err)
			}
			noTemps(t, root)
			noTemps(t, dots)
		})
	}
}
