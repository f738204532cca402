package opencode

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/proc"
)

// ocArgs is what sessiond reads from an opencode command line.
type ocArgs struct {
	// Sub is the subcommand ("run", "serve", "web", "attach", ...), empty
	// for the TUI.
	Sub string
	// Session is the -s/--session argument.
	Session string
	// Fork is --fork: the session named by Session is copied, not resumed.
	Fork bool
	// Continue is -c/--continue (the directory's last session).
	Continue bool
	// Port is --port (0 when absent or 0); PortSet says --port was given.
	Port     int
	PortSet  bool
	Hostname string
	// Project is the TUI's positional project directory; Dir is run's --dir.
	Project string
	Dir     string
	// Message is run's message: its positional arguments joined by spaces,
	// each one holding a space quoted, exactly as opencode builds the
	// session's first prompt from them.
	Message string
}

// subcommands of opencode (1.18.33). Those in nonOwner never run a session
// themselves: attach is a client of a server, the others are utilities.
var (
	subcommands = map[string]bool{
		"run": true, "serve": true, "web": true, "attach": true, "acp": true, "tui": true,
		"auth": true, "agent": true, "upgrade": true, "uninstall": true, "models": true,
		"stats": true, "export": true, "import": true, "github": true, "pr": true, "mcp": true,
		"debug": true, "session": true, "completion": true, "db": true, "plugin": true,
	}
	nonOwner = map[string]bool{
		"attach": true, "auth": true, "agent": true, "upgrade": true, "uninstall": true, "models": true,
		"stats": true, "export": true, "import": true, "mcp": true, "debug": true, "session": true,
		"completion": true, "db": true, "plugin": true,
	}
	// valueFlags take a value (as "--flag value" or "--flag=value").
	valueFlags = map[string]bool{
		"-s": true, "--session": true, "--port": true, "--hostname": true, "-m": true, "--model": true,
		"--agent": true, "--prompt": true, "--log-level": true, "--dir": true, "-f": true, "--file": true,
		"--format": true, "--title": true, "--attach": true, "--variant": true, "--command": true,
		"--cors": true, "--mdns-domain": true, "--password": true, "--username": true,
	}
)

// parseArgs parses an opencode command line without argv[0].
func parseArgs(args []string) ocArgs {
	var a ocArgs
	var words []string
	positional := 0
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			if a.Sub == "run" {
				words = append(words, args[i+1:]...)
			}
			break
		}
		if strings.HasPrefix(arg, "-") && len(arg) > 1 {
			name, val, hasVal := strings.Cut(arg, "=")
			if valueFlags[name] && !hasVal && i+1 < len(args) {
				i++
				val, hasVal = args[i], true
			}
			switch name {
			case "-s", "--session":
				a.Session = val
			case "--fork":
				a.Fork = true
			case "-c", "--continue":
				a.Continue = true
			case "--port":
				if n, err := strconv.Atoi(val); err == nil && n >= 0 && n < 65536 {
					a.Port, a.PortSet = n, true
				}
			case "--hostname":
				a.Hostname = val
			case "--dir":
				a.Dir = val
			}
			continue
		}
		positional++
		if positional == 1 {
			if subcommands[arg] {
				a.Sub = arg
			} else {
				a.Project = arg
			}
			continue
		}
		if a.Sub == "run" {
			words = append(words, arg)
		}
	}
	for i, w := range words {
		// As 1.18.33 builds the prompt (checked on a run: the argument
		// `Run the job` is stored as "\"Run the job\""): an argument with a
		// space is quoted, its quotes escaped.
		if strings.Contains(w, " ") {
			words[i] = `"` + strings.ReplaceAll(w, `"`, `\"`) + `"`
		}
	}
	a.Message = strings.Join(words, " ")
	return a
}

var wrappers = map[string]bool{"node": true, "nodejs": true, "bun": true}

