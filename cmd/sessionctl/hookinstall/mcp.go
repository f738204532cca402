package hookinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// MCP servers: `sessionctl mcp install` puts `sessionctl mcp` into an
// agent's MCP configuration with the same care as the hooks (a backup
// first, byte-identical uninstall, written through symlinks, checked
// unchanged right before the write):
//
//	claude    "mcpServers" of ~/.claude.json ($CLAUDE_CONFIG_DIR/.claude.json):
//	          {"sessiond": {"type": "stdio", "command": EXE, "args": ["mcp"]}}
//	opencode  "mcp" of ~/.config/opencode/opencode.json:
//	          {"sessiond": {"type": "local", "command": [EXE, "mcp"], "enabled": true}}
//	codex     [mcp_servers.sessiond] of $CODEX_HOME/config.toml:
//	          command = EXE, args = ["mcp"]

// MCPName is the name sessiond's server has in every agent's
// configuration.
const MCPName = "sessiond"

// MCPAgent is where one agent reads its MCP servers.
type MCPAgent struct {
	Name string
	// Path is the configuration file (absolute).
	Path string
	// container is the JSON object of servers ("" for Codex's TOML).
	container string
}

// MCPAgentNames are the agents whose MCP configuration sessionctl writes.
var MCPAgentNames = []string{"claude", "codex", "opencode"}

// MCPFor is where the agent reads its MCP servers, for a user whose home
// is home, under the environment env gives (CLAUDE_CONFIG_DIR,
// CODEX_HOME, XDG_CONFIG_HOME).
func MCPFor(name, home string, env func(string) string) (MCPAgent, error) {
	switch name {
	case "claude":
		dir := home
		if d := env("CLAUDE_CONFIG_DIR"); d != "" {
			dir = d
		}
		return MCPAgent{Name: name, Path: filepath.Join(dir, ".claude.json"), container: "mcpServers"}, nil
	case "opencode":
		dir := filepath.Join(home, ".config")
		if d := env("XDG_CONFIG_HOME"); d != "" {
			dir = d
		}
		return MCPAgent{Name: name, Path: filepath.Join(dir, "opencode", "opencode.json"), container: "mcp"}, nil
	case "codex":
		dir := filepath.Join(home, ".codex")
		if d := env("CODEX_HOME"); d != "" {
			dir = d
		}
		return MCPAgent{Name: name, Path: filepath.Join(dir, "config.toml")}, nil
	}
	return MCPAgent{}, fmt.Errorf("unknown agent %q for MCP: want one of %s", name, strings.Join(MCPAgentNames, ", "))
}

// entry is sessiond's server as the agent's file holds it.
func (m MCPAgent) entry(exe string, args []string) object {
	argv := make([]any, 0, len(args))
	for _, a := range args {
		argv = append(argv, a)
	}
	if m.Name == "opencode" {
		return object{{"type", "local"}, {"command", append([]any{exe}, argv...)}, {"enabled", true}}
	}
	return object{{"type", "stdio"}, {"command", exe}, {"args", argv}}
}

// readPlan reads the file (through its symlinks) into a plan that changes
// nothing yet. Its directory must exist: the agent made it.
func (m MCPAgent) readPlan() (*Plan, error) {
	dir := filepath.Dir(m.Path)
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("%s's configuration directory %s: %w (is %s installed and run once?)", m.Name, dir, err, m.Name)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory", dir)
	}
	p := &Plan{Path: m.Path}
	target, err := resolve(p.Path)
	if err != nil {
		return nil, err
	}
	p.target = target
	b, fi, err := readTarget(target)
	if err != nil {
		return nil, err
	}
	if fi != nil {
		p.Before, p.After, p.Existed, p.Exists, p.info = b, b, true, true, fi
	}
	return p, nil
}

