package gemini

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// fakeGemini starts node on a script named gemini in dir, as Gemini CLI
// runs (`node …/bin/gemini <args>`); the script starts a tool in a
// session of its own when tool is set (as Gemini CLI 0.61.0 runs its
// shell tool) and then waits.
func fakeGemini(t *testing.T, dir string, tool bool, args ...string) *exec.Cmd {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found")
	}
	bin := filepath.Join(t.TempDir(), "gemini")
	js := "setInterval(() => {}, 1e6);\n"
	if tool {
		js = "require('child_process').spawn('sleep', ['300'], {detached: true, stdio: 'ignore'});\n" + js
	}
	if err := os.WriteFile(bin, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, append([]string{bin}, args...)...)
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd
}

func snapshot(t *testing.T) *proc.Snapshot {
	t.Helper()
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// waitFor polls cond on fresh snapshots for up to 10 s.
func waitFor(t *testing.T, what string, cond func(*proc.Snapshot) bool) *proc.Snapshot {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		snap := snapshot(t)
		if cond(snap) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func pids(owners []adapters.Owner) []int {
	var out []int
	for _, o := range owners {
		out = append(out, o.Identity.PID)
	}
	return out
}

// TestOwnersInferred: real processes. A gemini in the chat's project
// folder that started before its last write is an inferred owner; two are
// both candidates; one started after the last write, or in another
// folder, or naming another session with --session-id or --resume, is
// none; one
// naming this session with --session-id or --resume is its exact owner.
func TestOwnersInferred(t *testing.T) {
	tr := newTree(t)
	folder, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	chats := tr.project("p", folder)
	const id = "abcdef01-0000-0000-0000-000000000000"
	path := filepath.Join(chats, "session-2026-11-27T10-00-abcdef01.jsonl")

	p1 := fakeGemini(t, folder, false, "-m", "gemini-2.5-flash")
	p2 := fakeGemini(t, folder, false)
	fakeGemini(t, other, false)
	fakeGemini(t, folder, false, "--session-id", "99999999-0000-0000-0000-000000000000")
	fakeGemini(t, folder, false, "--resume", "88888888-0000-0000-0000-000000000000")
	time.Sleep(100 * time.Millisecond)
	l := newLines().header(id, hashOf(folder)).user("u1", "hi")
	tr.write(path, l.b.Bytes()) // written after they started
	snap := waitFor(t, "the fake geminis", func(s *proc.Snapshot) bool {
		n := 0
		for _, p := range s.Procs {
			if _, ok := isGeminiArgv(p.Argv); ok && p.Cwd != "" {
				n++
			}
		}
		return n >= 5
	})
	a := New(Config{Roots: []string{tr.root}})
	obs, err := a.Discover(context.Background(), snap)
	if err != nil || len(obs.All()) != 1 {
		t.Fatalf("%v %+v", err, obs)
	}
	o := obs.All()[0]
	got := pids(o.Owners)
	if len(got) != 2 || !((got[0] == p1.Process.Pid && got[1] == p2.Process.Pid) || (got[1] == p1.Process.Pid && got[0] == p2.Process.Pid)) {
		t.Fatalf("owners %v, want %d and %d: %+v", got, p1.Process.Pid, p2.Process.Pid, o.Owners)
	}
	for _, ow := range o.Owners {
		if !ow.Inferred || !strings.Contains(ow.Evidence, "project folder") {
			t.Fatalf("owner %+v", ow)
		}
	}

	// A gemini started after the chat's last write is not its owner.
	p1.Process.Kill()
	p2.Process.Kill()
	p1.Wait()
	p2.Wait()
	time.Sleep(startSlack + 100*time.Millisecond)
	late := fakeGemini(t, folder, false)
	snap = waitFor(t, "the late gemini", func(s *proc.Snapshot) bool { return s.Procs[late.Process.Pid] != nil })
	obs, _ = a.Discover(context.Background(), snap)
	if len(obs.All()[0].Owners) != 0 {
		t.Fatalf("a gemini started after the last write owns it: %+v", obs.All()[0].Owners)
	}

	// Named: --session-id (or --resume) with this id, started even later.
	named := fakeGemini(t, other, false, "--session-id", id)
	snap = waitFor(t, "the named gemini", func(s *proc.Snapshot) bool { return s.Procs[named.Process.Pid] != nil })
	obs, _ = a.Discover(context.Background(), snap)
	// Its folder is another (the chat's folder is what a real one would
	// run in), so it is found through argv only when in the folder:
	if len(obs.All()[0].Owners) != 0 {
		t.Fatalf("a gemini in another folder owns it: %+v", obs.All()[0].Owners)
	}
	named2 := fakeGemini(t, folder, false, "--resume", id)
	snap = waitFor(t, "the resuming gemini", func(s *proc.Snapshot) bool { return s.Procs[named2.Process.Pid] != nil })
	obs, _ = a.Discover(context.Background(), snap)
	if o := obs.All()[0]; len(o.Owners) != 1 || o.Owners[0].Identity.PID != named2.Process.Pid || o.Owners[0].Inferred {
		t.Fatalf("owners %+v, want pid %d exactly", o.Owners, named2.Process.Pid)
	}
}

// TestOrphansByTree: a tool a gemini started in a session of its own is
// named, reapable, on the session once that gemini was killed, because it
// was seen below it while it lived; nothing is named while it lives.
func TestOrphansByTree(t *testing.T) {
	tr := newTree(t)
	folder, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	chats := tr.project("p", folder)
	const id = "abcdef02-0000-0000-0000-000000000000"
	g := fakeGemini(t, folder, true)
	time.Sleep(100 * time.Millisecond)
	l := newLines().header(id, hashOf(folder)).user("u1", "run").gemini("g1", "")
	tr.write(filepath.Join(chats, "session-2026-11-27T10-00-abcdef02.jsonl"), l.b.Bytes())
	var tool int
	snap := waitFor(t, "the tool", func(s *proc.Snapshot) bool {
		for _, p := range s.Procs {
			if p.PPID == g.Process.Pid && p.SID == p.Identity.PID && len(p.Argv) > 0 && filepath.Base(p.Argv[0]) == "sleep" {
				tool = p.Identity.PID
				return true
			}
		}
		return false
	})
	t.Cleanup(func() { syscall.Kill(tool, syscall.SIGKILL) })
	a := New(Config{Roots: []string{tr.root}})
	obs, err := a.Discover(context.Background(), snap)
	if err != nil || len(obs.All()) != 1 || len(obs.All()[0].Owners) != 1 || len(obs.All()[0].Problems) != 0 {
		t.Fatalf("%v %+v", err, obs.All())
	}
	if obs.All()[0].Activity != session.ActivityBusy {
		t.Fatalf("activity %s", obs.All()[0].Activity)
	}
	g.Process.Signal(syscall.SIGKILL)
	g.Wait()
	snap = waitFor(t, "the gemini's death", func(s *proc.Snapshot) bool { return s.Procs[g.Process.Pid] == nil })
	obs, err = a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	o := obs.All()[0]
	if len(o.Problems) != 1 || o.Problems[0].Kind != session.ProblemOrphanProcesses || o.Problems[0].Process == nil || o.Problems[0].Process.PID != tool {
		t.Fatalf("problems %+v, want the tool %d", o.Problems, tool)
	}
	if len(o.InFlight) != 1 || o.InFlight[0].Kind != session.ProblemOrphanedToolCall {
		t.Fatalf("in flight %+v", o.InFlight)
	}
}

// TestToolRunsBehindAnAnswer: the model answered with text and a call;
// the chat shows only the text until the call is done, but the owner's
// tool (a child in a session of its own) runs: busy. Without it, idle.
func TestToolRunsBehindAnAnswer(t *testing.T) {
	for _, tool := range []bool{true, false} {
		tr := newTree(t)
		folder, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		chats := tr.project("p", folder)
		g := fakeGemini(t, folder, tool)
		time.Sleep(100 * time.Millisecond)
		l := newLines().header("abcdef03-0000-0000-0000-000000000000", hashOf(folder)).user("u1", "run").gemini("g1", "Running it now.")
		tr.write(filepath.Join(chats, "session-2026-11-27T10-00-abcdef03.jsonl"), l.b.Bytes())
		snap := waitFor(t, "the gemini", func(s *proc.Snapshot) bool {
			if s.Procs[g.Process.Pid] == nil {
				return false
			}
			return !tool || toolChild(s, g.Process.Pid) != nil
		})
		obs, err := New(Config{Roots: []string{tr.root}}).Discover(context.Background(), snap)
		if err != nil || len(obs.All()) != 1 {
			t.Fatalf("%v %+v", err, obs)
		}
		o := obs.All()[0]
		want := session.ActivityIdle
		if tool {
			want = session.ActivityBusy
		}
		if o.Activity != want || (tool && !strings.Contains(o.ActivityEvidence, "process tree")) {
			t.Fatalf("tool %v: %s (%s), want %s", tool, o.Activity, o.ActivityEvidence, want)
		}
		if tool {
			// A tool that started after the chat's last write (an
			// approval after the model's answer): its start is when the
			// data last said something, newer than a hook that said
			// "waiting". One that started before says nothing new.
			for _, after := range []bool{true, false} {
				last := o.LastActivity
				toolStart := last.Add(-time.Second)
				if after {
					toolStart = last.Add(time.Second)
				}
				busy := []adapters.Observed{{Owners: o.Owners, Activity: session.ActivityBusy, LastActivity: last}}
				var asked proc.Identity
				toolsRunning(busy, snap, func(id proc.Identity) (time.Time, error) { asked = id; return toolStart, nil })
				if asked != toolChild(snap, g.Process.Pid).Identity {
					t.Fatalf("start time asked of %v", asked)
				}
				if got := busy[0].ActivityAt; after && !got.Equal(toolStart) || !after && !got.IsZero() || busy[0].Activity != session.ActivityBusy {
					t.Fatalf("tool started after the last write %v: %s at %v", after, busy[0].Activity, got)
				}
			}
			syscall.Kill(toolChild(snap, g.Process.Pid).Identity.PID, syscall.SIGKILL)
		} else if !o.ActivityAt.IsZero() {
			t.Fatalf("no tool: activity at %v", o.ActivityAt)
		}
	}
}
