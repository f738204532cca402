// Package agents is what both binaries know of each agent without reading
// its data: its name, where its data lives when no flag says, and where
// and how it runs command hooks. It imports nothing of sessiond: sessiond
// builds its adapters with these defaults, and sessionctl installs hooks
// and picks roots from them without linking any adapter.
package agents

import (
	"os"
	"path/filepath"
)

// Agent is one agent's facts.
type Agent struct {
	// Name is the agent's name in the API, the store and on the command
	// line.
	Name string
	// DefaultRoots are the roots of its data when none is given.
	DefaultRoots func() []string
	// Hooks is where and how it runs command hooks; nil when it runs
	// none.
	Hooks *Hooks
}

// Hooks is where and how an agent reads command hooks.
type Hooks struct {
	// File is the hook file's name in the agent's root.
	File string
	// Events are the hook events sessiond takes: those that say busy,
	// waiting (a permission request, a question), the turn's end, the
	// session's end.
	Events []string
	// Matched are the events whose groups take a tool matcher; sessiond
	// matches every tool ("*").
	Matched map[string]bool
	// Timeout is written with each hook, in seconds: the agent's bound on
	// the hook (which answers within 100 ms anyway), at most what the
	// agent accepts without a warning.
	Timeout int
	// TimeoutMillis: the agent reads a hook's timeout in milliseconds
	// (Gemini CLI), so Timeout is written times 1000.
	TimeoutMillis bool
	// SessionRoots: the hooks go into the root of each session sessiond
	// knows of the agent too, not only the default roots.
	SessionRoots bool
	// Trust is what the user does before the agent runs a new hook, said
	// after an install; "" when it runs them as installed. (Codex records
	// the trust in config.toml of its home.)
	Trust string
}

// Claude is Claude Code (2.1.332): its config roots, and the hooks of
// settings.json in each. PreSkillShellCommand (new in 2.1.332) is read
// but not installed: it says busy, as the registry does already, and
// older Claude Code greets every interactive start with a settings
// warning for an event it does not know.
var Claude = Agent{
	Name:         "claude",
	DefaultRoots: claudeRoots,
	Hooks: &Hooks{
		File: "settings.json",
		Events: []string{"UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure",
			"Notification", "Stop", "SessionEnd"},
		Matched:      map[string]bool{"PreToolUse": true, "PermissionRequest": true, "PostToolUse": true, "PostToolUseFailure": true},
		Timeout:      5,
		SessionRoots: true,
	},
}

// OpenCode is OpenCode: one data dir, no command hooks.
var OpenCode = Agent{
	Name:         "opencode",
	DefaultRoots: func() []string { return []string{openCodeDir()} },
}

