package copilot

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// workspace.yaml is a flat mapping of scalars, rewritten whole by Copilot
// (1.0.102, real runs):
//
//	id: ce80509e-9be0-432f-a48a-06e04eb70ae6
//	cwd: /home/me/proj
//	client_name: github/cli
//	name: Say hi
//	user_named: false
//	summary_count: 0
//	fork_count: 0
//	created_at: 2026-11-28T00:47:48.247Z
//	updated_at: 2026-11-28T00:47:49.858Z
//
// A value that YAML would misread is quoted ('…' with '' for a quote, or
// "…" with backslash escapes); a long one may be folded onto indented
// continuation lines, or written as a block scalar (|, >). So it is read
// here without a YAML library: keys at column 0, scalar values, and
// anything else (a nested mapping, a sequence, an anchor) named in the
// error while the keys read stand.

// workspace is what sessiond takes from workspace.yaml.
type workspace struct {
	ID      string
	Cwd     string
	Name    string // Copilot's title for the session (its first prompt, or /rename)
	Client  string // client_name
	Created time.Time
	Updated time.Time
}

// maxWorkspace bounds the file read: Copilot's is a few hundred bytes.
const maxWorkspace = 1 << 20

// parseWorkspace reads a workspace.yaml. The error names what was not
// understood; the fields read before and after it are returned all the
// same.
func parseWorkspace(b []byte) (workspace, error) {
	var w workspace
	var errs []error
	lines := strings.Split(strings.ReplaceAll(string(b), "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "#") || l == "---" {
			continue
		}
		if l[0] == ' ' || l[0] == '\t' {
			errs = append(errs, fmt.Errorf("line %d: indented line outside a value", i+1))
			continue
		}
		key, rest, ok := strings.Cut(l, ":")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t') {
			errs = append(errs, fmt.Errorf("line %d: not a key: value line", i+1))
			continue
		}
		// The value's continuation lines: those indented after it.
		var cont []string
		for i+1 < len(lines) && (strings.TrimSpace(lines[i+1]) == "" || lines[i+1][0] == ' ' || lines[i+1][0] == '\t') {
			if strings.TrimSpace(lines[i+1]) == "" && !moreIndented(lines[i+2:]) {
				break
			}
			i++
			cont = append(cont, lines[i])
		}
		v, err := scalar(strings.TrimSpace(rest), cont)
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d (%s): %w", i+1, key, err))
			continue
		}
		switch key {
		case "id":
			w.ID = v
		case "cwd":
			w.Cwd = v
		case "name":
			w.Name = v
		case "client_name":
			w.Client = v
		case "created_at":
			w.Created, _ = time.Parse(time.RFC3339Nano, v)
		case "updated_at":
			w.Updated, _ = time.Parse(time.RFC3339Nano, v)
		}
	}
	return w, errors.Join(errs...)
}

// moreIndented reports whether an indented line follows before the next
// key (blank lines inside a block scalar).
func moreIndented(lines []string) bool {
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		return l[0] == ' ' || l[0] == '\t'
	}
	return false
}

// scalar reads one value: v is what follows the key on its line, cont its
// indented continuation lines.
func scalar(v string, cont []string) (string, error) {
	switch {
	case v == "" && len(cont) == 0:
		return "", nil
	case v == "" || v[0] == '{' || v[0] == '[' || v[0] == '&' || v[0] == '*' || v[0] == '!' || v[0] == '-' && (len(v) == 1 || v[1] == ' '):
		return "", errors.New("not a scalar")
	case v[0] == '|' || v[0] == '>':
		return block(v, cont)
	case v[0] == '\'':
		s, err := quoted(v, cont, '\'')
		return strings.ReplaceAll(s, "''", "'"), err
	case v[0] == '"':
		s, err := quoted(v, cont, '"')
		if err != nil {
			return "", err
		}
		u, err := strconv.Unquote(`"` + escapeForGo(s) + `"`)
		if err != nil {
			return "", fmt.Errorf("double-quoted value: %w", err)
		}
		return u, nil
	}
	// A plain scalar: its lines folded with spaces, a trailing comment cut.
	parts := []string{v}
	for _, c := range cont {
		parts = append(parts, strings.TrimSpace(c))
	}
	s := fold(parts)
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return s, nil
}

// quoted joins a quoted value's lines and returns what is between the
// quotes.
func quoted(v string, cont []string, q byte) (string, error) {
	parts := []string{v}
	for _, c := range cont {
		parts = append(parts, strings.TrimSpace(c))
	}
	s := fold(parts)
	end := closing(s, q)
	if end < 0 {
		return "", errors.New("unterminated quoted value")
	}
	if rest := strings.TrimSpace(s[end+1:]); rest != "" && !strings.HasPrefix(rest, "#") {
		return "", errors.New("text after a quoted value")
	}
	return s[1:end], nil
}

// closing finds the quote that ends a value starting with q at s[0].
func closing(s string, q byte) int {
	for i := 1; i < len(s); i++ {
		switch {
		case q == '"' && s[i] == '\\':
			i++
		case s[i] == q && q == '\'' && i+1 < len(s) && s[i+1] == '\'':
			i++
		case s[i] == q:
			return i
		}
	}
	return -1
}

// escapeForGo turns YAML's double-quoted escapes into Go's where they
// differ: \/ is a slash, \e escape, \0 NUL, a bare double quote stays.
func escapeForGo(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case '/':
			b.WriteByte('/')
		case 'e':
			b.WriteString(`\x1b`)
		case '0':
			b.WriteString(`\x00`)
		case ' ':
			b.WriteByte(' ')
		case 'N':
			b.WriteString(`\u0085`)
		case '_':
			b.WriteString(`\u00a0`)
		default:
			b.WriteByte('\\')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

// fold joins the lines of a folded value: one space between lines, a
// newline for each empty line.
func fold(parts []string) string {
	var b strings.Builder
	for i, p := range parts {
		switch {
		case i == 0:
		case p == "":
			b.WriteByte('\n')
			continue
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "\n"):
			b.WriteByte(' ')
		}
		b.WriteString(p)
	}
	return b.String()
}

// block reads a block scalar (| keeps newlines, > folds them; - strips
// the final one, + keeps them all).
func block(head string, cont []string) (string, error) {
	if rest := strings.TrimSpace(strings.TrimLeft(head[1:], "+-0123456789")); rest != "" && !strings.HasPrefix(rest, "#") {
		return "", errors.New("block scalar header")
	}
	indent := -1
	var lines []string
	for _, c := range cont {
		if strings.TrimSpace(c) == "" {
			lines = append(lines, "")
			continue
		}
		n := len(c) - len(strings.TrimLeft(c, " "))
		if indent < 0 || n < indent {
			indent = n
		}
		lines = append(lines, c)
	}
	for i, l := range lines {
		if len(l) >= indent && indent > 0 {
			lines[i] = l[indent:]
		}
	}
	var s string
	if head[0] == '|' {
		s = strings.Join(lines, "\n")
	} else {
		s = fold(lines)
	}
	switch {
	case strings.Contains(head, "-"):
		s = strings.TrimRight(s, "\n")
	case strings.Contains(head, "+"):
		s += "\n"
	default:
		s = strings.TrimRight(s, "\n") + "\n"
	}
	return s, nil
}
