package hookinstall

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
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
				if st := a.Status(root); !st.Installed() {
					t.Fatalf("status: %+v", st)
				}
				if err := os.Remove(BackupPath(path)); err != nil {
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
		if _, err := os.Lstat(BackupPath(path)); !os.IsNotExist(err) {
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
