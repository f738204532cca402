package qwen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

const testBoot = "834161fa-1f07-46d6-b0bc-50e1fd7801c6"

// starts is a StartTimer of fixed start times by pid.
type starts map[int]time.Time

func (s starts) StartTime(id proc.Identity) (time.Time, error) {
	if t, ok := s[id.PID]; ok {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("pid %d: no start", id.PID)
}

// snapshot builds a process table.
type snapshot struct{ *proc.Snapshot }

func newSnap() snapshot {
	return snapshot{&proc.Snapshot{BootID: testBoot, Taken: time.Now(), Procs: map[int]*proc.Process{}}}
}

func (s snapshot) add(pid, ppid, sid int, cwd string, env map[string]string, argv ...string) *proc.Process {
	p := &proc.Process{Identity: proc.Identity{BootID: testBoot, PID: pid, StartTicks: uint64(pid) * 10}, PPID: ppid, PGID: sid, SID: sid,
		State: 'S', UID: os.Getuid(), Cwd: cwd, Argv: argv, Env: env}
	s.Procs[pid] = p
	return p
}

const (
	entryJS = "/usr/lib/node_modules/@qwen-code/qwen-code/cli-entry.js"
	cliJS   = "/usr/lib/node_modules/@qwen-code/qwen-code/cli.js"
)

// chain adds a qwen as it runs: the bin script, cli.js, and the
// relaunched cli.js that owns the session (pid+2), all with args.
func (s snapshot) chain(pid int, cwd string, args ...string) {
	s.add(pid, 1, pid, cwd, nil, append([]string{"node", "/usr/bin/qwen"}, args...)...)
	s.add(pid+1, pid, pid, cwd, nil, append([]string{"/usr/bin/node", "--expose-gc", cliJS}, args...)...)
	s.add(pid+2, pid+1, pid, cwd, nil, append([]string{"/usr/bin/node", "--expose-gc", cliJS}, args...)...)
}

func TestCommandLine(t *testing.T) {
	for _, c := range []struct {
		argv []string
		ok   bool
		args qwenArgs
	}{
		{[]string{"node", "/root/.cache/x/node_modules/.bin/qwen", "-p", "Run the long job", "--yolo"}, true, qwenArgs{Prompt: "Run the long job"}},
		{[]string{"/usr/bin/node", "--expose-gc", cliJS}, true, qwenArgs{}},
		{[]string{"node", entryJS, "--resume", "abc", "-m", "m1"}, true, qwenArgs{Session: "abc"}},
		{[]string{"node", entryJS, "-r", "--yolo"}, true, qwenArgs{}},
		{[]string{"node", entryJS, "--session-id=abc", "hello", "world"}, true, qwenArgs{Session: "abc", Prompt: "hello world"}},
		{[]string{"node", entryJS, "-r", "abc", "--fork-session"}, true, qwenArgs{Session: "abc", Fork: true}},
		{[]string{"node", entryJS, "--allowed-tools", "a", "b", "-c", "do it"}, true, qwenArgs{Continue: true, Prompt: "do it"}},
		{[]string{"node", entryJS, "mcp", "list"}, true, qwenArgs{Sub: "mcp"}},
		{[]string{"node", "/srv/app/cli.js"}, false, qwenArgs{}},
		{[]string{"qwen"}, false, qwenArgs{}},
		{[]string{"python3", "/usr/bin/qwen"}, false, qwenArgs{}},
	} {
		args, ok := commandLine(c.argv)
		if ok != c.ok {
			t.Errorf("%q: ok %v", c.argv, ok)
			continue
		}
		if ok {
			if got := parseArgs(args); got != c.args {
				t.Errorf("%q: %+v, want %+v", c.argv, got, c.args)
			}
		}
	}
}

// Only the innermost of a qwen chain owns; subcommands that run no
// session do not.
func TestFindQwenInnermost(t *testing.T) {
	s := newSnap()
	s.chain(100, "/p", "-p", "x")
	s.chain(200, "/p")
	s.add(300, 1, 300, "/p", nil, "node", "/usr/bin/qwen", "mcp", "list")
	var got []int
	for _, q := range findQwen(s.Snapshot) {
		got = append(got, q.p.Identity.PID)
	}
	if fmt.Sprint(got) != "[102 202]" {
		t.Errorf("owners %v, want [102 202]", got)
	}
}

// ownersHome is a home with the killed headless chat, whose cwd is
// /tmp/qx/home2/proj, created at 00:48:04.
func ownersHome(t *testing.T) (string, time.Time) {
	root := home(t, "headless-killed-mid-tool.jsonl")
	return root, time.Date(2026, 11, 28, 0, 47, 58, 0, time.UTC)
}

const killedCwd = "/tmp/qx/home2/proj"

func owners(o adapters.Observed) string {
	var out []string
	for _, ow := range o.Owners {
		out = append(out, fmt.Sprintf("%d inferred=%v (%s)", ow.Identity.PID, ow.Inferred, ow.Evidence))
	}
	return strings.Join(out, "; ")
}

func TestOwnersNamedByTool(t *testing.T) {
	root, start := ownersHome(t)
	s := newSnap()
	s.chain(100, killedCwd, "-p", "something else")
	s.chain(200, killedCwd)
	s.add(150, 102, 150, killedCwd, map[string]string{sessionVar: idKilled}, "bash", "-c", "python3 x")
	a := New(Config{Roots: []string{root}, StartTimer: starts{102: start, 202: start}})
	got, _ := discoverSnap(t, a, s.Snapshot)
	o := got[idKilled]
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != 102 || o.Owners[0].Inferred || !strings.Contains(o.Owners[0].Evidence, "tool") {
		t.Errorf("owners %s, want 102 named by its tool", owners(o))
	}
	// A qwen that inherited the variable (started by a qwen's tool) names
	// nothing by it.
	s.Procs[102].Env = map[string]string{sessionVar: idKilled}
	got, _ = discoverSnap(t, New(Config{Roots: []string{root}, StartTimer: starts{102: start, 202: start}}), s.Snapshot)
	if o := got[idKilled]; len(o.Owners) != 2 || !o.Owners[0].Inferred || !o.Owners[1].Inferred {
		t.Errorf("owners %s, want both qwens in the cwd, inferred", owners(o))
	}
}

func TestOwnersNamedByPromptAndArgv(t *testing.T) {
	root, start := ownersHome(t)
	s := newSnap()
	s.chain(100, killedCwd, "-p", "Run the long job", "--yolo")
	s.chain(200, killedCwd) // a TUI in the same cwd
	st := starts{102: start, 202: start}
	got, _ := discoverSnap(t, New(Config{Roots: []string{root}, StartTimer: st}), s.Snapshot)
	if o := got[idKilled]; len(o.Owners) != 1 || o.Owners[0].Identity.PID != 102 || o.Owners[0].Inferred {
		t.Errorf("owners %s, want 102 by its prompt", owners(o))
	}
	// The same prompt, started after the session was created: not its
	// creator; inferred with the other one.
	st[102] = start.Add(time.Minute)
	got, _ = discoverSnap(t, New(Config{Roots: []string{root}, StartTimer: st}), s.Snapshot)
	if o := got[idKilled]; len(o.Owners) != 1 || o.Owners[0].Identity.PID != 202 || !o.Owners[0].Inferred {
		t.Errorf("owners %s, want only the TUI 202, inferred (102 started after the last write)", owners(o))
	}
	// --resume names it exactly.
	s2 := newSnap()
	s2.chain(300, "/elsewhere", "--resume", idKilled)
	got, _ = discoverSnap(t, New(Config{Roots: []string{root}, StartTimer: starts{302: start}}), s2.Snapshot)
	if o := got[idKilled]; len(o.Owners) != 1 || o.Owners[0].Identity.PID != 302 || o.Owners[0].Inferred {
		t.Errorf("owners %s, want 302 by argv", owners(o))
	}
}

// Inferred: every qwen in the cwd that started before the last write and
// is named for no other session; none in another cwd or started later.
func TestOwnersInferred(t *testing.T) {
	root, start := ownersHome(t)
	s := newSnap()
	s.chain(100, killedCwd)
	s.chain(200, killedCwd)
	s.chain(300, "/other")
	s.chain(400, killedCwd)
	s.chain(500, killedCwd, "--session-id", "another-session")
	a := New(Config{Roots: []string{root}, StartTimer: starts{102: start, 202: start, 302: start, 402: start.Add(time.Hour), 502: start}})
	got, _ := discoverSnap(t, a, s.Snapshot)
	o := got[idKilled]
	if len(o.Owners) != 2 || o.Owners[0].Identity.PID != 102 || o.Owners[1].Identity.PID != 202 || !o.Owners[0].Inferred {
		t.Errorf("owners %s, want 102 and 202, inferred", owners(o))
	}
}

// The registry: a live entry names its process's session exactly, and
// keeps that process out of the other sessions of its cwd; a stale entry
// names its dead owner; a live entry without a chat yet is a session; an
// entry of another boot is dead without a probe.
func TestOwnersRegistry(t *testing.T) {
	root, start := ownersHome(t)
	reg := filepath.Join(root, "sessions")
	os.MkdirAll(reg, 0o700)
	write := func(pid int, ticks uint64, boot, id string) {
		b := fmt.Sprintf(`{"schemaVersion":1,"pid":%d,"procStart":"%s:%d","pidNs":4026531836,"sessionId":"%s","cwd":"%s","name":"n","startedAt":1795826973052,"kind":"tui","ipcToken":"secret"}`,
			pid, boot, ticks, id, killedCwd)
		if err := os.WriteFile(filepath.Join(reg, fmt.Sprintf("%d.json", pid)), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s := newSnap()
	s.chain(100, killedCwd)             // registered with a new session
	s.chain(200, killedCwd)             // unregistered
	write(102, 1020, testBoot, "fresh") // live
	write(7, 70, testBoot, idKilled)    // stale: no such process
	write(8, 80, "other-boot", "old")   // another boot
	a := New(Config{Roots: []string{root}, StartTimer: starts{102: start, 202: start}})
	got, obs := discoverSnap(t, a, s.Snapshot)
	o := got[idKilled]
	if len(o.Owners) != 1 || o.Owners[0].Identity != (proc.Identity{BootID: testBoot, PID: 7, StartTicks: 70}) || o.Owners[0].NoProbe != nil {
		t.Errorf("killed: owners %s, want the stale entry's pid 7 only (named owners exclude inferred ones)", owners(o))
	}
	f := got["fresh"]
	if len(f.Owners) != 1 || f.Owners[0].Identity.PID != 102 || f.Owners[0].Inferred || f.Cwd != killedCwd || f.Activity != "idle" {
		t.Errorf("the registered TUI's session: %+v", f)
	}
	if _, ok := got["old"]; ok {
		t.Errorf("a session from a dead entry without a chat: %+v", got["old"])
	}
	if len(obs.Warnings) != 0 || len(obs.Errors) != 0 {
		t.Errorf("warnings %v errors %v", obs.Warnings, obs.Errors)
	}
	// The stale entry gone: the unregistered qwen is inferred, the
	// registered one (its session another) is not.
	os.Remove(filepath.Join(reg, "7.json"))
	a.RequestRescan()
	got, _ = discoverSnap(t, a, s.Snapshot)
	if o := got[idKilled]; len(o.Owners) != 1 || o.Owners[0].Identity.PID != 202 || !o.Owners[0].Inferred {
		t.Errorf("owners %s, want 202 inferred only", owners(o))
	}
	// An entry of another boot names a dead owner, unprobed.
	write(8, 80, "other-boot", idKilled)
	a.RequestRescan()
	got, _ = discoverSnap(t, a, s.Snapshot)
	if o := got[idKilled]; len(o.Owners) != 1 || o.Owners[0].NoProbe == nil || o.Owners[0].NoProbe.Liveness != proc.Dead {
		t.Errorf("owners %s, want the other boot's entry, dead unprobed", owners(o))
	}
}

// A tool a dead qwen left behind, seen below it while it lived and still
// in the tool session it started, is a reapable orphan; a process that
// only carries the session's variable (a pane of a tmux server a tool
// started) is a suspect, without a process to reap.
func TestOrphansByTree(t *testing.T) {
	root, start := ownersHome(t)
	s := newSnap()
	s.chain(100, killedCwd, "-p", "Run the long job")
	env := map[string]string{sessionVar: idKilled}
	s.add(150, 102, 150, killedCwd, env, "bash", "-c", "python3 x; echo done")
	s.add(151, 150, 150, killedCwd, env, "python3", "x")
	a := New(Config{Roots: []string{root}, StartTimer: starts{102: start}})
	got, _ := discoverSnap(t, a, s.Snapshot)
	if o := got[idKilled]; len(o.Owners) != 1 || len(o.Problems) != 0 {
		t.Fatalf("while qwen lives: owners %s, problems %+v", owners(o), o.Problems)
	}
	// kill -9 of the qwen chain: bash and python3 live on, re-parented.
	for _, pid := range []int{100, 101, 102} {
		delete(s.Procs, pid)
	}
	s.Procs[150].PPID = 1
	s.add(160, 1, 160, "/", env, "tmux", "new-session") // inherited the variable only
	got, _ = discoverSnap(t, a, s.Snapshot)
	o := got[idKilled]
	if len(o.Owners) != 0 {
		t.Fatalf("owners %s after the kill", owners(o))
	}
	reap := map[int]bool{}
	for _, p := range o.Problems {
		if p.Kind != "orphan_processes" {
			t.Errorf("problem %+v", p)
		}
		if p.Process != nil {
			reap[p.Process.PID] = true
		} else if !strings.Contains(p.Detail, "pid 160 ") || !strings.Contains(p.Detail, "suspect") {
			t.Errorf("suspect %+v", p)
		}
	}
	if len(o.Problems) != 3 || !reap[150] || !reap[151] || reap[160] {
		t.Errorf("problems %+v: want 150 and 151 reapable, 160 a suspect", o.Problems)
	}
}
