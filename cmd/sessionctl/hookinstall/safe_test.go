package hookinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// write writes a test file, failing the test if it cannot.
func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// isLinkTo fails the test unless link is a symlink whose text is target.
func isLinkTo(t *testing.T, link, target, when string) {
	t.Helper()
	fi, err := os.Lstat(link)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatalf("%s: %s is a %v, no longer a symlink", when, link, fi.Mode().Type())
	}
	if got, _ := os.Readlink(link); got != target {
		t.Fatalf("%s: %s -> %s, want -> %s", when, link, got, target)
	}
}

// noTemps fails the test if a temporary file of a write is left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left in %s: %s", dir, e.Name())
		}
	}
}

// A settings file kept in a dotfiles repository and linked into the
// root is written through its link, however many links lead to it:
// the links stay links, the file they name gets the hooks, and the
// uninstall puts its bytes back.
func TestSymlinkedFileStaysALink(t *testing.T) {
	for _, c := range []struct {
		name  string
		agent Agent
		// links are (link, its text) from the root's file on, relative
		// to a temp dir; the last text names the file (in dots/).
		links   [][2]string
		content *string // nil: the file the links name does not exist
	}{
		{"claude, one relative link", Claude, [][2]string{{"root/settings.json", "../dots/claude/settings.json"}}, ptr(userSettings)},
		{"claude, a chain of two links", Claude, [][2]string{{"root/settings.json", "@/mid/settings.json"}, {"mid/settings.json", "../dots/settings.json"}}, ptr(userSettings)},
		{"codex, one absolute link", Codex, [][2]string{{"root/hooks.json", "@/dots/hooks.json"}}, ptr(`{"hooks":{"Stop":[{"hooks":[{"type":"command","command":"notify"}]}]}}`)},
		{"claude, a link to a file not there yet", Claude, [][2]string{{"root/settings.json", "../dots/settings.json"}}, nil},
		{"claude, a link through a linked directory", Claude, [][2]string{{"root/settings.json", "../linkeddir/settings.json"}, {"linkeddir", "dots/deep"}}, ptr("{}\n")},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "root")
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(base, "mid"), 0o755); err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, l := range c.links {
				text := strings.Replace(l[1], "@", base, 1)
				texts = append(texts, text)
				symlink(t, text, filepath.Join(base, l[0]))
			}
			// The file the chain names: the last link's text, from its
			// own directory.
			last := c.links[len(c.links)-1]
			target := texts[len(texts)-1]
			if !filepath.IsAbs(target) {
				target = filepath.Join(filepath.Dir(filepath.Join(base, last[0])), target)
			}
			if last[0] == "linkeddir" { // the linked directory: the file is inside it
				target = filepath.Join(base, "dots", "deep", "settings.json")
			}
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			if c.content != nil {
				write(t, target, *c.content)
			}
			path := filepath.Join(root, c.agent.File)

			p := install(t, c.agent, root, c.agent.Command("/usr/local/bin/sessionctl", "/run/sd.sock"))
			for i, l := range c.links {
				isLinkTo(t, filepath.Join(base, l[0]), texts[i], "after install")
			}
			b, err := os.ReadFile(target)
			if err != nil || !bytes.Contains(b, []byte("/usr/local/bin/sessionctl")) {
				t.Fatalf("the linked file after install (%v):\n%s", err, b)
			}
			if st := c.agent.Status(root); !st.Installed() || !st.Backup {
				t.Fatalf("status after install: %+v", st)
			}
			// (Named by its real directory: a temp dir may be under a
			// link itself, /var on macOS.)
			realDir, err := filepath.EvalSymlinks(filepath.Dir(target))
			if err != nil {
				t.Fatal(err)
			}
			if real := filepath.Join(realDir, filepath.Base(target)); !strings.Contains(p.Note, real) {
				t.Errorf("note %q: want it to name the file written through the link, %s", p.Note, real)
			}
			noTemps(t, root)
			noTemps(t, filepath.Dir(target))

			uninstall(t, c.agent, root)
			for i, l := range c.links {
				isLinkTo(t, filepath.Join(base, l[0]), texts[i], "after uninstall")
			}
			got, err := os.ReadFile(target)
			switch {
			case c.content == nil && !os.IsNotExist(err):
				t.Fatalf("the linked file did not exist before; now: %q, %v", got, err)
			case c.content != nil && string(got) != *c.content:
				t.Fatalf("the linked file after uninstall:\n%q\nwant byte-identical:\n%q", got, *c.content)
			}
			if _, err := os.Lstat(backupPath(path)); !os.IsNotExist(err) {
				t.Fatalf("backup left behind: %v", err)
			}
			noTemps(t, root)
			noTemps(t, filepath.Dir(target))
		})
	}
}

