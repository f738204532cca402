package agents

import (
	"path/filepath"
	"reflect"
	"testing"
)

// The default roots follow each agent's own variable, else its place in
// the home.
func TestDefaultRoots(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	t.Setenv("CLAUDE_CONFIG_DIR", "")
	t.Setenv("CODEX_HOME", "")
	t.Setenv("XDG_DATA_HOME", "")
	t.Setenv("QWEN_HOME", "")
	for _, tc := range []struct {
		a    Agent
		want []string
	}{
		{Claude, []string{"/home/u/.claude"}},
		{Codex, []string{"/home/u/.codex"}},
		{OpenCode, []string{"/home/u/.local/share/opencode"}},
		{Qwen, []string{"/home/u/.qwen"}},
	} {
		if got := tc.a.DefaultRoots(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.a.Name, got, tc.want)
		}
	}
	t.Setenv("CLAUDE_CONFIG_DIR", "/a"+string(filepath.ListSeparator)+"/b")
	t.Setenv("CODEX_HOME", "/c")
	t.Setenv("XDG_DATA_HOME", "/d")
	if got := Claude.DefaultRoots(); !reflect.DeepEqual(got, []string{"/a", "/b"}) {
		t.Errorf("claude: %v", got)
	}
	if got := Codex.DefaultRoots(); !reflect.DeepEqual(got, []string{"/c"}) {
		t.Errorf("codex: %v", got)
	}
	if got := OpenCode.DefaultRoots(); !reflect.DeepEqual(got, []string{"/d/opencode"}) {
		t.Errorf("opencode: %v", got)
	}
	t.Setenv("QWEN_HOME", "/q")
	if got := Qwen.DefaultRoots(); !reflect.DeepEqual(got, []string{"/q"}) {
		t.Errorf("qwen: %v", got)
	}
}

// Claude, Codex, Copilot, Gemini CLI and Qwen Code run command hooks,
// OpenCode and Pi none; every agent is found
// by its name.
func TestRegistry(t *testing.T) {
	var hooks []string
	for _, a := range WithHooks() {
		hooks = append(hooks, a.Name)
	}
	if !reflect.DeepEqual(hooks, []string{"claude", "codex", "copilot", "gemini", "qwen"}) {
		t.Errorf("agents with hooks %v", hooks)
	}
	for _, n := range Names() {
		if a, ok := Lookup(n); !ok || a.Name != n {
			t.Errorf("Lookup(%q) = %v, %v", n, a.Name, ok)
		}
	}
	if _, ok := Lookup("nope"); ok {
		t.Error("Lookup found an agent that is not")
	}
}
