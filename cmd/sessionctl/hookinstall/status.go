package hookinstall

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Status is what one root's hook file holds of sessiond's.
type Status struct {
	Agent string `json:"agent"`
	Root  string `json:"root"`
	Path  string `json:"path"`
	// Events are the events sessiond's hook is in; Missing those of
	// Agent.Events it is not.
	Events  []string `json:"events"`
	Missing []string `json:"missing,omitempty"`
	// Commands are the distinct commands of sessiond's hooks.
	Commands []string `json:"commands,omitempty"`
	Backup   bool     `json:"backup"`
	// Untrusted, for an agent that runs only trusted hooks (Codex), are
	// the events whose sessiond hook it has no trust recorded for in
	// config.toml: it does not run them until the user trusts them (the
	// TUI asks at its start).
	Untrusted []string `json:"untrusted,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Installed reports whether every event has sessiond's hook.
func (s *Status) Installed() bool { return s.Error == "" && len(s.Missing) == 0 }

// Status reads what the root's hook file holds of sessiond's.
func (a Agent) Status(root string) Status {
	st := Status{Agent: a.Name, Root: root, Path: filepath.Join(root, a.File)}
	p, doc, err := a.read(root)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	// What an install would refuse (an event that is not an array, a
	// key twice), status says: an install's edit, thrown away.
	if _, _, err := a.edit(p.Path, doc, "sessionctl hook "+a.Name); err != nil {
		st.Error = err.Error()
		return st
	}
	v, err := decodeExact(doc.src)
	if err != nil {
		st.Error = err.Error()
		return st
	}
	hooks, _ := v.(map[string]any)["hooks"].(map[string]any)
	if _, err := os.Stat(backupPath(p.Path)); err == nil {
		st.Backup = true
	}
	seen := map[string]bool{}
	places := map[string][2]int{} // event -> (group, hook) of sessiond's hook
	for _, ev := range a.Events {
		list, _ := hooks[ev].([]any)
		found := false
		for gi, g := range list {
			group, _ := g.(map[string]any)
			inner, _ := group["hooks"].([]any)
			for hi, h := range inner {
				hm, _ := h.(map[string]any)
				if c, _ := hm["command"].(string); a.ours(c) {
					if !found {
						places[ev] = [2]int{gi, hi}
					}
					found = true
					if !seen[c] {
						seen[c] = true
						st.Commands = append(st.Commands, c)
					}
				}
			}
		}
		if found {
			st.Events = append(st.Events, ev)
		} else {
			st.Missing = append(st.Missing, ev)
		}
	}
	if a.Trust != "" && len(st.Events) > 0 {
		trusted, err := codexTrusted(root)
		if err != nil {
			st.Error = err.Error()
		}
		for _, ev := range st.Events {
			pl := places[ev]
			// Codex keys its trust by file, event, group and hook index.
			key := fmt.Sprintf("%s:%s:%d:%d", p.Path, snake(ev), pl[0], pl[1])
			if !trusted[key] {
				st.Untrusted = append(st.Untrusted, ev)
			}
		}
	}
	return st
}

// codexTrusted lists the hooks config.toml records trust for: the keys
// of its [hooks.state."<key>"] tables that have a trusted_hash. (The hash
// itself is Codex's business: a changed hook is asked about again.)
func codexTrusted(root string) (map[string]bool, error) {
	b, err := os.ReadFile(filepath.Join(root, "config.toml"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	var table string
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, `[hooks.state."`) && strings.HasSuffix(line, `"]`):
			table = strings.TrimSuffix(strings.TrimPrefix(line, `[hooks.state."`), `"]`)
		case strings.HasPrefix(line, "["):
			table = ""
		case table != "" && strings.HasPrefix(line, "trusted_hash"):
			out[table] = true
		}
	}
	return out, nil
}

// snake is Codex's name of an event in its trust keys: PreToolUse is
// pre_tool_use.
func snake(ev string) string {
	var b strings.Builder
	for i, r := range ev {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Diff is a line diff of the plan, unified-style with three lines of
// context, for --dry-run.
func (p *Plan) Diff() string {
	if string(p.Before) == string(p.After) && p.Existed == p.Exists {
		return ""
	}
	from, to := p.Path, p.Path
	if !p.Existed {
		from = "/dev/null"
	}
	if !p.Exists {
		to = "/dev/null"
	}
	return "--- " + from + "\n+++ " + to + "\n" + lineDiff(splitLines(p.Before), splitLines(p.After), 3)
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.SplitAfter(strings.TrimSuffix(string(b), "\n"), "\n")
}

// lineDiff marks lines of a longest common subsequence ' ', the rest '-'
// and '+', and prints the changes with ctx lines around them. Hook files
// are small, so the quadratic table is fine.
func lineDiff(a, b []string, ctx int) string {
	n, m := len(a), len(b)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if strings.TrimSuffix(a[i], "\n") == strings.TrimSuffix(b[j], "\n") {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	type line struct {
		mark byte
		text string
	}
	var lines []line
	for i, j := 0, 0; i < n || j < m; {
		switch {
		case i < n && j < m && strings.TrimSuffix(a[i], "\n") == strings.TrimSuffix(b[j], "\n"):
			lines = append(lines, line{' ', a[i]})
			i, j = i+1, j+1
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			lines = append(lines, line{'+', b[j]})
			j++
		default:
			lines = append(lines, line{'-', a[i]})
			i++
		}
	}
	var out strings.Builder
	last := -1 // the last line printed
	for k, l := range lines {
		if l.mark == ' ' {
			continue
		}
		start := max(k-ctx, last+1)
		if last >= 0 && start > last+1 {
			out.WriteString("@@\n")
		}
		for x := start; x <= k; x++ {
			out.WriteByte(lines[x].mark)
			out.WriteString(strings.TrimSuffix(lines[x].text, "\n") + "\n")
		}
		last = k
		// Trailing context, up to the next change.
		for x := k + 1; x < len(lines) && x <= k+ctx; x++ {
			if lines[x].mark != ' ' {
				break
			}
			out.WriteString(" " + strings.TrimSuffix(lines[x].text, "\n") + "\n")
			last = x
		}
	}
	return out.String()
}