// Numbers and bytes sessiond does not touch stay as they were: integers
// beyond 2^53, 1.0, 1e400 (beyond float64), escapes, tabs, key order.
// An install, its backup dropped, then an uninstall (which then takes
// out sessiond's entries only) gives back the file byte for byte.
func TestNumbersAndBytesExact(t *testing.T) {
	for _, c := range []struct {
		name, content string
		literals      []string
	}{
		{"an integer beyond 2^53 and 1.0", "{\n  \"zeta\": 12345678901234567890,\n  \"alpha\": 1.0,\n  \"n\": -0.0e-0\n}\n",
			[]string{"12345678901234567890", "1.0", "-0.0e-0"}},
		{"a number beyond float64", `{"limit": 1e400, "tiny": 1e-400}`, []string{"1e400", "1e-400"}},
		{"a user's formatting and hooks", userSettings, []string{"\t\"model\": \"opus\"", `say done \u0026\u0026 true`}},
		{"CRLF line ends", "{\r\n    \"theme\": \"dark\"\r\n}\r\n", []string{"{\r\n    \"theme\": \"dark\",\r\n    \"hooks\": {\r\n"}},
		{"numbers inside the user's hooks", "{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"x\", \"timeout\": 9007199254740993}]}],\n \"Custom\": []}}",
			[]string{"9007199254740993", `"Custom": []`}},
	} {
		for _, a := range []Agent{Claude, Codex} {
			t.Run(a.Name+", "+c.name, func(t *testing.T) {
				root := t.TempDir()
				path := filepath.Join(root, a.File)
				write(t, path, c.content)
				install(t, a, root, a.Command("/usr/local/bin/sessionctl", "/run/sd.sock"))
				b, _ := os.ReadFile(path)
				for _, l := range c.literals {
					if !bytes.Contains(b, []byte(l)) {
						t.Errorf("after install, %s is gone:\n%s", l, b)
					}
				}
				if !json.Valid(b) {
					t.Fatalf("installed file is not JSON:\n%s", b)
				}
				if strings.Contains(c.content, "\r\n") && strings.Count(string(b), "\n") != strings.Count(string(b), "\r\n") {
					t.Errorf("a line end without \\r in a CRLF file:\n%q", b)
				}
				if st := a.Status(root); !st.Installed() {
					t.Fatalf("status: %+v", st)
				}
				if err := os.Remove(backupPath(path)); err != nil {
					t.Fatal(err)
				}
				uninstall(t, a, root)
				if got, _ := os.ReadFile(path); string(got) != c.content {
					t.Fatalf("sessiond's entries taken out:\n%s\nwant the file byte for byte:\n%s", got, c.content)
				}
			})
		}
	}
}

