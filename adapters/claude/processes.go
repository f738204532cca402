package claude

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/proc"

	"github.com/sessiond/sessiond/adapters/internal/paths"
)

// procView is one pass's view of the process table: the live claude
// processes indexed the ways the adapter asks about them.
type procView struct {
	snap *proc.Snapshot
	// boot is the current boot id ("" when unknown).
	boot   string
	claude []*claudeProc
	byCwd  map[string][]*claudeProc
	byArgv map[string][]*claudeProc

	host   ProcHost
	starts map[proc.Identity]time.Time

	// claimed are the live claudes a valid registry entry or their argv
	// names as the owner of a session, with that session: such a claude
	// is never inferred from its cwd to own another one (a supervisor
	// that launched a helper in its folder outlives it, and is not its
	// owner).
	claimed map[proc.Identity]string

	// dom is this host's machine, PID namespace and boot time, against
	// which registry entries' pidDomain and startedAt are read.
	dom     hostDomain
	domHost domainHost
	nsFound map[nsKey]nsAnswer
}

// claudeProc is a live top-level claude process (not a helper).
type claudeProc struct {
	p *proc.Process
	// root is the process's config root: CLAUDE_CONFIG_DIR, else the
	// default root; "" when its environment could not be read.
	root string
	// argvSession is the session its argv names (--resume, --session-id).
	argvSession string
	argvFlag    string
}

func newProcView(snap *proc.Snapshot, host ProcHost, defaultRoot, home string) *procView {
	v := &procView{snap: snap, host: host, byCwd: map[string][]*claudeProc{}, byArgv: map[string][]*claudeProc{}, starts: map[proc.Identity]time.Time{}}
	if host != nil {
		v.domHost = host
		v.dom = readHostDomain(host)
	}
	if snap == nil {
		if host != nil {
			v.boot, _ = host.BootID()
		}
		return v
	}
	v.boot = snap.BootID
	uid := os.Getuid()
	for _, p := range snap.Procs {
		if p.Exited() || !isClaudeArgv(p.Argv) || isHelperArgv(p.Argv) || snap.ForkedNotExeced(p) {
			continue
		}
		if p.UID != uid {
			// Another user's claude (or one whose owner cannot be read)
			// writes another home: its argv or cwd never claims a session
			// of this per-user daemon.
			continue
		}
		cp := &claudeProc{p: p}
		switch {
		case p.Env == nil:
		case p.Env["CLAUDE_CONFIG_DIR"] != "":
			cp.root = cleanRoot(p.Env["CLAUDE_CONFIG_DIR"], p.Cwd)
		case p.Env["HOME"] != "" && home != "" && !paths.SameDir(p.Env["HOME"], home):
			// Another home (a sandbox, another test's world): its own
			// .claude, never ours, whatever session id its argv names.
			cp.root = cleanRoot(filepath.Join(p.Env["HOME"], ".claude"), p.Cwd)
		default:
			cp.root = defaultRoot
		}
		cp.argvSession, cp.argvFlag = argvSession(p.Argv)
		v.claude = append(v.claude, cp)
		if p.Cwd != "" {
			c := filepath.Clean(p.Cwd)
			v.byCwd[c] = append(v.byCwd[c], cp)
		}
		if cp.argvSession != "" {
			v.byArgv[cp.argvSession] = append(v.byArgv[cp.argvSession], cp)
		}
	}
	return v
}

// cleanRoot makes a CLAUDE_CONFIG_DIR value an absolute clean path
// (relative to the process's cwd), or "" when it cannot.
func cleanRoot(dir, cwd string) string {
	if filepath.IsAbs(dir) {
		return filepath.Clean(dir)
	}
	if cwd == "" || strings.HasPrefix(dir, "~") {
		return ""
	}
	return filepath.Join(cwd, dir)
}

// startTime is when a process started in wall time (memoized per pass);
// ok is false when it cannot be told.
func (v *procView) startTime(id proc.Identity) (time.Time, bool) {
	if t, ok := v.starts[id]; ok {
		return t, !t.IsZero()
	}
	var t time.Time
	if v.host != nil {
		if st, err := v.host.StartTime(id); err == nil {
			t = st
		}
	}
	v.starts[id] = t
	return t, !t.IsZero()
}

// isClaudeArgv reports whether argv is a claude process: the native binary
// (argv[0] "claude" or .../claude/versions/<v>) or a JavaScript runtime
// running the npm package's cli.js or bin/claude.
func isClaudeArgv(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	if isClaudePath(argv[0]) {
		return true
	}
	switch base := filepath.Base(argv[0]); {
	case base == "node", base == "bun", strings.HasPrefix(base, "node"):
		for _, a := range argv[1:] {
			if strings.HasPrefix(a, "-") {
				continue // runtime flags
			}
			return isClaudePath(a) || strings.Contains(a, "claude-code/cli")
		}
	}
	return false
}

func isClaudePath(a string) bool {
	return filepath.Base(a) == "claude" || strings.Contains(a, "/claude/versions/")
}

// isHelperArgv reports claude helper processes, which are not sessions:
// `claude daemon run`, `--bg-spare`, `--bg-pty-host`.
func isHelperArgv(argv []string) bool {
	for i, a := range argv {
		switch {
		case a == "--bg-spare", a == "--bg-pty-host":
			return true
		case a == "daemon" && i+1 < len(argv) && argv[i+1] == "run":
			return true
		}
	}
	return false
}

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// argvSession returns the session a claude argv names and the flag that
// names it: --session-id <id> (a new session with that id), or --resume
// <id|path/<id>.jsonl> / -r <id> unless --fork-session makes a new id.
func argvSession(argv []string) (id, flag string) {
	var resume, sessionID string
	fork := false
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		if a == "--fork-session" {
			fork = true
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		if !hasVal && i+1 < len(argv) {
			val = argv[i+1]
		}
		// Claude's daemon respawns a crashed background session with
		// --resume <path of the transcript>: its file name is the id.
		if strings.HasSuffix(val, ".jsonl") && (name == "--resume" || name == "-r") {
			val = strings.TrimSuffix(filepath.Base(val), ".jsonl")
		}
		if !uuidRE.MatchString(val) {
			continue
		}
		switch name {
		case "--resume", "-r":
			resume = val
		case "--session-id":
			sessionID = val
		}
	}
	switch {
	case sessionID != "":
		return sessionID, "--session-id"
	case resume != "" && !fork:
		return resume, "--resume"
	}
	return "", ""
}

// shortArgv renders argv on one short line for a problem's detail.
func shortArgv(argv []string) string {
	return transcript.Shorten(strings.Join(argv, " "), transcript.InputMax)
}
