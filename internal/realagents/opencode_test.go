package realagents

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/session"
)

// opencodeDB is the database an OpenCode in this world writes.
func (w *world) opencodeDB() string {
	return filepath.Join(w.Home, ".local", "share", "opencode", "opencode.db")
}

// ocMessage is a message row with its decoded data.
type ocMessage struct {
	ID   string
	Role string
	Data map[string]any
}

// opencodeMessages reads a session's messages, oldest first, read-only.
func (w *world) opencodeMessages(sessionID string) []ocMessage {
	w.t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.opencodeDB()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id`, sessionID)
	if err != nil {
		w.t.Fatalf("read messages of %s: %v", sessionID, err)
	}
	defer rows.Close()
	var out []ocMessage
	for rows.Next() {
		var m ocMessage
		var data string
		if err := rows.Scan(&m.ID, &data); err != nil {
			w.t.Fatal(err)
		}
		json.Unmarshal([]byte(data), &m.Data)
		m.Role, _ = m.Data["role"].(string)
		out = append(out, m)
	}
	return out
}

// opencodeTools are the live tool processes of an opencode process.
func opencodeTools(owner int) []procInfo {
	return procs(func(p procInfo) bool { return p.Env["OPENCODE_PID"] == itoa(owner) })
}

// Scenario 5: an OpenCode session launched through sessiond is linked to
// the ses_ id OpenCode picked; a resume continues that same id with new
// messages, and the model sees the earlier turns.
func TestOpenCodeLaunchResumeSameSession(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	w.model.Enqueue(
		fakemodel.RunCommand("echo TOOL-OUTPUT-5a1", "Print a marker", 0),
		fakemodel.Say("First turn done, marker FIRST-ANSWER-88b."),
	)
	w.startDaemon("--opencode-bin", bin, "--grace", "5s")
	w.step("daemon ready")

	r := w.launch("launch", "--agent", "opencode", "--cwd", w.proj(), "--prompt", "Print the marker FIRST-PROMPT-3d0")
	id := r.Session.ID
	s := w.waitSession(id, 60*time.Second, "linked to a ses_ id with a resume cursor", func(s api.Session) bool {
		return strings.HasPrefix(s.UpstreamID, "ses_") && s.Resume != nil
	})
	up := s.UpstreamID
	w.step("linked " + up)
	if s.Resume.UpstreamID != up || s.Resume.Cwd != w.proj() || s.Resume.Root != filepath.Dir(w.opencodeDB()) {
		t.Errorf("resume cursor %+v", s.Resume)
	}
	// The status comes from the owner's death; the exit status from the
	// launcher a moment later.
	s = w.waitSession(id, 60*time.Second, "stopped after the first turn, exit collected", func(s api.Session) bool {
		return s.Status == session.StatusStopped && s.Exit != nil
	})
	if s.Exit == nil || s.Exit.Code != 0 || len(s.Problems) != 0 {
		t.Fatalf("first run ended %+v with problems %v; log:\n%s", s.Exit, problemKinds(s), logTail(r.LogPath))
	}
	if s.Title != "Fake session" {
		t.Errorf("title %q, want the one OpenCode generated with the model (Fake session)", s.Title)
	}
	w.step("first turn stopped")
	before := w.opencodeMessages(up)
	if len(before) < 2 {
		t.Fatalf("%d messages in %s after the first turn", len(before), up)
	}

	w.model.Enqueue(fakemodel.Say("Second answer, marker SECOND-ANSWER-c47."))
	n := len(w.model.Turns())
	r2 := w.launch("resume", id, "--prompt", "And again, marker SECOND-PROMPT-e19")
	if r2.Session.ID != id || r2.Session.UpstreamID != up || r2.Fresh || r2.Forked {
		t.Fatalf("resume answer %+v", r2)
	}
	w.step("resumed")
	s = w.waitSession(id, 60*time.Second, "stopped after the resumed turn", func(s api.Session) bool {
		return s.Status == session.StatusStopped && s.Exit != nil && s.Exit.PID == r2.Session.PID
	})
	if s.Exit.Code != 0 || len(s.Problems) != 0 || s.UpstreamID != up {
		t.Fatalf("resumed run ended %+v, upstream %s, problems %v; log:\n%s", s.Exit, s.UpstreamID, problemKinds(s), logTail(r2.LogPath))
	}
	w.step("resumed turn stopped")

	after := w.opencodeMessages(up)
	if len(after) <= len(before) {
		t.Fatalf("the same session got no new messages: %d -> %d", len(before), len(after))
	}
	for i, m := range before {
		if after[i].ID != m.ID {
			t.Fatalf("message %d changed from %s to %s", i, m.ID, after[i].ID)
		}
	}
	var newUser bool
	for _, m := range after[len(before):] {
		if m.Role == "user" {
			newUser = true
		}
	}
	if !newUser {
		t.Errorf("no new user message in %s", up)
	}
	var resumed *fakemodel.Request
	for _, tr := range w.model.Turns()[n:] {
		if strings.Contains(tr.LastUserText(), "SECOND-PROMPT-e19") {
			resumed = tr
		}
	}
	if resumed == nil {
		t.Fatal("the model never got the resumed prompt")
	}
	if txt := resumed.Text(); !strings.Contains(txt, "FIRST-PROMPT-3d0") || !strings.Contains(txt, "TOOL-OUTPUT-5a1") || !strings.Contains(txt, "FIRST-ANSWER-88b") {
		t.Fatalf("the resumed request lacks the earlier turns:\n%s", tail(txt, 3000))
	}
	// With the busy timeout the other reads here use: opencode has just
	// exited, and a read-only connection without it can fail with
	// SQLITE_BUSY, which once read as "0 sessions".
	db, err := sql.Open("sqlite", "file:"+w.opencodeDB()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	var sessions int
	err = db.QueryRow(`SELECT count(*) FROM session`).Scan(&sessions)
	db.Close()
	if err != nil {
		t.Fatalf("count OpenCode sessions: %v", err)
	}
	if sessions != 1 {
		t.Errorf("%d OpenCode sessions, want the one resumed", sessions)
	}
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ocServer is a real `opencode serve` of this world.
type ocServer struct {
	URL string
	PID int
}

// startOpenCodeServer runs `opencode serve` on 127.0.0.1 and waits until
// GET /global/health answers healthy.
func (w *world) startOpenCodeServer(bin string) ocServer {
	w.t.Helper()
	port := freePort(w.t)
	cmd, out := w.start("opencode serve", w.proj(), bin, "serve", "--port", itoa(port), "--hostname", "127.0.0.1")
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	w.waitFor(60*time.Second, "opencode serve healthy", func() (bool, string) {
		var h struct {
			Healthy bool   `json:"healthy"`
			Version string `json:"version"`
		}
		if err := getJSON(url+"/global/health", &h); err != nil || !h.Healthy {
			return false, fmt.Sprintf("%v %+v; output %s", err, h, tail(out.String(), 1000))
		}
		return true, ""
	})
	return ocServer{URL: url, PID: cmd.Process.Pid}
}

func getJSON(url string, v any) error {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// serverMessage is a message as `GET /session/:id/message` returns it.
type serverMessage struct {
	Info struct {
		ID   string `json:"id"`
		Role string `json:"role"`
		Time struct {
			Created   int64  `json:"created"`
			Completed *int64 `json:"completed"`
		} `json:"time"`
		Error map[string]any `json:"error"`
	} `json:"info"`
	Parts []struct {
		ID    string `json:"id"`
		Type  string `json:"type"`
		Tool  string `json:"tool"`
		State struct {
			Status   string         `json:"status"`
			Error    string         `json:"error"`
			Metadata map[string]any `json:"metadata"`
		} `json:"state"`
	} `json:"parts"`
}

// serverMessages asks a server for a session's messages.
func (w *world) serverMessages(sv ocServer, id string) ([]serverMessage, error) {
	var msgs []serverMessage
	err := getJSON(sv.URL+"/session/"+id+"/message", &msgs)
	return msgs, err
}

// inFlightOnServer describes what the server still shows in flight: tool
// parts pending or running, and whether the last assistant message is
// completed.
func inFlightOnServer(msgs []serverMessage) (pending []string, lastCompleted bool) {
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool" && (p.State.Status == "pending" || p.State.Status == "running") {
				pending = append(pending, p.ID+" "+p.State.Status)
			}
		}
		if m.Info.Role == "assistant" {
			lastCompleted = m.Info.Time.Completed != nil && *m.Info.Time.Completed > 0
		}
	}
	return pending, lastCompleted
}

// interruptedOnServer reports whether a tool part is marked error with
// metadata.interrupted, as OpenCode marks its own abandoned calls.
func interruptedOnServer(msgs []serverMessage) bool {
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.Type == "tool" && p.State.Status == "error" && p.State.Metadata["interrupted"] == true {
				return true
			}
		}
	}
	return false
}

// runOpenCodeLongTool launches `opencode run` through sessiond with a long
// tool and waits until the tool runs and the session is running and busy.
func (w *world) runOpenCodeLongTool() api.Session {
	w.t.Helper()
	w.model.Enqueue(fakemodel.RunCommand(longTool, "Run the long job", 10*time.Minute))
	r := w.launch("launch", "--agent", "opencode", "--cwd", w.proj(), "--prompt", "Run the long job, marker OC-PROMPT-71b")
	pid := r.Session.PID
	w.waitFor(90*time.Second, "opencode's python3 tool running", func() (bool, string) {
		return pythonPID(opencodeTools(pid)) != 0, logTail(r.LogPath)
	})
	s := w.waitSession(r.Session.ID, 30*time.Second, "running and busy", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.Activity == session.ActivityBusy && strings.HasPrefix(s.UpstreamID, "ses_")
	})
	if s.PID != pid {
		w.t.Fatalf("tracked pid %d, launched %d", s.PID, pid)
	}
	// The tool is attributed by what the daemon saw while opencode lived.
	w.waitPassSaw(time.Now(), "the tool started")
	w.step("opencode tool running, session busy")
	return s
}

// killOpenCode kill -9s the session's opencode and checks its data is what
// the docs say a kill leaves: the last assistant message without
// time.completed, the bash part running, the python3 child orphaned.
func (w *world) killOpenCode(s api.Session) []procInfo {
	w.t.Helper()
	syscall.Kill(s.PID, syscall.SIGKILL)
	w.waitFor(5*time.Second, "opencode gone", func() (bool, string) { return !alive(s.PID), "alive" })
	orphans := opencodeTools(s.PID)
	if pythonPID(orphans) == 0 {
		w.t.Fatalf("no orphaned python3 of the killed opencode %d", s.PID)
	}
	msgs := w.opencodeMessages(s.UpstreamID)
	last := msgs[len(msgs)-1]
	if tm, _ := last.Data["time"].(map[string]any); last.Role != "assistant" || tm["completed"] != nil {
		w.t.Fatalf("last message after kill -9: %s %v", last.Role, last.Data["time"])
	}
	if st := w.opencodeToolStates(s.UpstreamID); !strings.Contains(strings.Join(st, " "), "bash:running") {
		w.t.Fatalf("tool parts after kill -9: %v", st)
	}
	return orphans
}

// killOpenCodeMidTool runs a long tool, kill -9s opencode and waits for
// interrupted with the incomplete message and the orphaned tool call.
func (w *world) killOpenCodeMidTool() (api.Session, []procInfo) {
	w.t.Helper()
	s := w.runOpenCodeLongTool()
	killed := time.Now()
	orphans := w.killOpenCode(s)
	s, took := w.waitInterrupted(s.ID, killed, 2*time.Second, session.ProblemIncompleteMessage, session.ProblemOrphanedToolCall)
	w.t.Logf("interrupted %s after kill -9 (event time), problems %v", took.Round(time.Millisecond), problemKinds(s))
	w.step("interrupted")
	return s, orphans
}

// opencodeToolStates lists the session's tool parts as tool:status.
func (w *world) opencodeToolStates(sessionID string) []string {
	w.t.Helper()
	db, err := sql.Open("sqlite", "file:"+w.opencodeDB()+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		w.t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT json_extract(data, '$.tool'), json_extract(data, '$.state.status') FROM part
		WHERE session_id = ? AND json_extract(data, '$.type') = 'tool' ORDER BY id`, sessionID)
	if err != nil {
		w.t.Fatalf("read parts of %s: %v", sessionID, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var tool, status sql.NullString
		rows.Scan(&tool, &status)
		out = append(out, tool.String+":"+status.String)
	}
	return out
}