// A write by someone else (the agent, the user's editor) between
// sessiond's read and its rename is kept: the action fails, saying so,
// and nothing of it is written, the backup included.
func TestChangedBetweenReadAndWrite(t *testing.T) {
	const agentWrote = "{\"model\": \"the agent's own write\"}\n"
	command := Claude.Command("/usr/local/bin/sessionctl", "/run/sd.sock")
	for _, c := range []struct {
		name string
		// setup prepares root and returns the plan, made before the
		// other write.
		plan func(t *testing.T, root string) *Plan
	}{
		{"install over a file", func(t *testing.T, root string) *Plan {
			write(t, filepath.Join(root, "settings.json"), userSettings)
			p, err := Claude.Install(root, command)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"install over a file, an older backup kept", func(t *testing.T, root string) *Plan {
			write(t, filepath.Join(root, "settings.json"), userSettings)
			write(t, backupPath(filepath.Join(root, "settings.json")), `{"sessiond_hooks_backup":"1","existed":true,"content":"e30K"}`)
			p, err := Claude.Install(root, command)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"install creating the file", func(t *testing.T, root string) *Plan {
			p, err := Claude.Install(root, command)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"install replacing an older command", func(t *testing.T, root string) *Plan {
			install(t, Claude, root, Claude.Command("/old/sessionctl", "/s"))
			p, err := Claude.Install(root, command)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"uninstall restoring the backup", func(t *testing.T, root string) *Plan {
			write(t, filepath.Join(root, "settings.json"), userSettings)
			install(t, Claude, root, command)
			p, err := Claude.Uninstall(root)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"uninstall removing the file it created", func(t *testing.T, root string) *Plan {
			install(t, Claude, root, command)
			p, err := Claude.Uninstall(root)
			if err != nil {
				t.Fatal(err)
			}
			return p
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			path := filepath.Join(root, "settings.json")
			p := c.plan(t, root)
			if !p.Changed() {
				t.Fatalf("the plan changes nothing: %s", p.Note)
			}
			backup, _ := os.ReadFile(backupPath(path))
			calls := 0
			beforeReplace = func(string) {
				calls++
				write(t, path, agentWrote)
			}
			defer func() { beforeReplace = nil }()
			err := p.Apply()
			if calls == 0 {
				t.Fatal("beforeReplace was not called")
			}
			if err == nil || !strings.Contains(err.Error(), "changed since") || !strings.Contains(err.Error(), path) {
				t.Fatalf("Apply: %v; want it to say %s changed since it was read", err, path)
			}
			t.Logf("Apply: %v", err)
			if b, _ := os.ReadFile(path); string(b) != agentWrote {
				t.Fatalf("the other write is lost; the file is:\n%s", b)
			}
			if b, _ := os.ReadFile(backupPath(path)); !bytes.Equal(b, backup) {
				t.Fatalf("the backup changed, from:\n%s\nto:\n%s", backup, b)
			}
			noTemps(t, root)
		})
	}
}

// An event of sessiond's whose value is not an array is refused, naming
// the file and the event, and nothing is written; one sessiond does not
// take is left alone.
func TestEventNotArrayRefused(t *testing.T) {
	for _, a := range []Agent{Claude, Codex} {
		root := t.TempDir()
		path := filepath.Join(root, a.File)
		bad := `{"hooks": {"PreToolUse": {"matcher": "*", "hooks": [{"type": "command", "command": "mine"}]}}}`
		write(t, path, bad)
		_, err := a.Install(root, a.Command("/bin/sessionctl", "/s"))
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "PreToolUse") || !strings.Contains(err.Error(), "not an array") {
			t.Fatalf("%s: install: %v; want a refusal naming %s and PreToolUse", a.Name, err, path)
		}
		t.Logf("%s: %v", a.Name, err)
		if b, _ := os.ReadFile(path); string(b) != bad {
			t.Fatalf("%s: the file changed:\n%s", a.Name, b)
		}
		if _, err := os.Lstat(backupPath(path)); !os.IsNotExist(err) {
			t.Fatalf("%s: a backup was written: %v", a.Name, err)
		}
		if st := a.Status(root); st.Error == "" || !strings.Contains(st.Error, "PreToolUse") {
			t.Fatalf("%s: status: %+v; want an error naming PreToolUse", a.Name, st)
		}

		// An event sessiond does not take may hold anything.
		other := `{"hooks": {"SomethingElse": {"x": 1}}}`
		write(t, path, other)
		install(t, a, root, a.Command("/bin/sessionctl", "/s"))
		b, _ := os.ReadFile(path)
		if !bytes.Contains(b, []byte(`"SomethingElse": {"x": 1}`)) {
			t.Fatalf("%s: the other event changed:\n%s", a.Name, b)
		}
		uninstall(t, a, root)
		if b, _ := os.ReadFile(path); string(b) != other {
			t.Fatalf("%s: after uninstall:\n%s", a.Name, b)
		}
	}
}

// A key the agent reads once but the file holds twice is refused: which
// of the two the agent takes is not sessiond's to guess.
func TestDuplicateKeysRefused(t *testing.T) {
	for _, bad := range []string{
		`{"hooks": {}, "model": "x", "hooks": {}}`,
		`{"hooks": {"Stop": [], "Stop": [{"hooks": []}]}}`,
		// Not one of sessiond's events, but sessiond's entries would be
		// taken out of it (FuzzEdit found it).
		`{"hooks": {"Mine": [{"hooks": [{"command": "sessionctl hook claude"}]}], "Mine": []}}`,
	} {
		root := t.TempDir()
		path := filepath.Join(root, "settings.json")
		write(t, path, bad)
		_, err := Claude.Install(root, cmd)
		if err == nil || !strings.Contains(err.Error(), "times") {
			t.Errorf("%s: install: %v; want a refusal", bad, err)
		}
		if b, _ := os.ReadFile(path); string(b) != bad {
			t.Errorf("%s changed", bad)
		}
	}
}

// The check before the rename is not fooled by a write of the same
// bytes (another file renamed in its place), nor by a symlink turned to
// another file.
func TestChangedUnderTheSameBytesOrLink(t *testing.T) {
	command := Claude.Command("/usr/local/bin/sessionctl", "/run/sd.sock")
	for _, c := range []struct {
		name  string
		other func(t *testing.T, base, path string)
	}{
		{"the same bytes, another file", func(t *testing.T, base, path string) {
			real, _ := filepath.EvalSymlinks(path)
			write(t, real+".new", userSettings)
			if err := os.Rename(real+".new", real); err != nil {
				t.Fatal(err)
			}
		}},
		{"the link turned to another file", func(t *testing.T, base, path string) {
			write(t, filepath.Join(base, "dots", "other.json"), userSettings)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			symlink(t, "../dots/other.json", path)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, "root")
			path := filepath.Join(root, "settings.json")
			write(t, filepath.Join(base, "dots", "settings.json"), userSettings)
			if err := os.MkdirAll(root, 0o755); err != nil {
				t.Fatal(err)
			}
			symlink(t, "../dots/settings.json", path)
			p, err := Claude.Install(root, command)
			if err != nil {
				t.Fatal(err)
			}
			beforeReplace = func(string) { c.other(t, base, path) }
			defer func() { beforeReplace = nil }()
			err = p.Apply()
			if !errors.Is(err, errChanged) {
				t.Fatalf("Apply: %v; want ErrChanged", err)
			}
			t.Logf("Apply: %v", err)
			for _, f := range []string{"settings.json", "other.json"} {
				if b, err := os.ReadFile(filepath.Join(base, "dots", f)); err == nil && string(b) != userSettings {
					t.Fatalf("%s was written:\n%s", f, b)
				}
			}
			if _, err := os.Lstat(backupPath(path)); !os.IsNotExist(err) {
				t.Fatalf("a backup is left: %v", err)
			}
		})
	}
}

// A link to what is not a regular file (a named pipe, which would block
// a read, or a directory) is refused, not read or replaced.
func TestNotARegularFileRefused(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.MkdirAll(filepath.Join(base, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(base, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"fifo", "dir"} {
		path := filepath.Join(root, "settings.json")
		os.Remove(path)
		symlink(t, filepath.Join(base, name), path)
		_, err := Claude.Install(root, cmd)
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("a link to a %s: %v; want a refusal", name, err)
		}
		isLinkTo(t, path, filepath.Join(base, name), "after the refusal")
	}
}

// A file an earlier sessionctl installed into had its numbers re-encoded
// through float64; its uninstall still restores the backup, which gives
// the numbers back as they were written.
func TestUninstallAfterAnOlderInstall(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, "settings.json")
	orig := "{\n  \"big\": 12345678901234567890,\n  \"ratio\": 1.0\n}\n"
	// What the earlier install wrote: the backup, and the file decoded
	// into float64 and encoded again with its hooks.
	bk, _ := json.Marshal(backupFile{Format: backupFormat, Existed: true, Content: []byte(orig)})
	write(t, backupPath(path), string(bk))
	var doc map[string]any
	if err := json.Unmarshal([]byte(orig), &doc); err != nil {
		t.Fatal(err)
	}
	hooks := map[string]any{}
	for _, ev := range Claude.Events {
		hooks[ev] = []any{map[string]any{"hooks": []any{map[string]any{"type": "command", "command": cmd, "timeout": 5}}}}
	}
	doc["hooks"] = hooks
	old, _ := json.MarshalIndent(doc, "", "  ")
	if !bytes.Contains(old, []byte("12345678901234567000")) {
		t.Fatalf("not the earlier install's damage:\n%s", old)
	}
	write(t, path, string(old)+"\n")

	p := uninstall(t, Claude, root)
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Fatalf("after uninstall (%s):\n%s\nwant:\n%s", p.Note, b, orig)
	}
}
