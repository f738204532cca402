package hookinstall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const cmd = "/usr/local/bin/sessionctl --socket /run/user/1000/sessiond/sessiond.sock hook claude"

// A settings file as people keep it: their own keys, their own hooks,
// their own formatting (tabs, key order, a unicode escape).
const userSettings = "{\n\t\"model\": \"opus\",\n\t\"hooks\": {\n\t\t\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"say done \\u0026\\u0026 true\"}]}]\n\t},\n\t\"env\": {\"A\": \"1\"}\n}\n"

func install(t *testing.T, a Agent, root, command string) *Plan {
	t.Helper()
	p, err := a.Install(root, command)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	return p
}

func uninstall(t *testing.T, a Agent, root string) *Plan {
	t.Helper()
	p, err := a.Uninstall(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Install then uninstall leaves the file byte-identical, or absent when
// it was; the user's own hooks run on beside sessiond's meanwhile.
func TestRoundTripByteIdentical(t *testing.T) {
	for _, c := range []struct {
		name    string
		agent   Agent
		content *string
	}{
		{"claude settings of a user", Claude, ptr(userSettings)},
		{"claude without settings.json", Claude, nil},
		{"codex hooks.json absent", Codex, nil},
		{"an empty file", Codex, ptr("")},
		{"compact JSON without hooks", Claude, ptr(`{"theme":"dark"}`)},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, c.agent.File)
			if c.content != nil {
				if err := os.WriteFile(path, []byte(*c.content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			install(t, c.agent, root, c.agent.Command("/usr/local/bin/sessionctl", "/run/sd.sock"))
			st := c.agent.Status(root)
			if !st.Installed() || len(st.Events) != len(c.agent.Events) || !st.Backup {
				t.Fatalf("after install: %+v", st)
			}
			var doc map[string]any
			b, _ := os.ReadFile(path)
			if err := json.Unmarshal(b, &doc); err != nil {
				t.Fatalf("installed file is not JSON: %v\n%s", err, b)
			}
			if c.content != nil && strings.Contains(*c.content, "say done") && !strings.Contains(string(b), `"say done \u0026\u0026 true"`) {
				t.Fatalf("the user's hook is gone:\n%s", b)
			}
			if fi, _ := os.Stat(path); c.content != nil && fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, want the file's own 0600", fi.Mode().Perm())
			}
			// A second install changes nothing.
			if p, err := c.agent.Install(root, c.agent.Command("/usr/local/bin/sessionctl", "/run/sd.sock")); err != nil || p.Changed() {
				t.Fatalf("second install: changed %v, %v (%s)", p.Changed(), err, p.Note)
			}
			uninstall(t, c.agent, root)
			got, err := os.ReadFile(path)
			switch {
			case c.content == nil && !os.IsNotExist(err):
				t.Fatalf("the file did not exist before; now: %q, %v", got, err)
			case c.content != nil && string(got) != *c.content:
				t.Fatalf("after uninstall:\n%q\nwant byte-identical:\n%q", got, *c.content)
			}
			if _, err := os.Stat(backupPath(path)); !os.IsNotExist(err) {
				t.Fatalf("backup left behind: %v", err)
			}
			if p, err := c.agent.Uninstall(root); err != nil || p.Changed() {
				t.Fatalf("second uninstall: changed %v, %v", p.Changed(), err)
			}
		})
	}
}

// A file edited after the install loses only sessiond's entries; its
// backup is kept, since restoring it would undo the edit.
func TestUninstallKeepsLaterEdits(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "settings.json")
	os.WriteFile(path, []byte(userSettings), 0o644)
	install(t, Claude, root, cmd)
	var doc map[string]any
	b, _ := os.ReadFile(path)
	json.Unmarshal(b, &doc)
	doc["model"] = "sonnet"
	b, _ = json.Marshal(doc)
	os.WriteFile(path, b, 0o644)

	p := uninstall(t, Claude, root)
	if !strings.Contains(p.Note, "kept") {
		t.Fatalf("note %q: want it to say the backup is kept", p.Note)
	}
	b, _ = os.ReadFile(path)
	if strings.Contains(string(b), "sessionctl") || !strings.Contains(string(b), "sonnet") || !strings.Contains(string(b), "say done") {
		t.Fatalf("after uninstall:\n%s", b)
	}
	if _, err := os.Stat(backupPath(path)); err != nil {
		t.Fatalf("backup: %v", err)
	}
}

// An install over an older sessionctl path replaces it; a file that is
// not JSON, or whose hooks are not an object, is refused untouched.
func TestInstallReplacesAndRefuses(t *testing.T) {
	root := t.TempDir()
	install(t, Codex, root, Codex.Command("/old/sessionctl", "/s"))
	p := install(t, Codex, root, Codex.Command("/new/sessionctl", "/s"))
	if !strings.Contains(p.Note, "replace") {
		t.Fatalf("note %q", p.Note)
	}
	if st := Codex.Status(root); len(st.Commands) != 1 || !strings.HasPrefix(st.Commands[0], "/new/") {
		t.Fatalf("commands %v", st.Commands)
	}
	if d := p.Diff(); !strings.Contains(d, "-") || !strings.Contains(d, "+") || !strings.Contains(d, "/new/sessionctl") {
		t.Fatalf("diff:\n%s", d)
	}
	uninstall(t, Codex, root)
	if _, err := os.Stat(filepath.Join(root, "hooks.json")); !os.IsNotExist(err) {
		t.Fatalf("hooks.json after uninstall: %v", err)
	}

	for _, bad := range []string{"{not json", `{"hooks": []}`} {
		r := t.TempDir()
		path := filepath.Join(r, "settings.json")
		os.WriteFile(path, []byte(bad), 0o644)
		if _, err := Claude.Install(r, cmd); err == nil {
			t.Errorf("%q: install planned", bad)
		}
		if b, _ := os.ReadFile(path); string(b) != bad {
			t.Errorf("%q changed", bad)
		}
	}
	if _, err := Claude.Install(filepath.Join(root, "nope"), cmd); err == nil {
		t.Error("a root that does not exist: no error")
	}
}

// Codex runs a hook once config.toml records trust for it, keyed by
// file, event, group and hook index (the keys the real 0.169.0 wrote
// when "Trust all and continue" was chosen).
func TestCodexTrust(t *testing.T) {
	root := t.TempDir()
	install(t, Codex, root, Codex.Command("/bin/sessionctl", "/s"))
	st := Codex.Status(root)
	if len(st.Untrusted) != len(Codex.Events) {
		t.Fatalf("untrusted %v before any trust", st.Untrusted)
	}
	hooks := filepath.Join(root, "hooks.json")
	cfg := "model = \"m\"\n\n[hooks.state]\n\n[hooks.state.\"" + hooks + ":pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:0f9b\"\n\n[hooks.state.\"" + hooks + ":permission_request:0:0\"]\ntrusted_hash = \"sha256:6adb\"\n"
	os.WriteFile(filepath.Join(root, "config.toml"), []byte(cfg), 0o644)
	st = Codex.Status(root)
	if len(st.Untrusted) != len(Codex.Events)-2 || contains(st.Untrusted, "PreToolUse") || contains(st.Untrusted, "PermissionRequest") {
		t.Fatalf("untrusted %v", st.Untrusted)
	}
	if snake("PermissionRequest") != "permission_request" || snake("Stop") != "stop" {
		t.Fatal(snake("PermissionRequest"))
	}
}

func ptr(s string) *string { return &s }

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}
