// Command fakeopencode follows OpenCode's command-line contract closely
// enough for sessiond's launch and resume tests (build it under the name
// "opencode"), and writes the 1.18.33 SQLite data OpenCode writes, holding
// the database open for its whole life as OpenCode does.
//
//	opencode run --format json [-s ID [--fork]] MESSAGE   headless
//	opencode [-s ID [--fork]] [--prompt TEXT]             interactive (waits)
//
// Environment knobs for tests:
//
//	FAKE_OPENCODE_TOOL_SLEEP=N  a bash tool part "runs" N seconds
//	FAKE_OPENCODE_TOOL_CMD=CMD  with it, run the tool for real: `bash -c
//	                            CMD`, a child in a session of its own with
//	                            OPENCODE_PID, OPENCODE and AGENT, as 1.18.33
//	                            runs one
//	FAKE_AGENT_ARGV_LOG=PATH    append the argv received, one JSON line a run
package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
)

func main() {
	if p := os.Getenv("FAKE_AGENT_ARGV_LOG"); p != "" {
		if f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			b, _ := json.Marshal(os.Args)
			f.Write(append(b, '\n'))
			f.Close()
		}
	}
	var run, fork bool
	var sessionID, message string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		switch a := args[i]; a {
		case "run":
			run = true
		case "--format":
			i++
		case "-s", "--session":
			i++
			if i < len(args) {
				sessionID = args[i]
			}
		case "--fork":
			fork = true
		case "--prompt":
			i++
			if i < len(args) {
				message = args[i]
			}
		default:
			message = a
		}
	}
	dataDir := filepath.Join(os.Getenv("XDG_DATA_HOME"), "opencode")
	if os.Getenv("XDG_DATA_HOME") == "" {
		home, _ := os.UserHomeDir()
		dataDir = filepath.Join(home, ".local", "share", "opencode")
	}
	path := filepath.Join(dataDir, "opencode.db")
	var db *opencodetest.DB
	var err error
	if _, statErr := os.Stat(path); statErr == nil {
		db, err = opencodetest.CreateWithDDL(path, "SELECT 1")
	} else {
		db, err = opencodetest.Create(path)
	}
	if err != nil {
		fail("open database: %v", err)
	}
	// Hold the database open for the process's life, as OpenCode does (the
	// pool keeps its one connection open too; this makes it explicit).
	held, err := os.Open(path)
	if err != nil {
		fail("hold database: %v", err)
	}
	defer held.Close()

	cwd, _ := os.Getwd()
	cwd, _ = filepath.EvalSymlinks(cwd)
	if sessionID != "" {
		var dir string
		if err := db.SQL().QueryRow(`SELECT directory FROM session WHERE id = ?`, sessionID).Scan(&dir); err == sql.ErrNoRows {
			fail("Error: Session not found: %s", sessionID)
		} else if err != nil {
			fail("read session: %v", err)
		}
		// Like OpenCode 1.18.33, a fork keeps the session's own directory,
		// wherever it was started from.
		if fork {
			sessionID = forkSession(db, sessionID, dir)
		}
	} else {
		s := opencodetest.Session{Directory: cwd, Title: "fake: " + message}
		if err := db.Session(s); err != nil {
			fail("create session: %v", err)
		}
		sessionID = lastSession(db)
	}
	emit := func(typ string, extra map[string]any) {
		ev := map[string]any{"type": typ, "timestamp": time.Now().UnixMilli(), "sessionID": sessionID}
		for k, v := range extra {
			ev[k] = v
		}
		b, _ := json.Marshal(ev)
		fmt.Println(string(b))
	}
	emit("step_start", nil)
	if message != "" {
		now := time.Now()
		db.Message(opencodetest.Message{SessionID: sessionID, Role: "user", Cwd: cwd, Created: now})
		asst := opencodetest.Message{ID: opencodetest.NewID("msg"), SessionID: sessionID, Cwd: cwd, Created: now}
		if n, _ := strconv.Atoi(os.Getenv("FAKE_OPENCODE_TOOL_SLEEP")); n > 0 {
			db.Message(asst)
			db.Part(opencodetest.Part{MessageID: asst.ID, SessionID: sessionID, Tool: "bash", Status: "running",
				Input: map[string]any{"command": "python3 -c 'import time; time.sleep(300)'"}, Start: now})
			db.Touch(sessionID, now)
			emit("tool_use", map[string]any{"part": map[string]any{"tool": "bash", "state": map[string]any{"status": "running"}}})
			if c := os.Getenv("FAKE_OPENCODE_TOOL_CMD"); c != "" {
				runTool(c, "OPENCODE=1", "AGENT=1", "OPENCODE_PID="+strconv.Itoa(os.Getpid()))
			}
			time.Sleep(time.Duration(n) * time.Second)
			os.Exit(0)
		}
		asst.Completed = time.Now()
		db.Message(asst)
		db.Part(opencodetest.Part{MessageID: asst.ID, SessionID: sessionID, Text: "Done: " + message})
		db.Touch(sessionID, time.Now())
		emit("text", map[string]any{"part": map[string]any{"text": "Done: " + message}})
	}
	emit("step_finish", nil)
	if !run {
		select {} // interactive: wait for the user (tests kill it)
	}
}

func lastSession(db *opencodetest.DB) string {
	var id string
	db.SQL().QueryRow(`SELECT id FROM session ORDER BY time_created DESC, id DESC LIMIT 1`).Scan(&id)
	return id
}

// forkSession copies a session's messages into a new session in dir.
func forkSession(db *opencodetest.DB, from, dir string) string {
	s := opencodetest.Session{Directory: dir, Title: "fork of " + from}
	if err := db.Session(s); err != nil {
		fail("fork: %v", err)
	}
	id := lastSession(db)
	rows, err := db.SQL().Query(`SELECT data FROM message WHERE session_id = ? ORDER BY time_created`, from)
	if err != nil {
		fail("fork: %v", err)
	}
	var datas []string
	for rows.Next() {
		var d string
		rows.Scan(&d)
		datas = append(datas, d)
	}
	rows.Close()
	for i, d := range datas {
		at := time.Now().UnixMilli() + int64(i)
		db.SQL().Exec(`INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)`,
			opencodetest.NewID("msg"), id, at, at, d)
	}
	return id
}

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	os.Exit(1)
}

// runTool starts `bash -c cmd` as OpenCode 1.18.33 starts a bash tool:
// its child, leading a session of its own, with env added. Nothing ties
// the tool's life to this process's.
func runTool(cmd string, env ...string) {
	c := exec.Command("bash", "-c", cmd)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FAKE_OPENCODE_") {
			c.Env = append(c.Env, kv)
		}
	}
	c.Env = append(c.Env, env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		fail("run the tool: %v", err)
	}
}
