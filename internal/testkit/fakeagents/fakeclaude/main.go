// Command fakeclaude follows Claude Code's command-line contract closely
// enough for sessiond's launch and resume tests, and writes the data the
// real CLI writes (2.1.328 shapes): a registry entry <root>/sessions/<pid>.json
// with procStart, and a transcript <root>/projects/<dir>/<id>.jsonl.
//
// Environment knobs for tests:
//
//	FAKE_CLAUDE_TOOL_SLEEP=N  call a Bash tool that "runs" N seconds
//	FAKE_CLAUDE_TOOL_CMD=CMD  with it, run the tool for real: `bash -c CMD`,
//	                          a child in a session of its own with
//	                          CLAUDECODE, CLAUDE_PID and
//	                          CLAUDE_CODE_SESSION_ID, as 2.1.328 runs one
//	FAKE_CLAUDE_EXIT=CODE     fail at once with a login error, exit CODE
//	FAKE_AGENT_ARGV_LOG=PATH  append the argv received, one JSON line per run
//	FAKE_CLAUDE_PROMPT_LOG=PATH  interactive: append each prompt read from
//	                          the terminal, one JSON string per line
//	FAKE_CLAUDE_TAKE_AFTER=D  interactive: show nothing of a prompt read
//	                          for D (a duration) before its turn starts
//	FAKE_CLAUDE_TURN=D        interactive: each turn is busy for D (200ms)
//
// Interactive (no -p), it reads each line typed into its terminal as a
// prompt and takes a turn with it: the registry says busy, the transcript
// gets the prompt and an answer, the registry says idle again.
package main

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if p := os.Getenv("FAKE_AGENT_ARGV_LOG"); p != "" {
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			b, _ := json.Marshal(os.Args)
			f.Write(append(b, '\n'))
			f.Close()
		}
	}
	var sessionID, resume, prompt string
	var fork, headless bool
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		next := func() string {
			if i+1 >= len(args) {
				fail(1, "error: option '%s' argument missing", args[i])
			}
			i++
			return args[i]
		}
		switch a := args[i]; a {
		case "--session-id":
			sessionID = next()
		case "--resume", "-r":
			resume = next()
		case "--fork-session":
			fork = true
		case "-p", "--print":
			headless = true
			prompt = next()
		case "--output-format", "--allowedTools", "--model":
			next()
		case "--verbose":
		default:
			if strings.HasPrefix(a, "-") {
				fail(1, "error: unknown option '%s'", a)
			}
			prompt = a
		}
	}
	if code := os.Getenv("FAKE_CLAUDE_EXIT"); code != "" {
		n, _ := strconv.Atoi(code)
		fail(n, "Invalid API key · Please run /login")
	}
	root := os.Getenv("CLAUDE_CONFIG_DIR")
	if root == "" {
		home, _ := os.UserHomeDir()
		root = filepath.Join(home, ".claude")
	}
	cwd, _ := os.Getwd()
	cwd, _ = filepath.EvalSymlinks(cwd)
	projDir := filepath.Join(root, "projects", regexp.MustCompile(`[^A-Za-z0-9]`).ReplaceAllString(cwd, "-"))
	os.MkdirAll(projDir, 0o700)

	var history []byte
	// Like Claude Code 2.1.328, --resume finds the session under any
	// project folder of the root; a continuation appends to that file, a
	// fork is written into the project folder of the cwd.
	var resumed string
	if resume != "" {
		found, _ := filepath.Glob(filepath.Join(root, "projects", "*", resume+".jsonl"))
		if len(found) == 0 {
			fail(1, "No conversation found with session ID: %s", resume)
		}
		resumed = found[0]
		b, err := os.ReadFile(resumed)
		if err != nil {
			fail(1, "No conversation found with session ID: %s", resume)
		}
		history = b
		if !fork {
			sessionID = resume
		} else if sessionID == "" {
			sessionID = uuid()
		}
	}
	if sessionID == "" {
		sessionID = uuid()
	}
	transcript := filepath.Join(projDir, sessionID+".jsonl")
	if resumed != "" && !fork {
		transcript = resumed
	}
	if fork {
		// The fork carries the history under its own id.
		os.WriteFile(transcript, bytes.ReplaceAll(history, []byte(resume), []byte(sessionID)), 0o600)
	}

	// The registry entry, as every top-level claude writes it.
	regDir := filepath.Join(root, "sessions")
	os.MkdirAll(regDir, 0o700)
	reg := filepath.Join(regDir, strconv.Itoa(os.Getpid())+".json")
	started := time.Now().UnixMilli()
	writeRegistry := func(status string) {
		e := map[string]any{"pid": os.Getpid(), "sessionId": sessionID, "cwd": cwd, "startedAt": started,
			"procStart": procStart(), "version": "2.1.328-fake", "kind": "interactive", "entrypoint": "cli",
			"status": status, "updatedAt": time.Now().UnixMilli(), "statusUpdatedAt": time.Now().UnixMilli()}
		b, _ := json.Marshal(e)
		os.WriteFile(reg, b, 0o600)
	}
	writeRegistry("busy")
	defer os.Remove(reg)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sigs; os.Remove(reg); os.Exit(143) }()

	emit := func(v map[string]any) {
		b, _ := json.Marshal(v)
		fmt.Println(string(b))
	}
	emit(map[string]any{"type": "system", "subtype": "init", "session_id": sessionID, "cwd": cwd})
	if prompt == "" && headless {
		fail(1, "Error: Input must be provided either through stdin or as a prompt argument when using --print")
	}
	last := parentOf(history)
	line := func(typ string, msg map[string]any) {
		u := uuid()
		rec := map[string]any{"parentUuid": last, "uuid": u, "isSidechain": false, "userType": "external", "entrypoint": "cli",
			"cwd": cwd, "sessionId": sessionID, "version": "2.1.328-fake", "gitBranch": "main", "type": typ,
			"timestamp": time.Now().UTC().Format(time.RFC3339Nano), "message": msg}
		last = u
		b, _ := json.Marshal(rec)
		f, err := os.OpenFile(transcript, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fail(1, "write transcript: %v", err)
		}
		f.Write(append(b, '\n'))
		f.Close()
	}
	if prompt != "" {
		line("user", map[string]any{"role": "user", "content": prompt})
		if s := os.Getenv("FAKE_CLAUDE_TOOL_SLEEP"); s != "" {
			n, _ := strconv.Atoi(s)
			tool := "toolu_01" + strings.ReplaceAll(uuid(), "-", "")[:22]
			line("assistant", map[string]any{"id": "msg_" + tool[8:], "role": "assistant", "model": "fake",
				"content": []any{map[string]any{"type": "tool_use", "id": tool, "name": "Bash",
					"input": map[string]any{"command": "python3 -c 'import time; time.sleep(300)'"}}}, "stop_reason": "tool_use"})
			if c := os.Getenv("FAKE_CLAUDE_TOOL_CMD"); c != "" {
				runTool(c, "CLAUDECODE=1", "CLAUDE_PID="+strconv.Itoa(os.Getpid()), "CLAUDE_CODE_SESSION_ID="+sessionID)
			}
			time.Sleep(time.Duration(n) * time.Second)
			line("user", map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": tool, "content": "done"}}})
		}
		line("assistant", map[string]any{"id": "msg_" + uuid()[:8], "role": "assistant", "model": "fake",
			"content": []any{map[string]any{"type": "text", "text": "Done: " + prompt}}, "stop_reason": "end_turn"})
	}
	writeRegistry("idle")
	emit(map[string]any{"type": "result", "subtype": "success", "is_error": false, "session_id": sessionID})
	if !headless {
		// Interactive: a turn for each line typed, until the terminal
		// ends; then wait for the user (tests kill it).
		take := duration("FAKE_CLAUDE_TAKE_AFTER", 0)
		turn := duration("FAKE_CLAUDE_TURN", 200*time.Millisecond)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			p := strings.TrimSpace(sc.Text())
			if p == "" {
				continue
			}
			time.Sleep(take)
			if path := os.Getenv("FAKE_CLAUDE_PROMPT_LOG"); path != "" {
				if f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
					b, _ := json.Marshal(p)
					f.Write(append(b, '\n'))
					f.Close()
				}
			}
			writeRegistry("busy")
			line("user", map[string]any{"role": "user", "content": p})
			time.Sleep(turn)
			line("assistant", map[string]any{"id": "msg_" + uuid()[:8], "role": "assistant", "model": "fake",
				"content": []any{map[string]any{"type": "text", "text": "Done: " + p}}, "stop_reason": "end_turn"})
			writeRegistry("idle")
		}
		select {}
	}
}

// duration reads a duration from the environment variable name.
func duration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

// parentOf returns the uuid of the last line of a transcript.
func parentOf(history []byte) any {
	lines := bytes.Split(bytes.TrimSpace(history), []byte("\n"))
	if len(lines) == 0 || len(lines[0]) == 0 {
		return nil
	}
	var v struct {
		UUID string `json:"uuid"`
	}
	json.Unmarshal(lines[len(lines)-1], &v)
	return v.UUID
}

// procStart is field 22 of /proc/self/stat, as Claude Code records it.
func procStart() string {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	return f[19]
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func fail(code int, format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(code)
}

// runTool starts `bash -c cmd` as Claude Code 2.1.328 starts a Bash tool:
// its child, leading a session of its own, with env added. Nothing ties
// the tool's life to this process's.
func runTool(cmd string, env ...string) {
	c := exec.Command("bash", "-c", cmd)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FAKE_CLAUDE_") {
			c.Env = append(c.Env, kv)
		}
	}
	c.Env = append(c.Env, env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		fail(1, "run the tool: %v", err)
	}
}
