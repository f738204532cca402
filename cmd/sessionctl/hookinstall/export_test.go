package hookinstall

// Claude and Codex are the agents the tests install hooks for.
var (
	Claude = mustFor("claude")
	Codex  = mustFor("codex")
)

func mustFor(name string) Agent {
	a, err := For(name)
	if err != nil {
		panic(err)
	}
	return a
}