// reapAll reaps a session's orphans and checks they are gone.
func (w *world) reapAll(id string, orphans []procInfo) {
	w.t.Helper()
	res := w.action("reap", id, "--apply", "--timeout", "3s")
	if got := stepPIDs(res.Steps); !sameInts(got, pids(orphans)) {
		w.t.Fatalf("reap targeted %v, the orphans are %v: %+v", got, pids(orphans), res.Steps)
	}
	for _, p := range orphans {
		if alive(p.PID) {
			w.t.Fatalf("orphan %d (%s) survived reap --apply", p.PID, p.Comm)
		}
	}
}

// Scenario 3: OpenCode killed mid tool; repaired offline with no process
// holding the database; a real `opencode serve` started afterwards shows,
// through its own API, the last assistant message completed and no tool
// part pending or running.
func TestOpenCodeKilledMidToolRepairedOffline(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	const repairGrace = 2 * time.Second
	d := w.startDaemon("--opencode-bin", bin, "--grace", "5s", "--opencode-repair-grace", repairGrace.String())
	w.step("daemon ready")
	s, orphans := w.killOpenCodeMidTool()
	w.reapAll(s.ID, orphans)
	w.step("reaped")
	// sessiond itself opens the database for a moment on each pass; it is
	// the reader, not a holder that would undo an offline write.
	if holders := procs(func(p procInfo) bool {
		return p.PID != d.Cmd.Process.Pid && holdsFile(p.PID, w.opencodeDB())
	}); len(holders) != 0 {
		t.Fatalf("processes still hold the database: %v", pids(holders))
	}

	// Past the repair grace (the data has been still that long), the plan
	// is an offline repair, and --apply carries it out.
	var plan api.ActionResult
	w.waitFor(repairGrace+10*time.Second, "an offline repair planned", func() (bool, string) {
		plan = w.action("repair", s.ID)
		for _, st := range plan.Steps {
			if st.Outcome == "planned" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", plan.Steps)
	})
	res := w.action("repair", s.ID, "--apply")
	if !res.Applied {
		t.Fatalf("repair --apply: %+v", res)
	}
	for _, st := range res.Steps {
		if st.Outcome != "done" && st.Outcome != "skipped" {
			t.Errorf("repair step %+v", st)
		}
	}
	t.Logf("repair steps: %+v", res.Steps)
	if st := w.opencodeToolStates(s.UpstreamID); strings.Contains(strings.Join(st, " "), "running") || strings.Contains(strings.Join(st, " "), "pending") {
		t.Fatalf("tool parts after the repair: %v", st)
	}
	w.step("repaired offline")
	s = w.waitSession(s.ID, 5*time.Second, "in-flight problems cleared", func(s api.Session) bool {
		return s.Problem(session.ProblemIncompleteMessage) == nil && s.Problem(session.ProblemOrphanedToolCall) == nil
	})

	// OpenCode itself, through its API, agrees.
	sv := w.startOpenCodeServer(bin)
	w.step("opencode serve healthy")
	msgs, err := w.serverMessages(sv, s.UpstreamID)
	if err != nil || len(msgs) == 0 {
		t.Fatalf("GET /session/%s/message: %v (%d messages)", s.UpstreamID, err, len(msgs))
	}
	pending, completed := inFlightOnServer(msgs)
	if len(pending) != 0 || !completed {
		t.Fatalf("the server shows parts %v in flight, last assistant message completed %v", pending, completed)
	}
	if !interruptedOnServer(msgs) {
		t.Errorf("no tool part marked error with metadata.interrupted, as OpenCode marks its own abandoned calls")
	}
	var status map[string]any
	if err := getJSON(sv.URL+"/session/status", &status); err != nil || status[s.UpstreamID] != nil && status[s.UpstreamID].(map[string]any)["type"] != "idle" {
		t.Errorf("GET /session/status: %v %v", status, err)
	}
}

// holdsFile says whether pid has path (or its -wal/-shm) open.
func holdsFile(pid int, path string) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && strings.HasPrefix(target, path) {
			return true
		}
	}
	return false
}