// edited is the file's bytes with sessiond's server taken out and, when
// exe is not "", put in again; found says whether it was there.
func (m MCPAgent) edited(src []byte, exe string, args []string) ([]byte, bool, error) {
	if m.container == "" {
		return m.editTOML(src, exe, args)
	}
	d, err := parseDocument(src)
	if err != nil {
		return nil, false, fmt.Errorf("%s is not a JSON object (%v): fix or move it first; sessiond does not overwrite it", m.Path, err)
	}
	root := d.root
	ci, count := root.member(m.container)
	if count > 1 {
		return nil, false, fmt.Errorf("%s: %q appears %d times: sessiond does not guess which the agent reads; merge them first", m.Path, m.container, count)
	}
	var servers *node
	if ci >= 0 {
		if servers = root.kids[ci]; servers.kind != '{' {
			return nil, false, fmt.Errorf("%s: %q is not an object (it is %s); sessiond does not touch it", m.Path, m.container, kindName(servers))
		}
	}
	var items []item
	found := false
	if servers != nil {
		for i, k := range servers.keys {
			if k == MCPName {
				found = true
				continue
			}
			items = append(items, d.keep(servers, i))
		}
	}
	if exe != "" {
		items = append(items, item{orig: -1, key: MCPName, val: m.entry(exe, args)})
	}
	var top []item
	for i := range root.kids {
		switch {
		case i != ci:
			top = append(top, d.keep(root, i))
		case len(items) > 0 || !found:
			top = append(top, item{orig: i, text: string(d.src[root.kstart[i]:servers.start]) + d.rebuild(servers, items)})
		}
		// else: sessiond's server was all it held; it goes.
	}
	if servers == nil && exe != "" {
		top = append(top, item{orig: -1, key: m.container, val: object{{MCPName, m.entry(exe, args)}}})
	}
	return []byte(string(d.src[:root.start]) + d.rebuild(root, top) + string(d.src[root.end:])), found, nil
}

// tomlHeader finds a table header line; tomlOurs is sessiond's.
var (
	tomlHeader = regexp.MustCompile(`(?m)^[ \t]*\[`)
	tomlOurs   = regexp.MustCompile(`(?m)^[ \t]*\[[ \t]*mcp_servers[ \t]*\.[ \t]*"?` + MCPName + `"?[ \t]*(\.[^\]\n]*)?\][ \t]*(#.*)?\r?$`)
)

// editTOML is editMCP for Codex's config.toml, by lines: sessiond's table
// is [mcp_servers.sessiond] up to the next table's header (or the end),
// and every other byte stays. A server named sessiond written another way
// (an inline table under [mcp_servers]) is refused, not guessed at.
func (m MCPAgent) editTOML(src []byte, exe string, args []string) ([]byte, bool, error) {
	s := string(src)
	var out strings.Builder
	found := false
	for {
		loc := tomlOurs.FindStringIndex(s)
		if loc == nil {
			break
		}
		found = true
		end := len(s)
		rest := s[loc[1]:]
		if next := tomlHeader.FindStringIndex(rest); next != nil {
			end = loc[1] + next[0]
		}
		out.WriteString(s[:loc[0]])
		s = s[end:]
	}
	out.WriteString(s)
	res := out.String()
	if regexp.MustCompile(`(?m)^[ \t]*`+MCPName+`[ \t]*=`).MatchString(res) && strings.Contains(res, "mcp_servers") {
		return nil, false, fmt.Errorf("%s names a %q server in a way sessiond does not edit (a key under [mcp_servers]); take it out first", m.Path, MCPName)
	}
	if found && exe == "" && strings.HasSuffix(res, "\n\n") {
		// The blank line an install put before the table.
		res = res[:len(res)-1]
	}
	if exe != "" {
		if res != "" && !strings.HasSuffix(res, "\n") {
			res += "\n"
		}
		if res != "" && !strings.HasSuffix(res, "\n\n") {
			res += "\n"
		}
		var quoted []string
		for _, a := range args {
			quoted = append(quoted, tomlString(a))
		}
		res += fmt.Sprintf("[mcp_servers.%s]\ncommand = %s\nargs = [%s]\n", MCPName, tomlString(exe), strings.Join(quoted, ", "))
	}
	return []byte(res), found, nil
}

// tomlString is s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string { return strconv.Quote(s) }

// Install plans putting `exe args...` into the agent's MCP servers as
// sessiond's server.
func (m MCPAgent) Install(exe string, args []string) (*Plan, error) {
	p, err := m.readPlan()
	if err != nil {
		return nil, err
	}
	after, found, err := m.edited(p.Before, exe, args)
	if err != nil {
		return nil, err
	}
	if p.Existed && (bytes.Equal(after, p.Before) || m.container != "" && sameJSON(after, p.Before)) {
		p.Note = "already installed"
		return p, nil
	}
	p.After, p.Exists = after, true
	if found {
		p.Note = "replace sessiond's MCP server with this command"
	} else {
		b, err := json.Marshal(backupFile{Format: backupFormat, Existed: p.Existed, Content: p.Before})
		if err != nil {
			return nil, err
		}
		p.backup = b
		p.Note = "add sessiond's MCP server; the file as it was is kept in " + backupPath(p.Path)
	}
	p.Note += p.through()
	return p, nil
}

