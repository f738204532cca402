package hookinstall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files as a user has them: other servers, numbers float64 cannot
// hold, tabs, CRLF, comments in TOML.
var mcpFixtures = map[string]string{
	"claude":   "{\n\t\"numStartups\": 12345678901234567890,\n\t\"mcpServers\": {\n\t\t\"other\": {\"command\": \"x\", \"args\": []}\n\t},\n\t\"ratio\": 1.0\n}\n",
	"opencode": "{\r\n  \"$schema\": \"https://opencode.ai/config.json\",\r\n  \"model\": \"fake/fake-model\"\r\n}\r\n",
	"codex":    "# my codex config\nmodel = \"gpt-5\"   # keep this comment\n\n[mcp_servers.other]\ncommand = \"other\"\n\n[profiles.x]\nmodel = \"o3\"\n",
}

func mcpAgentIn(t *testing.T, name string) (MCPAgent, string) {
	t.Helper()
	home := t.TempDir()
	env := func(string) string { return "" }
	m, err := MCPFor(name, home, env)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(m.Path), 0o755); err != nil {
		t.Fatal(err)
	}
	return m, home
}

// mustApply applies a plan made without an error.
func mustApply(t *testing.T) func(p *Plan, err error) *Plan {
	return func(p *Plan, err error) *Plan {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Apply(); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// Install adds only sessiond's server (every other byte stays), keeps a
// backup, is idempotent; uninstall gives the file back byte for byte and
// drops the backup; status says where it is and what it runs.
func TestMCPInstallRoundTrip(t *testing.T) {
	for _, name := range MCPAgentNames {
		t.Run(name, func(t *testing.T) {
			m, _ := mcpAgentIn(t, name)
			orig := mcpFixtures[name]
			if err := os.WriteFile(m.Path, []byte(orig), 0o600); err != nil {
				t.Fatal(err)
			}
			args := []string{"mcp", "--socket", "/run/s.sock"}
			p := mustApply(t)(m.Install("/usr/local/bin/sessionctl", args))
			if !p.Changed() {
				t.Fatal("install changed nothing")
			}
			b, _ := os.ReadFile(m.Path)
			got := string(b)
			t.Logf("installed:\n%s", got)
			for _, keep := range strings.Split(strings.TrimSpace(orig), "\n") {
				if !strings.Contains(got, strings.TrimRight(keep, "\r")) {
					t.Errorf("line %q lost", keep)
				}
			}
			if !strings.Contains(got, "/usr/local/bin/sessionctl") || !strings.Contains(got, "/run/s.sock") {
				t.Fatalf("no sessiond server in:\n%s", got)
			}
			if name != "codex" {
				var doc map[string]any
				if err := json.Unmarshal(b, &doc); err != nil {
					t.Fatalf("not JSON any more: %v", err)
				}
			}
			if fi, err := os.Stat(m.Path); err != nil || fi.Mode().Perm() != 0o600 {
				t.Errorf("mode after install: %v %v", fi.Mode(), err)
			}
			st := m.Status()
			if !st.Installed || st.Command != "/usr/local/bin/sessionctl" || strings.Join(st.Args, " ") != strings.Join(args, " ") || !st.Backup || st.Error != "" {
				t.Fatalf("status %+v", st)
			}
			p, err := m.Install("/usr/local/bin/sessionctl", args)
			if err != nil || p.Changed() {
				t.Fatalf("second install: changed %v, %v: %s", p.Changed(), err, p.Diff())
			}
			mustApply(t)(m.Uninstall())
			if b, _ := os.ReadFile(m.Path); string(b) != orig {
				t.Fatalf("uninstall left\n%q\nwant\n%q", b, orig)
			}
			if _, err := os.Stat(backupPath(m.Path)); !os.IsNotExist(err) {
				t.Fatalf("backup still there: %v", err)
			}
			if st := m.Status(); st.Installed {
				t.Fatalf("status after uninstall %+v", st)
			}
		})
	}
}

// A file that did not exist is created, and removed by uninstall; a file
// edited since the install loses only sessiond's server, and the backup
// stays; a symlink stays a link; a file that does not read is refused
// and left as it is.
func TestMCPInstallEdges(t *testing.T) {
	for _, name := range MCPAgentNames {
		t.Run(name, func(t *testing.T) {
			m, home := mcpAgentIn(t, name)
			mustApply(t)(m.Install("/bin/sessionctl", []string{"mcp"}))
			if st := m.Status(); !st.Installed {
				t.Fatalf("status after install into no file: %+v", st)
			}
			mustApply(t)(m.Uninstall())
			if _, err := os.Stat(m.Path); !os.IsNotExist(err) {
				t.Fatalf("uninstall left the file it created: %v", err)
			}

			// Edited after the install: the edit stays.
			if err := os.WriteFile(m.Path, []byte(mcpFixtures[name]), 0o644); err != nil {
				t.Fatal(err)
			}
			mustApply(t)(m.Install("/bin/sessionctl", []string{"mcp"}))
			b, _ := os.ReadFile(m.Path)
			var edited string
			if name == "codex" {
				edited = "late = true\n" + string(b)
			} else {
				edited = strings.Replace(string(b), "{", "{\"late\": true,", 1)
			}
			if err := os.WriteFile(m.Path, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			p := mustApply(t)(m.Uninstall())
			b, _ = os.ReadFile(m.Path)
			if !strings.Contains(string(b), "late") || strings.Contains(string(b), "/bin/sessionctl") || !strings.Contains(p.Note, "kept") {
				t.Fatalf("uninstall after an edit: %s\n%s", p.Note, b)
			}
			if _, err := os.Stat(backupPath(m.Path)); err != nil {
				t.Fatalf("the backup went: %v", err)
			}
			os.Remove(backupPath(m.Path))

			// Through a symlink.
			real := filepath.Join(home, "dotfiles", filepath.Base(m.Path))
			os.MkdirAll(filepath.Dir(real), 0o755)
			if err := os.WriteFile(real, []byte(mcpFixtures[name]), 0o644); err != nil {
				t.Fatal(err)
			}
			os.Remove(m.Path)
			if err := os.Symlink(real, m.Path); err != nil {
				t.Fatal(err)
			}
			mustApply(t)(m.Install("/bin/sessionctl", []string{"mcp"}))
			if fi, err := os.Lstat(m.Path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the link is no longer a link: %v", err)
			}
			if b, _ := os.ReadFile(real); !strings.Contains(string(b), "/bin/sessionctl") {
				t.Fatalf("the linked file did not get the server:\n%s", b)
			}
			mustApply(t)(m.Uninstall())
			if b, _ := os.ReadFile(real); string(b) != mcpFixtures[name] {
				t.Fatalf("the linked file after uninstall:\n%q", b)
			}

			// A file that does not read.
			bad := "{\"mcpServers\": [1, 2]}\n"
			if name == "opencode" {
				bad = "{\"mcp\": \"x\"}\n"
			}
			if name == "codex" {
				bad = "[mcp_servers]\nsessiond = { command = \"x\" }\n"
			}
			os.Remove(m.Path)
			if err := os.WriteFile(m.Path, []byte(bad), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := m.Install("/bin/sessionctl", []string{"mcp"}); err == nil {
				t.Fatalf("install into %q was not refused", bad)
			} else {
				t.Logf("refused: %v", err)
			}
			if st := m.Status(); st.Error == "" {
				t.Fatalf("status of %q says no error: %+v", bad, st)
			}
			if b, _ := os.ReadFile(m.Path); string(b) != bad {
				t.Fatalf("a refused install wrote %q", b)
			}
		})
	}
}

// Each agent's file is where it reads it, under its environment.
func TestMCPForPaths(t *testing.T) {
	env := map[string]string{"CLAUDE_CONFIG_DIR": "/c", "CODEX_HOME": "/x", "XDG_CONFIG_HOME": "/xdg"}
	for name, want := range map[string][2]string{
		"claude":   {"/h/.claude.json", "/c/.claude.json"},
		"codex":    {"/h/.codex/config.toml", "/x/config.toml"},
		"opencode": {"/h/.config/opencode/opencode.json", "/xdg/opencode/opencode.json"},
	} {
		m, _ := MCPFor(name, "/h", func(string) string { return "" })
		e, _ := MCPFor(name, "/h", func(k string) string { return env[k] })
		if m.Path != want[0] || e.Path != want[1] {
			t.Errorf("%s: %s, %s; want %v", name, m.Path, e.Path, want)
		}
	}
	if _, err := MCPFor("gemini", "/h", os.Getenv); err == nil {
		t.Error("gemini accepted")
	}
}
