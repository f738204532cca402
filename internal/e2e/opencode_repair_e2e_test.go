package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// holdDBEnv makes the test binary, started under the name opencode with
// `serve --port N`, play the process side of an OpenCode server: it holds
// the database open for its whole life, as OpenCode does, while the test's
// fake server answers on port N. It runs from init, before the testing
// flags are parsed.
const holdDBEnv = "SESSIOND_E2E_HOLD_OPENCODE_DB"

func init() {
	db := os.Getenv(holdDBEnv)
	if db == "" {
		return
	}
	f, err := os.Open(db)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer f.Close()
	fmt.Println("ready")
	time.Sleep(10 * time.Minute)
	os.Exit(0)
}

// startServeProcess starts "opencode serve --port port" holding dbPath.
func startServeProcess(t *testing.T, dir, dbPath string, port int) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "ocserve", "opencode")
	os.MkdirAll(filepath.Dir(link), 0o755)
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "serve", "--port", strconv.Itoa(port), "--hostname", "127.0.0.1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), holdDBEnv+"="+dbPath)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("serve process: %q %v", buf, err)
	}
	return cmd
}

func toolStatus(t *testing.T, dbPath, partID string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var st sql.NullString
	if err := db.QueryRow(`SELECT json_extract(data, '$.state.status') FROM part WHERE id = ?`, partID).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st.String
}

func messageCompleted(t *testing.T, dbPath, msgID string) bool {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var c sql.NullInt64
	var name sql.NullString
	if err := db.QueryRow(`SELECT json_extract(data, '$.time.completed'), json_extract(data, '$.error.name') FROM message WHERE id = ?`, msgID).Scan(&c, &name); err != nil {
		t.Fatal(err)
	}
	return c.Valid && name.String == "MessageAbortedError"
}

// OpenCode sessions left in flight by dead processes, through sessionctl:
// `repair` plans, `repair --apply` backs the database up and repairs it
// offline, a second repair plans nothing; once an `opencode serve` holds
// the database, an offline repair of another session is pending on its pid
// and writes nothing, and `abort` of the session the server runs busy goes
// through the server's API (abort, bounded wait, patch of the stuck part).
func TestOpenCodeRepairAndAbort(t *testing.T) {
	e := newEnv(t)
	dataDir := filepath.Join(e.Home, ".local", "share", "opencode")
	dbPath := filepath.Join(dataDir, "opencode.db")
	proj := filepath.Join(e.Home, "proj")
	os.MkdirAll(proj, 0o755)
	db, err := opencodetest.Create(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-2 * time.Minute)
	a, _ := db.InterruptedMidTool(proj, at)
	b, _ := db.InterruptedMidTool(proj, at)
	c, _ := db.InterruptedMidTool(proj, at)
	db.Close() // no process may hold it for the offline repair

	e.StartDaemon("--grace", "1s")
	e.waitStatus(a.SessionID, session.StatusInterrupted, 5*time.Second)

	plan, errs, code := e.action("repair", a.SessionID)
	if code != 0 || plan.Applied || outcomes(plan.Steps)[session.OutcomePlanned] != 3 {
		t.Fatalf("repair plan: exit %d %s %+v", code, errs, plan)
	}
	if toolStatus(t, dbPath, a.ToolPartID) != "running" {
		t.Fatal("a dry run wrote")
	}
	human, errs, code := e.Ctl("repair", a.SessionID, "--apply")
	for _, want := range []string{"[x] back up database", "[x] mark tool part interrupted " + a.ToolPartID, "[x] complete assistant message " + a.AssistantMessageID, "repair: 3 done"} {
		if code != 0 || !strings.Contains(human, want) {
			t.Fatalf("repair --apply (exit %d, %s) lacks %q:\n%s", code, errs, want, human)
		}
	}
	t.Logf("sessionctl repair --apply:\n%s", human)
	if toolStatus(t, dbPath, a.ToolPartID) != "error" || !messageCompleted(t, dbPath, a.AssistantMessageID) {
		t.Fatal("not repaired in the database")
	}
	backups, _ := filepath.Glob(filepath.Join(e.StateDir, "backups", "opencode", "opencode.db", "*.db"))
	if len(backups) != 1 {
		t.Fatalf("backups %v", backups)
	}
	if toolStatus(t, backups[0], a.ToolPartID) != "running" {
		t.Error("the backup is not the state before the repair")
	}
	again, _, _ := e.action("repair", a.SessionID)
	if outcomes(again.Steps)[session.OutcomePlanned] != 0 {
		t.Fatalf("a repaired session plans %+v", again.Steps)
	}
	testenv.EventuallyOK(t, 5*time.Second, "no orphaned tool call after the repair", func() (bool, string) {
		sa := e.Show(a.SessionID)
		return sa.Problem(session.ProblemOrphanedToolCall) == nil, fmt.Sprintf("%+v", sa.Problems)
	})

	// An `opencode serve` now holds the database and runs b, stuck busy.
	srv := opencodetest.NewFakeServer()
	defer srv.Close()
	if err := srv.LoadFromDB(dbPath, b.SessionID); err != nil {
		t.Fatal(err)
	}
	srv.SetStatus("", b.SessionID, opencodetest.Status{Type: "busy"})
	srv.Lock()
	srv.StuckUntilPatched[b.SessionID] = true
	srv.Unlock()
	holder := startServeProcess(t, e.Dir, dbPath, srv.Port())
	s := e.waitStatus(b.SessionID, session.StatusRunning, 5*time.Second)
	if s.PID != holder.Process.Pid || s.Activity != session.ActivityBusy {
		t.Fatalf("b on the server: pid %d (holder %d), %s", s.PID, holder.Process.Pid, s.Activity)
	}

	// c: no server has it, and the database is held: pending, untouched.
	held, errs, code := e.action("repair", c.SessionID, "--apply")
	want := fmt.Sprintf("held by pid %d", holder.Process.Pid)
	if code != 0 || len(held.Steps) != 1 || held.Steps[0].Outcome != session.OutcomePending || !strings.Contains(held.Steps[0].Detail, want) {
		t.Fatalf("repair of c while held: exit %d %s %+v", code, errs, held)
	}
	if toolStatus(t, dbPath, c.ToolPartID) != "running" {
		t.Fatal("written while held")
	}

	human, errs, code = e.Ctl("abort", b.SessionID)
	for _, want := range []string{"[x] abort turn " + b.SessionID, "[-] wait for idle", "[x] mark tool part interrupted " + b.ToolPartID, "[x] session idle after patching"} {
		if code != 0 || !strings.Contains(human, want) {
			t.Fatalf("abort (exit %d, %s) lacks %q:\n%s", code, errs, want, human)
		}
	}
	t.Logf("sessionctl abort:\n%s", human)
	if srv.PartState(b.SessionID, b.ToolPartID) != "error" || srv.Aborted[b.SessionID] != 1 {
		t.Fatalf("server: part %s, aborted %d", srv.PartState(b.SessionID, b.ToolPartID), srv.Aborted[b.SessionID])
	}
	if toolStatus(t, dbPath, b.ToolPartID) != "running" {
		t.Error("the abort wrote the database behind the server")
	}
	evs, _, _ := e.Ctl("events", "--json")
	for _, want := range []string{"repair: 3 done", "repair: 1 pending", "abort: "} {
		if !strings.Contains(evs, want) {
			t.Errorf("no event %q", want)
		}
	}
	holder.Process.Signal(syscall.SIGKILL)
}
