package copilot

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/internal/testkit/copilottest"
	"github.com/sessiond/sessiond/session"
)

// newSession makes a session folder under a fresh home.
func newSession(t *testing.T, root string, n int) *copilottest.Session {
	t.Helper()
	id := fmt.Sprintf("%08x-9be0-432f-a48a-06e04eb70ae6", n)
	s, err := copilottest.New(root, id, "/home/me/proj", time.Date(2026, 11, 28, 0, 47, 48, 0, time.UTC).Add(time.Duration(n)*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// discover runs a pass without processes and returns the sessions by id.
func discover(t *testing.T, a *Adapter) map[string]adapters.Observed {
	t.Helper()
	obs, err := a.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]adapters.Observed{}
	for _, o := range obs.All() {
		out[o.UpstreamID] = o
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// The turn states the lines of the real CLI say, one scenario each.
func TestActivityFromEvents(t *testing.T) {
	root := t.TempDir()
	type scenario struct {
		name    string
		write   func(s *copilottest.Session)
		act     session.Activity
		waiting session.WaitingKind
		flight  []session.ProblemKind
	}
	call := copilottest.ToolRequest{ID: "call_925ae2a5796bb121249f85a6", Name: "bash", Command: `python3 -c "import time; time.sleep(300)"`}
	scenarios := []scenario{
		{name: "headless run to its end", write: func(s *copilottest.Session) { must(t, s.Headless("Say hi", "echo hi", false)) },
			act: session.ActivityIdle},
		{name: "killed mid tool", write: func(s *copilottest.Session) { must(t, s.Headless("Run the long job", call.Command, true)) },
			act: session.ActivityBusy, flight: []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{name: "prompt taken, no reply yet", write: func(s *copilottest.Session) {
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("hello"))
			must(t, s.SystemMessage())
			must(t, s.TurnStart(0))
		}, act: session.ActivityBusy, flight: []session.ProblemKind{session.ProblemIncompleteMessage}},
		{name: "between the tool's turn and the next", write: func(s *copilottest.Session) {
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("go"))
			must(t, s.TurnStart(0))
			must(t, s.AssistantMessage(0, "", call))
			must(t, s.ToolStart(0, call))
			must(t, s.ToolComplete(0, call.ID, true))
			must(t, s.TurnEnd(0))
		}, act: session.ActivityBusy, flight: []session.ProblemKind{session.ProblemIncompleteMessage}},
		{name: "asking permission", write: func(s *copilottest.Session) {
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("go"))
			must(t, s.TurnStart(0))
			must(t, s.AssistantMessage(0, "", call))
			must(t, s.ToolStart(0, call))
			must(t, s.PermissionRequested("858d4861-78a4-49c4-a379-00010b0e5052", call))
		}, act: session.ActivityWaiting, waiting: session.WaitingPermission, flight: []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{name: "permission given, tool runs", write: func(s *copilottest.Session) {
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("go"))
			must(t, s.TurnStart(0))
			must(t, s.AssistantMessage(0, "", call))
			must(t, s.ToolStart(0, call))
			must(t, s.PermissionRequested("858d4861-78a4-49c4-a379-00010b0e5052", call))
			must(t, s.PermissionCompleted("858d4861-78a4-49c4-a379-00010b0e5052", call.ID, "approved"))
		}, act: session.ActivityBusy, flight: []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{name: "interrupted by the user", write: func(s *copilottest.Session) {
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("go"))
			must(t, s.TurnStart(0))
			must(t, s.AssistantMessage(0, "", call))
			must(t, s.ToolStart(0, call))
			must(t, s.TurnEnd(0))
			must(t, s.Abort("user_initiated"))
		}, act: session.ActivityIdle},
		{name: "resumed after a kill", write: func(s *copilottest.Session) {
			must(t, s.Headless("Run the long job", call.Command, true))
			must(t, s.Resume(7))
			must(t, s.ToolComplete(0, "call_0000000000000000000000c1", false))
		}, act: session.ActivityIdle},
		{name: "asking the user", write: func(s *copilottest.Session) {
			ask := copilottest.ToolRequest{ID: "call_ask", Name: "ask_user", Command: "Which file?"}
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("go"))
			must(t, s.TurnStart(0))
			must(t, s.AssistantMessage(0, "", ask))
			must(t, s.ToolStart(0, ask))
		}, act: session.ActivityWaiting, waiting: session.WaitingQuestion, flight: []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{name: "a sub-agent's turn end does not end the task call", write: func(s *copilottest.Session) {
			task := copilottest.ToolRequest{ID: "call_task", Name: "task", Command: "explore"}
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("go"))
			must(t, s.TurnStart(0))
			must(t, s.AssistantMessage(0, "", task))
			must(t, s.ToolStart(0, task))
			must(t, s.SubagentTurnEnd(0, "call_task"))
		}, act: session.ActivityBusy, flight: []session.ProblemKind{session.ProblemOrphanedToolCall}},
		{name: "a failed model call", write: func(s *copilottest.Session) {
			must(t, s.Start("1.0.102"))
			must(t, s.UserMessage("now FAIL please"))
			must(t, s.TurnStart(0))
			must(t, s.TurnEnd(0))
			must(t, s.Error("query", "400 fakemodel: scripted error", 400))
		}, act: session.ActivityIdle},
		{name: "TUI before its first prompt", write: func(s *copilottest.Session) {
			must(t, s.Workspace("", s.At, s.At))
		}, act: session.ActivityIdle},
	}
	for i, sc := range scenarios {
		s := newSession(t, root, i)
		sc.write(s)
	}
	obs := discover(t, New(Config{Roots: []string{root}}))
	for i, sc := range scenarios {
		o, ok := obs[newSession(t, root, i).ID]
		if !ok {
			t.Errorf("%s: not observed", sc.name)
			continue
		}
		var kinds []session.ProblemKind
		for _, is := range o.InFlight {
			kinds = append(kinds, is.Kind)
		}
		if o.Activity != sc.act || !reflect.DeepEqual(kinds, sc.flight) {
			t.Errorf("%s: %s with in flight %v, want %s with %v", sc.name, o.Activity, kinds, sc.act, sc.flight)
		}
		var w session.WaitingKind
		if o.WaitingFor != nil {
			w = o.WaitingFor.Kind
		}
		if w != sc.waiting {
			t.Errorf("%s: waiting for %+v, want %q", sc.name, o.WaitingFor, sc.waiting)
		}
		if o.Cwd != "/home/me/proj" {
			t.Errorf("%s: cwd %q", sc.name, o.Cwd)
		}
	}
	perm := obs[newSession(t, root, 4).ID].WaitingFor
	if perm.Tool != "bash" || perm.Input != call.Command {
		t.Errorf("waiting for %+v, want the bash command", perm)
	}
	if q := obs[newSession(t, root, 8).ID].WaitingFor; q == nil || q.Question != "Which file?" || q.Tool != "ask_user" {
		t.Errorf("asking the user: waiting for %+v, want the ask_user message", q)
	}
	if got := obs[newSession(t, root, 0).ID].Title; got != "Say hi" {
		t.Errorf("title %q, want the first prompt", got)
	}
}

// workspace.yaml's name is the title, over the first prompt.
func TestWorkspaceTitle(t *testing.T) {
	root := t.TempDir()
	s := newSession(t, root, 1)
	must(t, s.Headless("Run the long job", "echo", false))
	must(t, s.Workspace("Renamed by the user", s.At, s.At))
	o := discover(t, New(Config{Roots: []string{root}}))[s.ID]
	if o.Title != "Renamed by the user" || o.Cwd != "/home/me/proj" {
		t.Fatalf("title %q cwd %q", o.Title, o.Cwd)
	}
}

// observable is what a pass says of a session, compared between reads.
func observable(o adapters.Observed) string {
	return fmt.Sprintf("%s|%s|%s|%s|%v|%+v|%+v|%s|%+v", o.UpstreamID, o.Cwd, o.Title, o.Activity, o.LastActivity.UTC(), o.WaitingFor, o.InFlight, o.ActivityEvidence, o.Problems)
}

// randomSession writes a random but well-formed run of the CLI's lines,
// calling after(line) after each write; some writes are split in two.
func randomSession(t *testing.T, s *copilottest.Session, rng *rand.Rand, steps int, after func()) {
	must(t, s.Start("1.0.102"))
	after()
	turn := 0
	var open []copilottest.ToolRequest
	var perms []string
	for range steps {
		switch rng.IntN(11) {
		case 0:
			must(t, s.UserMessage(fmt.Sprintf("prompt %d", rng.IntN(100))))
			turn = 0
		case 1:
			must(t, s.TurnStart(turn))
		case 2:
			c := copilottest.ToolRequest{ID: s.CallID(), Name: []string{"bash", "bash", "ask_user", "view"}[rng.IntN(4)], Command: "echo " + strings.Repeat("x", rng.IntN(40))}
			must(t, s.AssistantMessage(turn, "", c))
			must(t, s.ToolStart(turn, c))
			open = append(open, c)
		case 3:
			if len(open) > 0 {
				i := rng.IntN(len(open))
				must(t, s.ToolComplete(turn, open[i].ID, rng.IntN(2) == 0))
				open = append(open[:i], open[i+1:]...)
			}
		case 4:
			must(t, s.TurnEnd(turn))
			turn++
		case 5:
			if len(open) > 0 {
				id := fmt.Sprintf("req-%d", rng.IntN(1000))
				must(t, s.PermissionRequested(id, open[rng.IntN(len(open))]))
				perms = append(perms, id)
			}
		case 6:
			if len(perms) > 0 {
				must(t, s.PermissionCompleted(perms[0], "", "approved"))
				perms = perms[1:]
			}
		case 7:
			must(t, s.Abort("user_initiated"))
			open, perms = nil, nil
		case 8:
			must(t, s.UsageRecord())
		case 9:
			must(t, s.Resume(rng.IntN(50)))
			open, perms = nil, nil
		case 10:
			switch rng.IntN(6) {
			case 0:
				must(t, s.Shutdown("routine"))
			case 1:
				must(t, s.Shutdown("suspended")) // drift
			case 2:
				must(t, s.Raw([]byte(`{"type":"session.future_thing","data":{},"id":"z","timestamp":"2026-11-28T00:50:00.000Z","parentId":null}`))) // drift
			default:
				must(t, s.Raw([]byte(`{"type":"session.info","data":{"infoType":"x","message":"\u00e9 \"quoted\" text"},"id":"x","timestamp":"2026-11-28T00:50:00.000Z","parentId":null}`)))
			}
		}
		after()
	}
}

// The incremental read equals a whole read: after every line appended
// (and in the middle of lines written in two parts), the adapter that has
// read along says what a fresh adapter reading the file whole says.
func TestIncrementalReadEqualsWholeRead(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		root := t.TempDir()
		s := newSession(t, root, int(seed))
		rng := rand.New(rand.NewPCG(seed, 7))
		a := New(Config{Roots: []string{root}})
		check := func() {
			fresh := New(Config{Roots: []string{root}})
			got := discover(t, a)[s.ID]
			want := discover(t, fresh)[s.ID]
			if fmt.Sprint(a.warnings()) != fmt.Sprint(fresh.warnings()) {
				t.Fatalf("seed %d after %d lines: warnings %v, a whole read %v", seed, len(s.Lines()), a.warnings(), fresh.warnings())
			}
			if observable(got) != observable(want) {
				t.Fatalf("seed %d after %d lines:\nincremental %s\nwhole       %s", seed, len(s.Lines()), observable(got), observable(want))
			}
		}
		// Every write is looked at: a stat within the racy window of the
		// file's mtime is not trusted, so the adapter reads along.
		randomSession(t, s, rng, 60, func() {
			check()
			if rng.IntN(5) == 0 {
				// Half a line, then the rest: the half is not read.
				f, err := os.OpenFile(s.EventsPath(), os.O_APPEND|os.O_WRONLY, 0)
				must(t, err)
				line := []byte(`{"type":"assistant.turn_start","data":{"turnId":"9","interactionId":"i"},"id":"y","timestamp":"2026-11-28T01:00:00.000Z","parentId":null}`)
				cut := rng.IntN(len(line))
				f.Write(line[:cut])
				check()
				f.Write(append(line[cut:], '\n'))
				f.Close()
				check()
			}
		})
	}
}

