package qwen

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sessiond/sessiond/proc"
)

// Qwen Code's processes. `qwen` is a node script (the npm package's
// cli-entry.js), which runs `node --expose-gc …/cli.js <args>` with
// spawnSync; that one relaunches itself once more, the same way, with
// QWEN_CODE_NO_RELAUNCH=true, and the innermost does the work: it writes
// the chat, registers a TUI in the session registry, and runs the tools.
// All three have the same arguments, and a kill -9 of the innermost ends
// the other two (each exits as its child did); a kill -9 of an outer one
// leaves the inner running. So the owner is the innermost: a qwen process
// with no qwen child of the same arguments. Checked on 0.24.4.

// qwenArgs is what sessiond reads from a qwen command line.
type qwenArgs struct {
	// Sub is a subcommand (mcp, sessions, …), empty for a session run.
	Sub string
	// Session names a session: --session-id, or --resume/-r with an id.
	Session string
	// Fork: --fork-session, the resumed session is copied to a new one.
	Fork bool
	// Continue: -c/--continue (the project's last session).
	Continue bool
	// Prompt is the prompt the run starts with: -p, -i, or the positional
	// words.
	Prompt string
}

// nonOwner subcommands run no session.
var nonOwner = map[string]bool{
	"auth": true, "board": true, "channel": true, "extensions": true, "hooks": true,
	"mcp": true, "sandbox": true, "sessions": true, "update": true,
}

// subcommands of qwen 0.24.4.
var subcommands = map[string]bool{
	"auth": true, "board": true, "channel": true, "extensions": true, "hooks": true,
	"mcp": true, "review": true, "sandbox": true, "serve": true, "sessions": true, "update": true,
}

// valueFlags take one value; arrayFlags take every value up to the next
// flag (yargs arrays). --resume and --worktree take one when it follows.
var (
	valueFlags = map[string]bool{
		"--telemetry-target": true, "--telemetry-otlp-endpoint": true, "--telemetry-otlp-protocol": true,
		"--telemetry-outfile": true, "--proxy": true, "-m": true, "--model": true, "-p": true, "--prompt": true,
		"-i": true, "--prompt-interactive": true, "--system-prompt": true, "--append-system-prompt": true,
		"--output-style": true, "--sandbox-image": true, "--approval-mode": true, "--channel": true,
		"--mcp-config": true, "--openai-logging-dir": true, "--openai-api-key": true, "--openai-base-url": true,
		"--input-format": true, "-o": true, "--output-format": true, "--json-fd": true, "--json-file": true,
		"--json-schema": true, "--input-file": true, "-r": true, "--resume": true, "--session-id": true,
		"--worktree": true, "--max-session-turns": true, "--max-wall-time": true, "--max-tool-calls": true,
		"--max-subagent-depth": true, "--auth-type": true,
	}
	arrayFlags = map[string]bool{
		"--fallback-model": true, "--allowed-mcp-server-names": true, "--allowed-tools": true, "-e": true,
		"--extensions": true, "--include-directories": true, "--add-dir": true, "--core-tools": true,
		"--exclude-tools": true, "--disabled-slash-commands": true,
	}
	optionalValue = map[string]bool{"-r": true, "--resume": true, "--worktree": true}
)

// parseArgs parses a qwen command line after the script.
func parseArgs(args []string) qwenArgs {
	var a qwenArgs
	var words []string
	prompt, hasPrompt := "", false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if arg == "--" {
			words = append(words, args[i+1:]...)
			break
		}
		if len(arg) > 1 && arg[0] == '-' {
			name, val, hasVal := strings.Cut(arg, "=")
			switch {
			case arrayFlags[name]:
				for !hasVal && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					i++
				}
				continue
			case valueFlags[name] && !hasVal && i+1 < len(args):
				if optionalValue[name] && strings.HasPrefix(args[i+1], "-") {
					break
				}
				i++
				val, hasVal = args[i], true
			}
			switch name {
			case "--session-id", "-r", "--resume":
				if hasVal {
					a.Session = val
				}
			case "--fork-session":
				a.Fork = true
			case "-c", "--continue":
				a.Continue = true
			case "-p", "--prompt", "-i", "--prompt-interactive":
				if hasVal {
					prompt, hasPrompt = val, true
				}
			}
			continue
		}
		if len(words) == 0 && a.Sub == "" && subcommands[arg] {
			a.Sub = arg
			continue
		}
		words = append(words, arg)
	}
	if a.Sub == "" {
		if hasPrompt {
			a.Prompt = prompt
		} else {
			a.Prompt = strings.Join(words, " ")
		}
	}
	return a
}

// commandLine recognizes a qwen process: node running the package's
// bin/qwen, cli-entry.js or cli.js, node options before the script. It
// returns the arguments after the script.
func commandLine(argv []string) ([]string, bool) {
	if len(argv) < 2 || !strings.HasPrefix(filepath.Base(argv[0]), "node") {
		return nil, false
	}
	i := 1
	for i < len(argv) && strings.HasPrefix(argv[i], "-") {
		i++ // node's own options (--expose-gc)
	}
	if i >= len(argv) {
		return nil, false
	}
	script := argv[i]
	switch base := filepath.Base(script); {
	case base == "qwen":
	case base == "cli.js" || base == "cli-entry.js":
		if filepath.Base(filepath.Dir(script)) != "qwen-code" {
			return nil, false
		}
	default:
		return nil, false
	}
	return argv[i+1:], true
}

// qwenProc is one live qwen process that may own sessions.
type qwenProc struct {
	p    *proc.Process
	args qwenArgs
	// sessionVar is the QWEN_CODE_SESSION_ID in its own environment: one
	// it inherited (it was started by another qwen's tool), never its own.
	sessionVar string
}

func (q *qwenProc) id() proc.Identity { return q.p.Identity }

// findQwen lists the live qwen processes of this user that may own a
// session: the innermost of each chain (see above).
func findQwen(snap *proc.Snapshot) []*qwenProc {
	if snap == nil {
		return nil
	}
	uid := os.Getuid()
	type cand struct {
		p    *proc.Process
		args []string
	}
	byPID := map[int]cand{}
	for _, p := range snap.Procs {
		if p.UID != uid || p.Exited() {
			continue
		}
		if args, ok := commandLine(p.Argv); ok {
			byPID[p.Identity.PID] = cand{p, args}
		}
	}
	var out []*qwenProc
	for pid, c := range byPID {
		outer := false
		for _, other := range byPID {
			if other.p.PPID == pid && slices.Equal(other.args, c.args) {
				outer = true
				break
			}
		}
		if outer {
			continue
		}
		a := parseArgs(c.args)
		if nonOwner[a.Sub] {
			continue
		}
		out = append(out, &qwenProc{p: c.p, args: a, sessionVar: c.p.Env[sessionVar]})
	}
	slices.SortFunc(out, func(x, y *qwenProc) int { return x.p.Identity.PID - y.p.Identity.PID })
	return out
}

// isQwenArgv says whether argv is any qwen process (wrappers included).
func isQwenArgv(argv []string) bool {
	_, ok := commandLine(argv)
	return ok
}
