package realagents

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// opencodeKilledProblems are what a kill -9 of OpenCode mid tool leaves: the
// assistant message never completed, its tool part running, the tool's
// python3 orphaned.
var opencodeKilledProblems = []session.ProblemKind{
	session.ProblemIncompleteMessage, session.ProblemOrphanedToolCall, session.ProblemOrphanProcesses,
}

// opencodeSessionWithText is the OpenCode session whose text parts contain
// marker ("" while there is none), read-only from the database.
func (w *world) opencodeSessionWithText(marker string) string {
	w.t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.opencodeDB()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close()
	var id string
	err = db.QueryRow(`SELECT session_id FROM part WHERE json_extract(data, '$.type') = 'text'
		AND instr(json_extract(data, '$.text'), ?) > 0 ORDER BY time_created LIMIT 1`, marker).Scan(&id)
	if err != nil {
		return "" // no database, no table or no row yet
	}
	return id
}

// waitOpenCodeSession waits for the session a prompt with marker created.
func (w *world) waitOpenCodeSession(marker string, diag func() string) string {
	w.t.Helper()
	var id string
	w.waitFor(60*time.Second, "an OpenCode session with the prompt "+marker, func() (bool, string) {
		id = w.opencodeSessionWithText(marker)
		return id != "", diag()
	})
	return id
}

// waitOpenCodeTurnDone waits until the session's last turn is over in the
// data: the last message is an assistant message with time.completed, no
// tool part is pending or running, and the model has ended a turn.
func (w *world) waitOpenCodeTurnDone(id string, diag func() string) {
	w.t.Helper()
	w.waitFor(60*time.Second, "OpenCode session "+id+"'s turn done", func() (bool, string) {
		msgs := w.opencodeMessages(id)
		if len(msgs) == 0 {
			return false, "no messages\n" + diag()
		}
		last := msgs[len(msgs)-1]
		tm, _ := last.Data["time"].(map[string]any)
		states := strings.Join(w.opencodeToolStates(id), " ")
		done := last.Role == "assistant" && tm["completed"] != nil && !strings.Contains(states, "running") && !strings.Contains(states, "pending")
		return done, fmt.Sprintf("last %s %v, tools %s\n%s", last.Role, last.Data["time"], states, diag())
	})
}

// waitOpenCodeTool waits until a python3 tool of the opencode process pid
// runs.
func (w *world) waitOpenCodeTool(pid int, diag func() string) procInfo {
	w.t.Helper()
	var py procInfo
	w.waitFor(90*time.Second, fmt.Sprintf("opencode %d's python3 tool running", pid), func() (bool, string) {
		for _, p := range opencodeTools(pid) {
			if isPython(p) {
				py = p
				return true, ""
			}
		}
		return false, diag()
	})
	return py
}

// opencodeBusyThenKilled: the owner's long tool runs; the session is
// running and busy with exactly that owner; kill -9 makes it interrupted
// with the problems a kill leaves.
func (w *world) opencodeBusyThenKilled(up string, owner int, diag func() string) {
	w.t.Helper()
	py := w.waitOpenCodeTool(owner, diag)
	w.step("tool running")
	s := w.waitUpstream(up, 30*time.Second, "running and busy", runningWith(session.ActivityBusy))
	w.checkOwner(s, owner, "opencode")
	w.step("running/busy, owner the opencode process")
	w.killInterrupted(s, owner, opencodeKilledProblems...)
	s = w.Show(s.ID)
	if d := problemDetails(s, session.ProblemOrphanProcesses); !strings.Contains(d, "pid "+itoa(py.PID)+" ") {
		w.t.Errorf("orphan_processes %q does not name the orphaned python3 %d", d, py.PID)
	}
}

// Matrix: the OpenCode TUI typed into a tmux pane. Its first prompt runs a
// short tool and ends: running and idle with the opencode process as owner;
// its second runs the long tool: busy; kill -9: interrupted.
func TestOpenCodeInteractiveTmux(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"SHORT-5d2": fakemodel.RunCommand("echo SHORT-OUTPUT-5d2", "Print a marker", 0),
		"LONG-8a4":  longJob(""),
	}))
	w.startDaemon("--opencode-bin", bin, "--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	p := w.startTmux(bin).newPane(w.proj())
	p.typeLine("opencode")
	p.waitScreen(90*time.Second, "Ask anything")
	oc, ok := p.child(func(procInfo) bool { return true })
	if !ok {
		t.Fatalf("no process under the pane's shell %d", p.ShellPID)
	}
	t.Logf("opencode pid %d (shell %d) %q", oc.PID, p.ShellPID, oc.Args)
	w.step("opencode TUI up")
	diag := func() string { return compactScreen(p.capture()) }

	p.typeLine("Print the marker, SHORT-5d2")
	up := w.waitOpenCodeSession("SHORT-5d2", diag)
	lw.claim("opencode", up, oc.PID)
	w.waitOpenCodeTurnDone(up, diag)
	s := w.waitUpstream(up, 30*time.Second, "running and idle after the first turn", runningWith(session.ActivityIdle))
	w.checkOwner(s, oc.PID, "opencode TUI")
	w.checkPane(up, p)
	w.step("turn done: running/idle, owner the opencode process, in its pane")

	p.typeLine("Run the long job, marker LONG-8a4")
	w.opencodeBusyThenKilled(up, oc.PID, diag)
}

