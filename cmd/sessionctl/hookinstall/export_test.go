package hookinstall

// Claude and Codex are the agents the tests install hooks for; Gemini
// and Copilot too.
var (
	Claude  = mustFor("claude")
	Codex   = mustFor("codex")
	Gemini  = mustFor("gemini")
	Copilot = mustFor("copilot")
)

func mustFor(name string) Agent {
	a, err := For(name)
	if err != nil {
		panic(err)
	}
	return a
}