// Scenario 4: the live-server path. A session left stuck by a killed
// `opencode run` is repaired while a real `opencode serve` holds the
// database: through the server's API (an offline write would be undone by
// the live process), and the server's API then shows it fixed.
func TestOpenCodeStuckRepairedThroughLiveServer(t *testing.T) {
	bin := agentBin(t, opencodeBinEnv, "opencode-ai")
	w := newWorld(t)
	const repairGrace = 2 * time.Second
	w.startDaemon("--opencode-bin", bin, "--grace", "5s", "--opencode-repair-grace", repairGrace.String())
	sv := w.startOpenCodeServer(bin)
	w.step("daemon ready, opencode serve healthy")

	s := w.runOpenCodeLongTool()
	orphans := w.killOpenCode(s)
	if !holdsFile(sv.PID, w.opencodeDB()) {
		t.Fatalf("opencode serve (pid %d) does not hold %s: this is not the live-server case", sv.PID, w.opencodeDB())
	}
	// The live server in the session's directory owns it now (inferred),
	// and reports it idle while the data still shows the tool running:
	// the stuck state of the seed report, which sessiond shows as idle
	// with the stale in-flight items as problems.
	s = w.waitSession(s.ID, 30*time.Second, "stuck: idle under the live server, the tool call a problem", func(s api.Session) bool {
		return s.Status == session.StatusRunning && s.PID == sv.PID && s.Activity == session.ActivityIdle &&
			hasProblems(s, session.ProblemOrphanedToolCall)
	})
	t.Logf("stuck under the server: %s/%s owner %d (%s), problems %v", s.Status, s.Activity, s.PID, s.OwnerEvidence, problemKinds(s))
	w.step("stuck under the live server")
	// The server has the session, idle, with its tool part still running:
	// OpenCode's own stuck state.
	msgs, err := w.serverMessages(sv, s.UpstreamID)
	if err != nil {
		t.Fatal(err)
	}
	if pending, _ := inFlightOnServer(msgs); len(pending) == 0 {
		t.Fatalf("the server shows nothing in flight before the repair: %+v", msgs)
	}

	var plan api.ActionResult
	w.waitFor(repairGrace+10*time.Second, "a repair through the server planned", func() (bool, string) {
		plan = w.action("repair", s.ID)
		for _, st := range plan.Steps {
			if st.Outcome == "planned" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", plan.Steps)
	})
	for _, st := range plan.Steps {
		if st.Outcome == "planned" && !strings.Contains(st.Detail, sv.URL) {
			t.Errorf("planned step not through the server %s: %+v", sv.URL, st)
		}
		if strings.Contains(st.Action, "back up") {
			t.Errorf("an offline write planned while opencode serve holds the database: %+v", st)
		}
	}
	res := w.action("repair", s.ID, "--apply")
	t.Logf("repair steps: %+v", res.Steps)
	if !res.Applied {
		t.Fatalf("repair --apply: %+v", res)
	}
	for _, st := range res.Steps {
		if st.Outcome == "failed" || st.Outcome == "pending" {
			t.Errorf("repair step %+v", st)
		}
	}
	w.step("repaired through the server")

	// The server, still running, shows it fixed.
	if !alive(sv.PID) {
		t.Fatal("opencode serve died")
	}
	msgs, err = w.serverMessages(sv, s.UpstreamID)
	if err != nil {
		t.Fatal(err)
	}
	pending, completed := inFlightOnServer(msgs)
	if len(pending) != 0 {
		t.Fatalf("the server still shows parts in flight: %v", pending)
	}
	if !interruptedOnServer(msgs) {
		t.Error("no tool part marked error with metadata.interrupted on the server")
	}
	t.Logf("last assistant message completed on the server: %v", completed)
	// The server's write reached the database too.
	if st := w.opencodeToolStates(s.UpstreamID); strings.Contains(strings.Join(st, " "), "running") {
		t.Errorf("the database still has running parts: %v", st)
	}
	s = w.waitSession(s.ID, 5*time.Second, "orphaned_tool_call cleared", func(s api.Session) bool {
		return s.Problem(session.ProblemOrphanedToolCall) == nil
	})
	t.Logf("after the repair: %s %v", s.Status, problemKinds(s))
	// The dead run's python3 is still an orphan though the session has a
	// live owner (the server): reap kills exactly it, and the server lives.
	w.reapAll(s.ID, orphans)
	if !alive(sv.PID) {
		t.Fatal("reap killed opencode serve")
	}
	w.waitSession(s.ID, 5*time.Second, "orphan_processes cleared", func(s api.Session) bool {
		return s.Problem(session.ProblemOrphanProcesses) == nil
	})
	w.step("orphan reaped under the live server")
}