// Matrix: `opencode run` started by hand: running and busy with its process
// as owner, interrupted after kill -9.
func TestOpenCodeRunOutside(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"LONG-2f7": longJob("")}))
	w.startDaemon("--opencode-bin", bin, "--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	cmd, out := w.start("opencode run", w.proj(), bin, "run", "Run the long job, marker LONG-2f7")
	diag := func() string { return tail(out.String(), 2000) }
	up := w.waitOpenCodeSession("LONG-2f7", diag)
	lw.claim("opencode", up, cmd.Process.Pid)
	w.opencodeBusyThenKilled(up, cmd.Process.Pid, diag)
}

// postJSON POSTs v as JSON and decodes the answer into out (if not nil).
func postJSON(url string, v, out any) error {
	b, _ := json.Marshal(v)
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Matrix: a session driven through `opencode serve`'s HTTP API. Created and
// not yet prompted, then after a short turn, it is running and idle with
// the server as owner; its long tool makes it busy; kill -9 of the server:
// interrupted.
func TestOpenCodeServeHTTP(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{
		"SHORT-61c": fakemodel.RunCommand("echo SHORT-OUTPUT-61c", "Print a marker", 0),
		"LONG-e03":  longJob(""),
	}))
	w.startDaemon("--opencode-bin", bin, "--grace", "5s")
	lw := w.watchLiveNeverDead()
	sv := w.startOpenCodeServer(bin)
	w.step("daemon ready, opencode serve healthy")

	var created struct {
		ID        string `json:"id"`
		Directory string `json:"directory"`
	}
	if err := postJSON(sv.URL+"/session", map[string]any{}, &created); err != nil || !strings.HasPrefix(created.ID, "ses_") {
		t.Fatalf("POST /session: %v %+v", err, created)
	}
	up := created.ID
	lw.claim("opencode", up, sv.PID)
	if created.Directory != w.proj() {
		t.Errorf("session directory %s, want %s", created.Directory, w.proj())
	}
	diag := func() string {
		var st map[string]any
		getJSON(sv.URL+"/session/status", &st)
		return fmt.Sprintf("server status %v", st)
	}
	prompt := func(text string) {
		t.Helper()
		body := map[string]any{"parts": []map[string]any{{"type": "text", "text": text}}}
		if err := postJSON(sv.URL+"/session/"+up+"/prompt_async", body, nil); err != nil {
			t.Fatal(err)
		}
	}

	s := w.waitUpstream(up, 30*time.Second, "running and idle before any prompt", runningWith(session.ActivityIdle))
	w.checkOwner(s, sv.PID, "opencode serve")
	w.step("created: running/idle, owner the server")

	prompt("Print the marker, SHORT-61c")
	w.waitOpenCodeTurnDone(up, diag)
	s = w.waitUpstream(up, 30*time.Second, "running and idle after the first turn", runningWith(session.ActivityIdle))
	w.checkOwner(s, sv.PID, "opencode serve")
	w.step("turn done: running/idle, owner the server")

	prompt("Run the long job, marker LONG-e03")
	w.opencodeBusyThenKilled(up, sv.PID, diag)
}

// Matrix: two `opencode run` at once in the same directory (one database,
// one cwd): each session's owner is its own process, never the other;
// killing one interrupts only its session while the other stays running
// and busy with its owner; then the other.
func TestOpenCodeTwoSessionsSameDir(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	w.model.SetHandler(markerScript(map[string]fakemodel.Reply{"RUN-A": longJob("A"), "RUN-B": longJob("B")}))
	w.startDaemon("--opencode-bin", bin, "--grace", "5s")
	lw := w.watchLiveNeverDead()
	w.step("daemon ready")

	type run struct {
		tag string
		pid int
		out interface{ String() string }
		up  string
		s   api.Session
	}
	// The second starts once the first has made its session: two opencode
	// processes started at once on a data dir that has no database yet
	// race its migrations, and one dies ("Failed query: CREATE TABLE
	// `workspace`", seen on 1.18.33 in CI). A user's data dir has its
	// database long before; both then run at once.
	var runs []*run
	for _, tag := range []string{"A", "B"} {
		cmd, out := w.start("opencode run "+tag, w.proj(), bin, "run", "Run the long job, marker RUN-"+tag)
		r := &run{tag: tag, pid: cmd.Process.Pid, out: out}
		runs = append(runs, r)
		r.up = w.waitOpenCodeSession("RUN-"+r.tag, func() string { return tail(r.out.String(), 2000) })
	}
	for _, r := range runs {
		diag := func() string { return tail(r.out.String(), 2000) }
		lw.claim("opencode", r.up, r.pid)
		py := w.waitOpenCodeTool(r.pid, diag)
		if py.Args[len(py.Args)-1] != r.tag {
			t.Fatalf("opencode %d runs the tool %q, want the one tagged %s", r.pid, py.Args, r.tag)
		}
	}
	if runs[0].up == runs[1].up {
		t.Fatalf("both opencode processes run session %s", runs[0].up)
	}
	w.step("both tools running")
	for _, r := range runs {
		r.s = w.waitUpstream(r.up, 30*time.Second, "running and busy", runningWith(session.ActivityBusy))
	}
	for _, r := range runs {
		w.checkOwner(w.Show(r.s.ID), r.pid, "opencode run "+r.tag)
	}
	w.step("both running/busy, owners checked")

	w.killInterrupted(runs[0].s, runs[0].pid, opencodeKilledProblems...)
	s := w.Show(runs[1].s.ID)
	if s.Status != session.StatusRunning || s.Activity != session.ActivityBusy {
		t.Fatalf("the other session after the first was killed: %s", sessionLine(s))
	}
	w.checkOwner(s, runs[1].pid, "the other opencode run")
	w.killInterrupted(runs[1].s, runs[1].pid, opencodeKilledProblems...)
}