// A replaced events.jsonl (another inode, shorter) is read from its
// start, not continued.
func TestReplacedEventsReadFromStart(t *testing.T) {
	root := t.TempDir()
	s := newSession(t, root, 1)
	must(t, s.Headless("Run the long job", "sleep 300", true))
	a := New(Config{Roots: []string{root}})
	if o := discover(t, a)[s.ID]; o.Activity != session.ActivityBusy {
		t.Fatalf("killed mid tool: %s", o.Activity)
	}
	s2 := newSession(t, t.TempDir(), 1)
	must(t, s2.Headless("Say hi", "echo", false))
	b, err := os.ReadFile(s2.EventsPath())
	must(t, err)
	tmp := s.EventsPath() + ".new"
	must(t, os.WriteFile(tmp, b, 0o600))
	must(t, os.Rename(tmp, s.EventsPath()))
	if o := discover(t, a)[s.ID]; o.Activity != session.ActivityIdle || o.Title != "Say hi" {
		t.Fatalf("after the file was replaced: %s %q, want the new file's idle \"Say hi\"", o.Activity, o.Title)
	}
}

// Bad lines are skipped and named in the warnings; the rest still says
// the state; nothing is lost.
func TestBadLinesWarnAndLoseNothing(t *testing.T) {
	root := t.TempDir()
	s := newSession(t, root, 1)
	must(t, s.Start("1.0.102"))
	must(t, s.Raw([]byte(`{"type":"user.message","data":{"content":"hel`)))
	must(t, s.Raw([]byte("\x00\xff garbage")))
	must(t, s.UserMessage("the real prompt"))
	must(t, s.Raw([]byte(`{"type":"session.info","data":{`)))
	must(t, s.TurnStart(0))
	must(t, os.WriteFile(filepath.Join(s.Dir, "workspace.yaml"), []byte("id: "+s.ID+"\ncwd: /home/me/proj\nnested:\n  - a\n"), 0o600))
	a := New(Config{Roots: []string{root}})
	obs, err := a.Discover(context.Background(), nil)
	must(t, err)
	if len(obs.All()) != 1 || obs.All()[0].Activity != session.ActivityBusy || obs.All()[0].Title != "the real prompt" || obs.All()[0].Cwd != "/home/me/proj" {
		t.Fatalf("sessions %+v", obs.All())
	}
	var warned []string
	for _, w := range obs.Warnings {
		warned = append(warned, w.Error())
	}
	sort.Strings(warned)
	if len(warned) != 2 || !strings.Contains(warned[0], "3 lines skipped") || !strings.Contains(warned[1], "workspace.yaml") {
		t.Fatalf("warnings %q", warned)
	}
}