// Uninstall plans taking sessiond's server out: the backup's bytes when
// nothing else changed since the install (an install into the backup
// gives the file as it is), else the file without sessiond's server.
func (m MCPAgent) Uninstall() (*Plan, error) {
	p, err := m.readPlan()
	if err != nil {
		return nil, err
	}
	if !p.Existed {
		p.Note = "no " + p.Path + ": nothing to remove"
		return p, nil
	}
	after, found, err := m.edited(p.Before, "", nil)
	if err != nil {
		return nil, err
	}
	if !found {
		p.Note = "no sessiond MCP server in it: nothing to remove"
		return p, nil
	}
	bk, err := readBackup(p.Path)
	if err != nil {
		return nil, err
	}
	if bk != nil && m.sameAsInstalled(p.Before, bk) {
		p.After, p.Exists, p.removeBackup = bk.Content, bk.Existed, true
		p.Note = "restore the file exactly as it was before the install (from " + backupPath(p.Path) + ")"
		if !bk.Existed {
			p.After = nil
			p.Note = "remove the file: it did not exist before the install"
		}
		p.Note += p.through()
		return p, nil
	}
	p.After = after
	p.Note = "remove sessiond's MCP server"
	if bk != nil {
		p.Note += "; the file changed since the install, so it is not restored from " + backupPath(p.Path) + " (kept)"
	}
	p.Note += p.through()
	return p, nil
}

// sameAsInstalled: now is what installing sessiond's server (as now holds
// it) into the backup's file gives, so nothing else changed since.
func (m MCPAgent) sameAsInstalled(now []byte, bk *backupFile) bool {
	exe, args, ok := m.current(now)
	if !ok {
		return false
	}
	again, _, err := m.edited(bk.Content, exe, args)
	if err != nil {
		return false
	}
	if m.container == "" {
		return bytes.Equal(again, now)
	}
	return sameJSON(again, now)
}

// MCPStatus is what an agent's MCP configuration holds of sessiond's.
type MCPStatus struct {
	Agent     string   `json:"agent"`
	Path      string   `json:"path"`
	Installed bool     `json:"installed"`
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Backup    bool     `json:"backup"`
	Error     string   `json:"error,omitempty"`
}

// Status reads whether, and how, sessiond's server is in the file.
func (m MCPAgent) Status() MCPStatus {
	st := MCPStatus{Agent: m.Name, Path: m.Path}
	b, err := os.ReadFile(m.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return st
	}
	if err != nil {
		st.Error = err.Error()
		return st
	}
	if _, _, err := m.edited(b, "", nil); err != nil {
		st.Error = err.Error()
		return st
	}
	st.Command, st.Args, st.Installed = m.current(b)
	if _, err := os.Stat(backupPath(m.Path)); err == nil {
		st.Backup = true
	}
	return st
}

// current is sessiond's server as the file holds it.
func (m MCPAgent) current(b []byte) (exe string, args []string, ok bool) {
	if m.container == "" {
		loc := tomlOurs.FindIndex(b)
		if loc == nil {
			return "", nil, false
		}
		block := b[loc[1]:]
		if next := tomlHeader.FindIndex(block); next != nil {
			block = block[:next[0]]
		}
		for _, line := range strings.Split(string(block), "\n") {
			k, v, found := strings.Cut(strings.TrimSpace(line), "=")
			if !found {
				continue
			}
			v = strings.TrimSpace(v)
			switch strings.TrimSpace(k) {
			case "command":
				exe, _ = strconv.Unquote(v)
			case "args":
				_ = json.Unmarshal([]byte(v), &args)
			}
		}
		return exe, args, true
	}
	var doc map[string]any
	if len(bytes.TrimSpace(b)) == 0 || json.Unmarshal(b, &doc) != nil {
		return "", nil, false
	}
	servers, _ := doc[m.container].(map[string]any)
	e, isObj := servers[MCPName].(map[string]any)
	if !isObj {
		return "", nil, false
	}
	strs := func(v any) []string {
		var out []string
		l, _ := v.([]any)
		for _, x := range l {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	}
	if m.Name == "opencode" {
		cmd := strs(e["command"])
		if len(cmd) == 0 {
			return "", nil, true
		}
		return cmd[0], cmd[1:], true
	}
	exe, _ = e["command"].(string)
	return exe, strs(e["args"]), true
}
