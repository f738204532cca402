package pi

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/paths"
	"github.com/sessiond/sessiond/proc"
)

// piArgs is what sessiond reads from a pi command line.
type piArgs struct {
	// Session is --session: a session file's path, or a session id (or
	// its start).
	Session string
	// SessionDir is --session-dir: sessions kept elsewhere than the root.
	SessionDir string
	// NoSession is --no-session: nothing is written.
	NoSession bool
	// Continue is -c/--continue, Resume -r/--resume.
	Continue, Resume bool
}

// valueFlags take a value (as "--flag value" or "--flag=value"). Pi's
// flags that take one, from `pi --help` (docs/agents/pi.md): a value
// must not be read as another flag or the session.
var valueFlags = map[string]bool{
	"--provider": true, "--model": true, "--api-key": true, "--system-prompt": true,
	"--append-system-prompt": true, "--mode": true, "--session": true, "--session-dir": true,
	"--models": true, "--tools": true, "--thinking": true, "--export": true, "--extension": true,
	"-e": true, "--skill": true, "--prompt-template": true, "--theme": true, "--fork": true,
}

// parseArgs parses a pi command line without the program.
func parseArgs(args []string) piArgs {
	var a piArgs
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			break
		}
		if !strings.HasPrefix(arg, "-") || len(arg) < 2 {
			continue
		}
		name, val, hasVal := strings.Cut(arg, "=")
		if valueFlags[name] && !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		switch name {
		case "--session":
			a.Session = val
		case "--session-dir":
			a.SessionDir = val
		case "--no-session":
			a.NoSession = true
		case "-c", "--continue":
			a.Continue = true
		case "-r", "--resume":
			a.Resume = true
		}
	}
	return a
}

// commandLine recognizes a pi process and returns its arguments after the
// program: the npm bin (`node …/.bin/pi …`), Pi's cli.js run by node or
// bun, or a process that calls itself pi.
func commandLine(argv []string) (args []string, ok bool) {
	if len(argv) == 0 {
		return nil, false
	}
	switch base := filepath.Base(argv[0]); {
	case base == "pi":
		return argv[1:], true
	case (base == "node" || base == "nodejs" || base == "bun") && len(argv) > 1:
		a1 := argv[1]
		if filepath.Base(a1) == "pi" || (filepath.Base(a1) == "cli.js" && strings.Contains(a1, "pi-coding-agent")) {
			return argv[2:], true
		}
	}
	return nil, false
}

// piProc is one live pi process of the snapshot.
type piProc struct {
	p     *proc.Process
	args  piArgs
	start time.Time // zero if unknown
	// files are the session files it holds open (paths as the kernel
	// names them); fdKnown is false when its descriptors could not be
	// read.
	files   map[string]bool
	fdKnown bool
	// matches is how many known sessions an id prefix given with
	// --session names: Pi takes the first it finds, so a prefix that
	// names several names none of them exactly.
	matches int
}

func (o *piProc) id() proc.Identity { return o.p.Identity }

// findPi lists the live pi processes of this user in snap, with their
// start times and the session files they hold open.
func (a *Adapter) findPi(snap *proc.Snapshot) []*piProc {
	if snap == nil {
		return nil
	}
	uid := os.Getuid()
	var out []*piProc
	for _, p := range snap.Procs {
		if p.Exited() || p.UID != uid {
			continue
		}
		args, ok := commandLine(p.Argv)
		if !ok || snap.ForkedNotExeced(p) {
			// A copy of a pi between the fork and the exec of a tool looks
			// like a second pi in the same directory (seen with the real
			// 0.73.1): its identity survives the exec, so taken for an
			// owner it would keep a killed session alive while the tool
			// runs.
			continue
		}
		o := &piProc{p: p, args: parseArgs(args), files: map[string]bool{}}
		if t, err := a.cfg.Host.StartTime(p.Identity); err == nil {
			o.start = t
		}
		if d, err := a.cfg.Host.OpenFiles(p.Identity.PID); err == nil {
			o.fdKnown = true
			for _, f := range d.Files {
				if sessionName.MatchString(filepath.Base(f)) {
					o.files[f] = true
				}
			}
		}
		out = append(out, o)
	}
	return out
}