// Codex is Codex (0.171.0): its home, and the hooks of hooks.json there.
// Codex runs a hook only once the user trusted it (it asks at the TUI's
// start).
var Codex = Agent{
	Name:         "codex",
	DefaultRoots: func() []string { return []string{codexHome()} },
	Hooks: &Hooks{
		File:   "hooks.json",
		Events: []string{"UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "Stop", "Interrupt", "SessionEnd"},
		// Codex clamps SessionEnd's and Interrupt's hook timeouts to 3 s,
		// with a warning in the TUI.
		Timeout: 3,
		Trust:   "Codex runs new hooks only once trusted: start codex and choose \"Trust all and continue\" (or /hooks). 'sessionctl hooks status codex' says which are trusted.",
	},
}

// Pi is Pi (@mariozechner/pi-coding-agent): its agent dir, no command
// hooks.
var Pi = Agent{
	Name:         "pi",
	DefaultRoots: func() []string { return []string{piAgentDir()} },
}

// Copilot is GitHub Copilot CLI (1.0.102): its home, and the user-level
// hooks of settings.json there ("hooks", as in .github/hooks/*.json).
// The events are written by their Claude Code names, for which Copilot
// sends Claude Code's payloads. They say busy and idle (a pass at once;
// the events say the same right after); a pending permission is in
// Copilot's events.jsonl already, and no hook says it:
// PermissionRequest runs before Copilot's rules decide, for calls it
// then runs unasked too, and no Notification fired for the prompt
// (docs/agents/copilot.md#hooks).
var Copilot = Agent{
	Name:         "copilot",
	DefaultRoots: func() []string { return []string{copilotHome()} },
	Hooks: &Hooks{
		File:    "settings.json",
		Events:  []string{"UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure", "Stop"},
		Matched: map[string]bool{"PreToolUse": true, "PostToolUse": true, "PostToolUseFailure": true},
		Timeout: 5,
	},
}

// Gemini is Gemini CLI (0.61.0): its data folder, and the hooks of
// settings.json there, in Claude Code's shape with Gemini's event names
// and timeouts in milliseconds.
var Gemini = Agent{
	Name:         "gemini",
	DefaultRoots: func() []string { return []string{geminiDir()} },
	Hooks: &Hooks{
		File:          "settings.json",
		Events:        []string{"BeforeAgent", "BeforeTool", "AfterTool", "Notification", "AfterAgent"},
		Matched:       map[string]bool{"BeforeTool": true, "AfterTool": true},
		Timeout:       5,
		TimeoutMillis: true,
	},
}

// Qwen is Qwen Code (0.24.4): its home, $QWEN_HOME, else ~/.qwen, and
// the hooks of settings.json there, in Claude Code's shape.
var Qwen = Agent{
	Name:         "qwen",
	DefaultRoots: func() []string { return []string{qwenHome()} },
	Hooks: &Hooks{
		File: "settings.json",
		// Not Notification: its permission_prompt follows PermissionRequest
		// and names no command (the adapter ignores it).
		Events:  []string{"UserPromptSubmit", "PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "Stop", "SessionEnd"},
		Matched: map[string]bool{"PreToolUse": true, "PermissionRequest": true, "PostToolUse": true, "PostToolUseFailure": true},
		Timeout: 5,
	},
}

// all are the agents sessiond knows, in the order it names them.
func all() []Agent { return []Agent{Claude, OpenCode, Codex, Pi, Copilot, Gemini, Qwen} }

// Names are the names of every agent sessiond knows, in its order.
func Names() []string {
	var out []string
	for _, a := range all() {
		out = append(out, a.Name)
	}
	return out
}

// Lookup returns the agent of that name.
func Lookup(name string) (Agent, bool) {
	for _, a := range all() {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

// WithHooks are the agents that run command hooks, in that order.
func WithHooks() []Agent {
	var out []Agent
	for _, a := range all() {
		if a.Hooks != nil {
			out = append(out, a)
		}
	}
	return out
}

// claudeRoots are the config roots $CLAUDE_CONFIG_DIR names (a path
// list), else ~/.claude.
func claudeRoots() []string {
	if v := os.Getenv("CLAUDE_CONFIG_DIR"); v != "" {
		return filepath.SplitList(v)
	}
	return []string{filepath.Join(home(), ".claude")}
}

// codexHome is $CODEX_HOME, else ~/.codex.
func codexHome() string {
	if v := os.Getenv("CODEX_HOME"); v != "" {
		return v
	}
	return filepath.Join(home(), ".codex")
}

// piAgentDir is $PI_CODING_AGENT_DIR, else ~/.pi/agent.
func piAgentDir() string {
	if v := os.Getenv("PI_CODING_AGENT_DIR"); v != "" {
		return v
	}
	return filepath.Join(home(), ".pi", "agent")
}

// copilotHome is $COPILOT_HOME, else ~/.copilot (Copilot reads no
// XDG variable for it).
func copilotHome() string {
	if v := os.Getenv("COPILOT_HOME"); v != "" {
		return v
	}
	return filepath.Join(home(), ".copilot")
}

// qwenHome is $QWEN_HOME, else ~/.qwen: where Qwen Code 0.24.4 keeps its
// session registry, and its chats unless $QWEN_RUNTIME_DIR moves them.
func qwenHome() string {
	if v := os.Getenv("QWEN_HOME"); v != "" {
		return v
	}
	return filepath.Join(home(), ".qwen")
}

// openCodeDir is $XDG_DATA_HOME/opencode, else ~/.local/share/opencode.
func openCodeDir() string {
	if v := os.Getenv("XDG_DATA_HOME"); v != "" {
		return filepath.Join(v, "opencode")
	}
	return filepath.Join(home(), ".local", "share", "opencode")
}

// geminiDir is $GEMINI_CLI_HOME/.gemini (Gemini CLI takes that variable
// for the home it keeps .gemini in), else ~/.gemini.
func geminiDir() string {
	if v := os.Getenv("GEMINI_CLI_HOME"); v != "" {
		return filepath.Join(v, ".gemini")
	}
	return filepath.Join(home(), ".gemini")
}

// home is the user's home, else ".".
func home() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return "."
	}
	return h
}
