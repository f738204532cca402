// Package badinput feeds a running sessiond a home full of nasty agent
// data beside good sessions: truncated and glued transcript lines, binary
// garbage, a 50 MB line, symlink loops, an unreadable directory, a garbage
// registry entry, OpenCode databases that are not SQLite, have another
// schema or are empty, a garbage legacy session file, and Pi session
// files with garbage lines, of garbage, or with a header never ended. sessiond must keep
// serving, read the good sessions as if the bad data were not there, and
// name every bad input — its path and what is wrong with it — in
// /v1/health (an adapter's input_errors or input_warnings) or in a session
// problem, so a user can find and fix it.
package badinput

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/copilottest"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.Cleanup()
	os.Exit(code)
}

// bad is one bad input and how sessiond must name it.
type bad struct {
	what   string
	path   string
	reason *regexp.Regexp
}

func TestBadInputCorpus(t *testing.T) {
	e := daemontest.NewEnv(t)
	root := claudetest.NewRoot(t, filepath.Join(e.Home, ".claude"))
	ocDir := filepath.Join(e.Home, ".local", "share", "opencode")
	var bads []bad
	named := func(what, path, reason string) {
		bads = append(bads, bad{what, path, regexp.MustCompile(reason)})
	}
	old := time.Now().Add(-time.Hour)

	// Good Claude sessions: one live (a registry entry names a live
	// process), one whose owner died mid tool call.
	goodCwd := filepath.Join(e.Home, "src", "good")
	_, liveID := daemontest.StartOwner(t)
	live := claudetest.NewTranscript(claudetest.NewSessionID(), goodCwd, time.Now().Add(-time.Minute))
	live.Turn("list the files", "ls", "a b", "two files")
	root.WriteTranscript(t, live)
	root.WriteRegistry(t, claudetest.LiveEntry(t, liveID.PID, live.SessionID, goodCwd, "idle"))
	deadOwner, deadID := daemontest.StartOwner(t)
	dead := claudetest.NewTranscript(claudetest.NewSessionID(), goodCwd, old)
	dead.Turn("hello", "ls", "a", "one file")
	deadTool := dead.CrashMidTool("run the tests", "go test ./...")
	root.WriteTranscript(t, dead)
	root.WriteRegistry(t, claudetest.LiveEntry(t, deadID.PID, dead.SessionID, goodCwd, "busy"))
	deadOwner.Process.Kill()
	deadOwner.Wait()

	// Bad Claude data, in a project folder of its own.
	badCwd := filepath.Join(e.Home, "src", "bad")
	badDir := root.ProjectDir(badCwd)
	if err := os.MkdirAll(badDir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Truncated and glued lines: a torn line in the middle, two records
	// glued without a newline, one glued mid-record.
	// They sit in the last turn: sessiond reads a transcript's head and its
	// last turn, never the lines between (they change nothing it reports).
	tr := claudetest.NewTranscript(claudetest.NewSessionID(), badCwd, old)
	tr.Turn("first", "ls", "x", "done")
	tr.User("last")
	a, b := tr.UserLine("a"), tr.UserLine("b")
	torn := tr.UserLine("torn")
	var buf bytes.Buffer
	buf.Write(tr.Bytes())
	buf.Write(torn[:len(torn)/2])
	buf.WriteByte('\n')
	buf.Write(claudetest.GlueWhole(a, b))
	buf.WriteByte('\n')
	buf.Write(claudetest.Glue(a, b, 40))
	buf.WriteByte('\n')
	tr2 := claudetest.NewTranscript(tr.SessionID, badCwd, old.Add(time.Minute))
	tr2.AssistantText("ok")
	buf.Write(tr2.Bytes())
	mangled := write(t, filepath.Join(badDir, tr.SessionID+".jsonl"), buf.Bytes())
	named("truncated and glued lines", mangled, `corrupt line|glued`)

	// Binary garbage under a transcript's name.
	junk := make([]byte, 8192)
	rand.Read(junk)
	junk = append(bytes.ReplaceAll(junk, []byte("\n"), []byte("\x00")), "\n\x00\xff\n"...)
	garbage := write(t, filepath.Join(badDir, claudetest.NewSessionID()+".jsonl"), junk)
	named("binary garbage", garbage, `corrupt line`)

	// A 50 MB line (generated, never committed).
	bigID := claudetest.NewSessionID()
	big := filepath.Join(badDir, bigID+".jsonl")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(f, `{"type":"user","sessionId":%q,"cwd":%q,"message":{"role":"user","content":"`, bigID, badCwd)
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range 50 {
		f.Write(chunk)
	}
	f.WriteString("\"}}\n")
	f.Close()
	named("a 50 MB line", big, `longer than`)

	// Symlink loops: a project folder and a transcript that point at
	// themselves.
	loopDir := filepath.Join(root.Dir, "projects", "-loop")
	if err := os.Symlink(loopDir, loopDir); err != nil {
		t.Fatal(err)
	}
	named("a project folder symlink loop", loopDir, `symbolic link`)
	loopFile := filepath.Join(badDir, claudetest.NewSessionID()+".jsonl")
	if err := os.Symlink(loopFile, loopFile); err != nil {
		t.Fatal(err)
	}
	named("a transcript symlink loop", loopFile, `symbolic link`)

	// An unreadable project folder (root reads it anyway: skipped then).
	locked := filepath.Join(root.Dir, "projects", "-locked")
	if err := os.MkdirAll(locked, 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(locked, claudetest.NewSessionID()+".jsonl"), tr2.Bytes())
	os.Chmod(locked, 0)
	t.Cleanup(func() { os.Chmod(locked, 0o700) })
	if _, err := os.ReadDir(locked); err == nil {
		t.Logf("skipping the unreadable directory: running as uid %d, mode 000 does not stop reads", os.Getuid())
	} else {
		named("an unreadable project folder", locked, `permission denied`)
	}

	// A registry entry of garbage, and one naming another pid than its
	// file, both unchanged for a while (not caught mid-write).
	reg := write(t, filepath.Join(root.SessionsDir(), "999999.json"), []byte("{\"pid\":999999,\"sessionId\":\x00\xff garbage"))
	named("a garbage registry entry", reg, `registry entry`)
	e2 := claudetest.NewEntry(4242, "1", "", claudetest.NewSessionID(), badCwd, "busy", old)
	other := root.WriteRegistry(t, e2)
	otherPath := filepath.Join(root.SessionsDir(), "4243.json")
	if err := os.Rename(other, otherPath); err != nil {
		t.Fatal(err)
	}
	named("a registry entry naming another pid", otherPath, `pid 4242`)
	for _, p := range []string{reg, otherPath} {
		os.Chtimes(p, old, old)
	}

	// OpenCode: a good database beside three bad ones, and a garbage legacy
	// session file beside a good one.
	good := opencodetest.MustCreate(t, filepath.Join(ocDir, "opencode-good.db"))
	ocCwd := filepath.Join(e.Home, "src", "oc")
	fin, err := good.Finished(ocCwd, old)
	if err != nil {
		t.Fatal(err)
	}
	intr, err := good.InterruptedMidTool(ocCwd, old)
	if err != nil {
		t.Fatal(err)
	}
	notSQLite := write(t, filepath.Join(ocDir, "opencode.db"), append([]byte("this is not a database\n"), junk[:4000]...))
	named("an opencode.db that is not SQLite", notSQLite, `not a database|file is not a database|SQLite`)
	otherSchema, err := opencodetest.CreateWithDDL(filepath.Join(ocDir, "opencode-x.db"), `CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);`)
	if err != nil {
		t.Fatal(err)
	}
	otherSchema.Close()
	named("an opencode-x.db with another schema", otherSchema.Path, `schema|no such table|table`)
	// An empty database left lying around (not one OpenCode is creating
	// right now: that one is read again next pass, and not named).
	empty := write(t, filepath.Join(ocDir, "opencode-empty.db"), nil)
	os.Chtimes(empty, old, old)
	named("an empty opencode-empty.db", empty, `no tables`)
	legacyBad := write(t, filepath.Join(ocDir, "storage", "session", "prj_1", "ses_garbage.json"), []byte("{\"id\":\"ses_garbage\",\"time\":{\"created\":\"yesterday\"}"))
	named("a garbage legacy session file", legacyBad, `parse|time|JSON|json`)

	// Pi: a good finished session beside one with garbage lines, one of
	// binary garbage and one whose header line never ended.
	piDir := filepath.Join(e.Home, ".pi", "agent", "sessions", "--src-pi--")
	piLine := func(kind, body string) string {
		return `{"type":"` + kind + `","id":"0000abcd","parentId":null,"timestamp":"2026-11-28T01:00:00.000Z"` + body + "}\n"
	}
	piHeader := func(id string) string {
		return `{"type":"session","version":3,"id":"` + id + `","timestamp":"2026-11-28T01:00:00.000Z","cwd":"/src/pi"}` + "\n"
	}
	piTurn := piLine("message", `,"message":{"role":"user","content":[{"type":"text","text":"pi prompt"}]}`) +
		piLine("message", `,"message":{"role":"assistant","content":[{"type":"text","text":"ok"}],"stopReason":"stop"}`)
	piGood := "01a21fb7-0000-7000-8000-00000000000a"
	for _, f := range []struct{ id, body string }{
		{piGood, piHeader(piGood) + piTurn},
		{"01a21fb7-0000-7000-8000-00000000000b", piHeader("01a21fb7-0000-7000-8000-00000000000b") + "{torn\n" + string(junk[:300]) + "\n" + piTurn},
		{"01a21fb7-0000-7000-8000-00000000000c", string(junk[:2000])},
		{"01a21fb7-0000-7000-8000-00000000000d", `{"type":"session","version":3,"id":"01a2`},
	} {
		p := write(t, filepath.Join(piDir, "2026-11-28T01-00-00-000Z_"+f.id+".jsonl"), []byte(f.body))
		os.Chtimes(p, old, old)
		switch f.id[len(f.id)-1] {
		case 'b':
			named("a Pi session file with garbage lines", p, `lines skipped: not JSON`)
		case 'c':
			named("a Pi session file of binary garbage", p, `session header not read`)
		case 'd':
			named("a Pi session file whose header never ended", p, `session header not read.*unfinished`)
		}
	}
	// Bad Copilot data: a session read past binary garbage and a line
	// longer than is read (generated), whose workspace.yaml is not flat.
	cpRoot := filepath.Join(e.Home, ".copilot")
	cp, err := copilottest.New(cpRoot, "0aef98b5-a46a-4192-84e7-84b98e6d3f4d", badCwd, old)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.Headless("copilot prompt", "echo hi", false); err != nil {
		t.Fatal(err)
	}
	cf, err := os.OpenFile(cp.EventsPath(), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	cf.Write(junk[:2000])
	cf.WriteString("\n" + `{"type":"session.info","data":{"message":"`)
	for range 33 {
		cf.Write(chunk)
	}
	cf.WriteString("\"}}\n")
	cf.Close()
	named("garbage and a 33 MB line in a Copilot events.jsonl", cp.EventsPath(), `lines skipped`)
	cpWs := write(t, filepath.Join(cp.Dir, "workspace.yaml"), []byte("id: "+cp.ID+"\ncwd: "+badCwd+"\nname:\n  - not: flat\n"))
	named("a Copilot workspace.yaml that is not flat", cpWs, `not a scalar|indented`)

	d := e.StartDaemon("--grace", "1s")
	c := api.NewClient(e.Socket)
	ctx := context.Background()

	// The good sessions are read as if nothing were wrong.
	testenv.EventuallyOK(t, 30*time.Second, "the good sessions read as if nothing were wrong", func() (bool, string) {
		var problems []string
		check := func(ref string, want session.Status, extra func(*api.Session) string) {
			s, err := c.Session(ctx, ref)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", ref, err))
				return
			}
			if s.Status != want {
				problems = append(problems, fmt.Sprintf("%s is %s (%s), want %s", ref, s.Status, s.StatusReason, want))
				return
			}
			if p := s.Problem(session.ProblemAdapterError); p != nil {
				problems = append(problems, fmt.Sprintf("%s has %s: %s", ref, p.Kind, p.Detail))
			}
			if extra != nil {
				if msg := extra(s); msg != "" {
					problems = append(problems, ref+": "+msg)
				}
			}
		}
		check(live.SessionID, session.StatusRunning, func(s *api.Session) string {
			if s.PID != liveID.PID || s.Cwd != goodCwd || s.Activity != session.ActivityIdle {
				return fmt.Sprintf("pid %d cwd %s activity %s", s.PID, s.Cwd, s.Activity)
			}
			return ""
		})
		check(dead.SessionID, session.StatusInterrupted, func(s *api.Session) string {
			if p := s.Problem(session.ProblemOrphanedToolCall); p == nil || !strings.Contains(p.Detail+p.Key, deadTool) && !strings.Contains(p.Detail, "go test") {
				return fmt.Sprintf("no orphaned tool call %s: %+v", deadTool, s.Problems)
			}
			return ""
		})
		check(fin.SessionID, session.StatusStopped, func(s *api.Session) string {
			if s.Cwd != ocCwd || s.Title != "finished session" {
				return fmt.Sprintf("cwd %s title %q", s.Cwd, s.Title)
			}
			return ""
		})
		check(intr.SessionID, session.StatusInterrupted, nil)
		check(piGood, session.StatusStopped, func(s *api.Session) string {
			if s.Agent != "pi" || s.Cwd != "/src/pi" || s.Title != "pi prompt" {
				return fmt.Sprintf("agent %s cwd %s title %q", s.Agent, s.Cwd, s.Title)
			}
			return ""
		})
		check(cp.ID, session.StatusStopped, func(s *api.Session) string {
			if s.Cwd != badCwd || s.Title != "copilot prompt" {
				return fmt.Sprintf("cwd %s title %q", s.Cwd, s.Title)
			}
			return ""
		})
		// The session of the mangled transcript is read past its bad lines.
		check(tr.SessionID, session.StatusStopped, func(s *api.Session) string {
			if s.Cwd != badCwd {
				return "cwd " + s.Cwd
			}
			return ""
		})
		return len(problems) == 0, strings.Join(problems, "\n")
	})

	// Every bad input is named, with its path and a reason.
	allNamed := func() (bool, string) {
		var missing []string
		text, err := namedText(ctx, c)
		if err != nil {
			return false, err.Error()
		}
		for _, b := range bads {
			if !namedIn(text, b) {
				missing = append(missing, fmt.Sprintf("%s (%s, want /%s/)", b.what, b.path, b.reason))
			}
		}
		if len(missing) > 0 {
			return false, "not named:\n  " + strings.Join(missing, "\n  ") + "\nin:\n" + text
		}
		return true, ""
	}
	testenv.EventuallyOK(t, 10*time.Second, "every bad input named", allNamed)

	// More bad data while it runs: a torn line, garbage and a 9 MB line
	// appended to the live session's transcript (read incrementally), a
	// late database of garbage.
	livePath := root.TranscriptPath(goodCwd, live.SessionID)
	more := claudetest.NewTranscript(live.SessionID, goodCwd, time.Now())
	more.User("and now?")
	l := more.Lines()[0]
	claudetest.Append(t, livePath, l[:len(l)/3], junk[:500], append([]byte(`{"type":"user","message":{"content":"`), bytes.Repeat([]byte("y"), 9<<20)...))
	named("bad lines appended to a live transcript", livePath, `corrupt line.*longer than`)
	late := write(t, filepath.Join(ocDir, "opencode-late.db"), junk[:3000])
	named("a database of garbage written while sessiond runs", late, `not an SQLite database|not a database`)
	testenv.EventuallyOK(t, 10*time.Second, "the bad input written while sessiond runs named too", allNamed)
	if s, err := c.Session(ctx, live.SessionID); err != nil || s.Status != session.StatusRunning || s.Cwd != goodCwd || s.Problem(session.ProblemAdapterError) != nil {
		t.Fatalf("the live session after bad appends: %+v %v", s, err)
	}

	// It still serves, and still runs.
	if _, err := c.Sessions(ctx, api.ListOptions{All: true}); err != nil {
		t.Fatalf("list after the bad input: %v", err)
	}
	select {
	case <-d.Done:
		t.Fatalf("sessiond exited: %v", d.Err)
	default:
	}
	out, _, code := e.Ctl("health")
	if code != 0 {
		t.Fatalf("sessionctl health: exit %d", code)
	}
	t.Logf("sessionctl health:\n%s", out)
}

// namedText is every place a bad input can be named: the adapters' input
// errors and warnings, and every session problem.
func namedText(ctx context.Context, c *api.Client) (string, error) {
	h, err := c.Health(ctx)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, a := range h.Adapters {
		if a.LastError != "" {
			fmt.Fprintf(&sb, "%s last error: %s\n", a.Name, a.LastError)
		}
		for _, ie := range a.InputErrors {
			fmt.Fprintf(&sb, "%s input error: %s\n", a.Name, ie)
		}
		for _, w := range a.InputWarnings {
			fmt.Fprintf(&sb, "%s input warning: %s\n", a.Name, w)
		}
	}
	ss, err := c.Sessions(ctx, api.ListOptions{All: true})
	if err != nil {
		return "", err
	}
	for _, s := range ss {
		for _, p := range s.Problems {
			fmt.Fprintf(&sb, "session %s problem %s: %s\n", s.ID, p.Kind, p.Detail)
		}
	}
	return sb.String(), nil
}

// namedIn: some line names the path and gives the reason.
func namedIn(text string, b bad) bool {
	for _, line := range strings.Split(text, "\n") {
		// The reason must be said besides the path: a path like
		// ses_garbage.json would otherwise match a reason like "json".
		if strings.Contains(line, b.path) && b.reason.MatchString(strings.ReplaceAll(line, b.path, "")) {
			return true
		}
	}
	return false
}

func write(t *testing.T, path string, b []byte) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