// checkpoint returns a's checkpoint, committed.
func checkpoint(a *Adapter) (put map[string][]byte, del []string) {
	cp := a.Checkpoint()
	cp.Commit()
	sort.Strings(cp.Del)
	return cp.Put, cp.Del
}

// A restart with the saved state reads nothing that did not change and
// says the same of every session; one that grew is read from the saved
// offset, one that went is dropped, a garbage entry is read afresh.
func TestCheckpointRestore(t *testing.T) {
	root := t.TempDir()
	var ss []*copilottest.Session
	for i := range 3 {
		s := newSession(t, root, i)
		must(t, s.Headless("Run the long job", "sleep 300", i == 1))
		must(t, s.Workspace("Run the long job", s.At, s.At))
		ss = append(ss, s)
	}
	// Settle the files: a stat within the racy window is not trusted.
	old := time.Now().Add(-time.Minute)
	for _, s := range ss {
		for _, p := range []string{s.EventsPath(), filepath.Join(s.Dir, "workspace.yaml"), s.Dir} {
			must(t, os.Chtimes(p, old, old))
		}
	}
	a := New(Config{Roots: []string{root}})
	before := discover(t, a)
	put, del := checkpoint(a)
	if len(put) != 3 || len(del) != 0 {
		t.Fatalf("first checkpoint: %d entries, %d deletions", len(put), len(del))
	}
	if put, del := checkpoint(a); len(put) != 0 || len(del) != 0 {
		t.Fatalf("nothing changed, yet %d entries, %d deletions", len(put), len(del))
	}
	b := New(Config{Roots: []string{root}})
	b.Restore(put)
	if after := discover(t, b); !reflect.DeepEqual(after, before) {
		t.Fatalf("restored:\n%+v\nwant\n%+v", after, before)
	}
	if put, _ := checkpoint(b); len(put) != 0 {
		t.Fatalf("a restart read %d unchanged sessions again", len(put))
	}

	// The killed one is resumed; one goes; one entry is garbage.
	must(t, ss[1].Resume(7))
	must(t, os.RemoveAll(ss[2].Dir))
	saved := map[string][]byte{}
	for k, v := range put {
		saved[k] = v
	}
	saved[ss[0].Dir] = []byte{checkpointFormat, 0xff}
	c := New(Config{Roots: []string{root}})
	c.Restore(saved)
	obs := discover(t, c)
	if o := obs[ss[1].ID]; o.Activity != session.ActivityIdle {
		t.Errorf("the resumed session: %s, want idle", o.Activity)
	}
	if o := obs[ss[0].ID]; o.Activity != session.ActivityIdle || o.Title != "Run the long job" {
		t.Errorf("the session with a garbage entry, read again: %+v", o)
	}
	put, del = checkpoint(c)
	if len(put) != 2 || put[ss[0].Dir] == nil || put[ss[1].Dir] == nil {
		t.Errorf("saved again: %d entries, want the grown one and the one read afresh", len(put))
	}
	if want := []string{ss[2].Dir}; !reflect.DeepEqual(del, want) {
		t.Errorf("deleted %q, want %q", del, want)
	}
}