// dirName is the folder Pi keeps a directory's sessions in:
// --<cwd without its leading /, each / as ->--.
func dirName(cwd string) string {
	s := strings.TrimPrefix(cwd, "/")
	s = strings.NewReplacer("/", "-", `\`, "-", ":", "-").Replace(s)
	return "--" + s + "--"
}

// hotDirs are the project folders live pi processes may be writing in:
// their files are stat'ed every pass.
func hotDirs(procs []*piProc) map[string]bool {
	out := map[string]bool{}
	for _, o := range procs {
		if o.p.Cwd != "" {
			out[dirName(o.p.Cwd)] = true
		}
		for f := range o.files {
			out[filepath.Base(filepath.Dir(f))] = true
		}
	}
	return out
}

// startSlack allows for the resolution of process start times when
// comparing them with a write time.
const startSlack = 2 * time.Second

// ownersOf lists the processes that own or may own f's session:
//   - exactly, those that hold the file open, or name it (its path or its
//     id) with --session;
//   - else, inferred, every pi working in the session's directory that
//     started before the file's last write and is not on another session
//     by those same signs: Pi writes nothing that names its process, so
//     with two pi in one directory each of their sessions has both as
//     candidates (owner_ambiguous) and stops only when both are dead.
func (a *Adapter) ownersOf(f *fileState, procs []*piProc) []adapters.Owner {
	if len(procs) == 0 {
		return nil
	}
	real := f.path
	if r, err := filepath.EvalSymlinks(f.path); err == nil {
		real = r
	}
	var out []adapters.Owner
	for _, o := range procs {
		switch {
		case o.files[real]:
			out = append(out, adapters.Owner{Identity: o.id(), Evidence: "holds " + f.path + " open"})
		case o.args.Session != "" && namesSession(o, f):
			if o.matches > 1 {
				out = append(out, adapters.Owner{Identity: o.id(), Inferred: true,
					Evidence: fmt.Sprintf("argv --session %s, a prefix of %d session ids", o.args.Session, o.matches)})
				continue
			}
			out = append(out, adapters.Owner{Identity: o.id(), Evidence: "argv --session " + o.args.Session})
		}
	}
	if len(out) > 0 {
		return out
	}
	dir := filepath.Base(filepath.Dir(f.path))
	for _, o := range procs {
		if o.args.NoSession || o.args.Session != "" || len(o.files) > 0 || o.p.Cwd == "" {
			continue // writes nothing, or is on a session it names
		}
		if dirName(o.p.Cwd) != dir && (f.head.Cwd == "" || !paths.SameDir(o.p.Cwd, f.head.Cwd)) {
			continue
		}
		if f.read && !o.start.IsZero() && o.start.After(f.mtime.Add(startSlack)) {
			continue // started after the session's last write
		}
		ev := "cwd matches the session's directory, started before its last write"
		if !o.fdKnown {
			ev += " (open files not checked)"
		}
		out = append(out, adapters.Owner{Identity: o.id(), Inferred: true, Evidence: ev})
	}
	return out
}

// countMatches counts, for each pi that names a session by an id prefix,
// the known sessions the prefix names.
func (a *Adapter) countMatches(procs []*piProc) {
	for _, o := range procs {
		if o.args.Session == "" || isPathArg(o.args.Session) {
			continue
		}
		for _, path := range a.order {
			for _, f := range a.roots[path].files {
				if namesSession(o, f) {
					o.matches++
				}
			}
		}
	}
}

func isPathArg(s string) bool {
	return strings.HasSuffix(s, ".jsonl") || strings.ContainsRune(s, '/') || strings.ContainsRune(s, '\\')
}

// namesSession reports whether o's --session names f: its path (relative
// to o's cwd) or its id, whole or its start.
func namesSession(o *piProc, f *fileState) bool {
	s := o.args.Session
	if isPathArg(s) {
		if !filepath.IsAbs(s) {
			if o.p.Cwd == "" {
				return false
			}
			s = filepath.Join(o.p.Cwd, s)
		}
		return filepath.Clean(s) == f.path || paths.SameDir(s, f.path)
	}
	return strings.HasPrefix(f.id, s)
}