// commandLine recognizes an opencode process. It returns the arguments
// after the program, and whether the process is the node/bun wrapper
// (`node …/bin/opencode`) rather than the native binary.
func commandLine(argv []string) (args []string, wrapper, ok bool) {
	if len(argv) == 0 {
		return nil, false, false
	}
	base := filepath.Base(argv[0])
	switch {
	case base == "opencode" || base == ".opencode":
		return argv[1:], false, true
	case wrappers[base] && len(argv) > 1:
		b1 := filepath.Base(argv[1])
		if b1 == "opencode" || b1 == ".opencode" || b1 == "opencode.js" {
			return argv[2:], true, true
		}
	}
	return nil, false, false
}

// ocProc is one live opencode process of the snapshot.
type ocProc struct {
	p    *proc.Process
	args ocArgs
	// dirs are the directories the process works in: its cwd, and a TUI's
	// project argument or run's --dir resolved against it.
	dirs []string
	// start is when it started (zero if unknown).
	start time.Time
	// held are the databases it holds open (normalized paths); fdKnown is
	// false when its fds could not be read (another user, macOS).
	held    map[string]bool
	fdKnown bool
	// sockets are the inodes of its sockets, for finding listening ports.
	sockets map[uint64]bool
}

func (o *ocProc) id() proc.Identity { return o.p.Identity }

// owner reports whether the process may run sessions itself.
func (o *ocProc) owner() bool { return !nonOwner[o.args.Sub] }

// server reports whether the process serves the HTTP API.
func (o *ocProc) server() bool {
	return o.args.Sub == "serve" || o.args.Sub == "web" || o.args.PortSet
}

func (o *ocProc) inDir(dir string) bool {
	if dir == "" {
		return false
	}
	for _, d := range o.dirs {
		if d == dir {
			return true
		}
	}
	return false
}

// findOpenCode lists the opencode processes of the snapshot. The node
// wrapper whose child is the native binary with the same arguments is left
// out: the pair is one owner, the native child; so is a copy of an
// opencode between the fork and the exec of a tool (seen with the real
// 1.18.33 under load: it looks like a second "opencode run" in the same
// directory, holding the database).
func findOpenCode(snap *proc.Snapshot) []*ocProc {
	if snap == nil {
		return nil
	}
	type cand struct {
		p       *proc.Process
		args    []string
		wrapper bool
	}
	var cands []cand
	uid := os.Getuid()
	for _, p := range snap.Procs {
		if p.Exited() {
			continue
		}
		if p.UID != uid {
			// Another user's opencode (or one whose owner cannot be read)
			// works on its own data: it never owns a session of this
			// per-user daemon, by argv, directory or open files.
			continue
		}
		args, wrapper, ok := commandLine(p.Argv)
		if !ok {
			continue
		}
		cands = append(cands, cand{p, args, wrapper})
	}
	var out []*ocProc
	for _, c := range cands {
		if !c.wrapper && snap.ForkedNotExeced(c.p) { // between fork and exec of a tool
			continue
		}
		if c.wrapper {
			skip := false
			for _, k := range cands {
				if !k.wrapper && k.p.PPID == c.p.Identity.PID && slices.Equal(k.args, c.args) {
					skip = true
					break
				}
			}
			if skip {
				continue
			}
		}
		o := &ocProc{p: c.p, args: parseArgs(c.args)}
		if c.p.Cwd != "" {
			cwd := filepath.Clean(c.p.Cwd)
			o.dirs = append(o.dirs, cwd)
			for _, d := range []string{o.args.Project, o.args.Dir} {
				if d == "" {
					continue
				}
				if !filepath.IsAbs(d) {
					d = filepath.Join(cwd, d)
				}
				o.dirs = append(o.dirs, filepath.Clean(d))
			}
		}
		out = append(out, o)
	}
	return out
}

// dbKey normalizes a database path for comparing with /proc/<pid>/fd
// targets: the -wal, -shm and -journal files count as the database.
func dbKey(path string) string {
	path = strings.TrimSuffix(path, " (deleted)")
	for _, suf := range []string{"-wal", "-shm", "-journal"} {
		path = strings.TrimSuffix(path, suf)
	}
	return filepath.Clean(path)
}

// realPath resolves symlinks so a path compares with what the kernel shows.
func realPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}