// The saved entry of a session read only in part (its offset before an
// unfinished last line) continues where it stopped.
func TestCheckpointKeepsTheOffset(t *testing.T) {
	root := t.TempDir()
	s := newSession(t, root, 1)
	must(t, s.Start("1.0.102"))
	must(t, s.UserMessage("go"))
	f, err := os.OpenFile(s.EventsPath(), os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	f.WriteString(`{"type":"assistant.turn_start","data":{"turnId":"0"`)
	a := New(Config{Roots: []string{root}})
	discover(t, a)
	put, _ := checkpoint(a)
	f.WriteString(`,"interactionId":"i"},"id":"y","timestamp":"2026-11-28T01:00:00.000Z","parentId":null}` + "\n")
	f.Close()
	must(t, s.Abort("user_initiated"))
	b := New(Config{Roots: []string{root}})
	b.Restore(put)
	got, want := discover(t, b)[s.ID], discover(t, New(Config{Roots: []string{root}}))[s.ID]
	if observable(got) != observable(want) || got.Activity != session.ActivityIdle {
		t.Fatalf("restored and continued: %s\nwant %s", observable(got), observable(want))
	}
	if len(b.warnings()) != 0 {
		t.Fatalf("warnings %v: the half line was read as a line", b.warnings())
	}
}

// An idle pass hands out the last quiet set without building anything,
// and only while nothing it was built from changed: after every change
// below the sessions are a fresh adapter's, and a pass with no change
// after it returns the very same set and no list.
func TestIdlePassIsTheLastOne(t *testing.T) {
	root := t.TempDir()
	s0, s1 := newSession(t, root, 0), newSession(t, root, 1)
	must(t, s0.Headless("Say hi", "echo hi", false))
	must(t, s1.Headless("Run the long job", "sleep 300", true))
	a := New(Config{Roots: []string{root}})
	pass := func() adapters.Observation {
		obs, err := a.Discover(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	// What a step changed, dated an hour back: a file or folder changed
	// within the racy window is read again each pass, which would hide a
	// change not counted; the rest keep their dates, as they would.
	age := func() {
		now := time.Now()
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if fi, err := d.Info(); err == nil && fi.ModTime().After(now.Add(-10*time.Minute)) {
				os.Chtimes(p, now.Add(-time.Hour), now.Add(-time.Hour))
			}
			return nil
		})
	}
	for _, step := range []struct {
		what   string
		change func()
	}{
		{"the first pass", func() {}},
		{"a new session", func() { must(t, newSession(t, root, 2).Headless("Again", "ls", false)) }},
		// A session not written for long is looked at by full rescans.
		{"a workspace renamed", func() { must(t, s0.Workspace("renamed", s0.At, s0.At)); a.RequestRescan() }},
		{"a session gone", func() { must(t, os.RemoveAll(s1.Dir)) }},
		{"every session gone", func() { must(t, os.RemoveAll(filepath.Join(root, "session-state"))) }},
	} {
		step.change()
		age()
		obs := pass()
		inc := map[string]adapters.Observed{}
		for _, o := range obs.All() {
			inc[o.UpstreamID] = o
		}
		if fresh := discover(t, New(Config{Roots: []string{root}})); !reflect.DeepEqual(inc, fresh) {
			t.Fatalf("%s: the pass saw\n%+v\na fresh adapter\n%+v", step.what, inc, fresh)
		}
		if again := pass(); again.Quiet != obs.Quiet || len(again.Sessions) != 0 {
			t.Fatalf("%s, then nothing: a new set (%v) or a list of %d", step.what, again.Quiet != obs.Quiet, len(again.Sessions))
		}
		if _, ok := a.quiet.Again(kit.Key{a.gen, a.shape}); !ok {
			t.Fatalf("%s, then nothing: the next pass would build its sessions again", step.what)
		}
	}
}
