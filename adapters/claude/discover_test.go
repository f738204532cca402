package claude

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Sessions with a live registry owner, with none (transcript only), and a
// .key file beside the registry that is never opened.
func TestDiscoverWithAndWithoutOwners(t *testing.T) {
	r, cwd := newRoot(t)
	owned, orphan := claudetest.NewSessionID(), claudetest.NewSessionID()
	now := time.Now().Add(-time.Minute)

	tr := claudetest.NewTranscript(owned, cwd, now)
	tr.Turn("list the files", "ls -la", "total 0", "There are no files.")
	r.WriteTranscript(t, tr)
	tr2 := claudetest.NewTranscript(orphan, cwd, now.Add(-48*time.Hour))
	tr2.Turn("fix the bug", "go test ./...", "ok", "Fixed.")
	r.WriteTranscript(t, tr2)

	owner := start(t, cwd, nil, "sleep", "120")
	r.WriteRegistry(t, claudetest.LiveEntry(t, owner.pid, owned, cwd, "idle"))
	key := r.WriteKey(t, owner.pid)

	// A stale busy entry of a crashed process whose pid is gone.
	crashed := claudetest.NewSessionID()
	gone := start(t, cwd, nil, "sleep", "120")
	stale := claudetest.LiveEntry(t, gone.pid, crashed, cwd, "busy")
	gone.kill()
	r.WriteRegistry(t, stale)

	fsys := &testFS{}
	a := newTestAdapter(t, fsys, r.Dir)
	obs := discover(t, a, snapshot(t))
	if len(obs.Errors) != 0 {
		t.Fatalf("errors: %v", obs.Errors)
	}
	if obs.Len() != 3 {
		t.Fatalf("want 3 sessions, got %d", obs.Len())
	}
	c := mustFind(t, obs, crashed)
	if len(c.Owners) != 1 || probe(c.Owners[0].Identity) != proc.Dead || c.Activity == session.ActivityBusy ||
		issue(c.InFlight, session.ProblemStaleBusyMarker, strconv.Itoa(gone.pid)) == nil {
		t.Fatalf("stale entry of a dead pid: %+v", c)
	}
	if info, ok := a.lookup(owned); !ok || info.Cwd != cwd || info.Root != r.Dir || info.Version != claudetest.Version || info.GitBranch != "main" || info.First.IsZero() {
		t.Fatalf("lookup = %+v, %v", info, ok)
	}
	if _, ok := a.lookup(crashed); ok {
		t.Fatal("lookup found a transcript that does not exist")
	}

	o := mustFind(t, obs, owned)
	if len(o.Owners) != 1 || o.Owners[0].Identity.PID != owner.pid || o.Owners[0].Inferred || o.Owners[0].Evidence != evidenceRegistry {
		t.Fatalf("owners = %+v", o.Owners)
	}
	if got := probe(o.Owners[0].Identity); got != proc.Alive {
		t.Fatalf("registry owner probes %v", got)
	}
	if o.Activity != session.ActivityIdle || o.ActivityEvidence != evidenceRegistryState {
		t.Fatalf("activity = %s (%s)", o.Activity, o.ActivityEvidence)
	}
	if o.Source != r.ProjectDir(cwd) || o.Cwd != cwd || o.Title != "list the files" {
		t.Fatalf("source %q cwd %q title %q", o.Source, o.Cwd, o.Title)
	}
	if !o.LastActivity.Equal(tr.Last().Truncate(time.Millisecond)) {
		t.Fatalf("last activity %v, want %v", o.LastActivity, tr.Last())
	}
	if len(o.InFlight) != 0 {
		t.Fatalf("in flight: %+v", o.InFlight)
	}

	n := mustFind(t, obs, orphan)
	if len(n.Owners) != 0 || n.Activity != session.ActivityUnknown || len(n.InFlight) != 0 {
		t.Fatalf("ownerless session: %+v", n)
	}
	for _, p := range fsys.openedPaths() {
		if strings.HasSuffix(p, ".key") || p == key {
			t.Fatalf("opened the secret %s", p)
		}
	}
}

// A live owner whose transcript does not exist yet (the file appears only
// with the first message) is observed from the registry alone.
func TestLiveOwnerWithoutTranscript(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	owner := start(t, cwd, nil, "sleep", "120")
	r.WriteRegistry(t, claudetest.LiveEntry(t, owner.pid, id, cwd, "idle"))

	a := newTestAdapter(t, &testFS{}, r.Dir)
	obs := discover(t, a, snapshot(t))
	o := mustFind(t, obs, id)
	if len(o.Owners) != 1 || probe(o.Owners[0].Identity) != proc.Alive {
		t.Fatalf("owners = %+v", o.Owners)
	}
	if o.Cwd != cwd || o.LastActivity.IsZero() || o.Activity != session.ActivityIdle {
		t.Fatalf("observed %+v", o)
	}
	// Also without a snapshot: the registry owner is still reported.
	obs = discover(t, a, nil)
	if o := mustFind(t, obs, id); len(o.Owners) != 1 || probe(o.Owners[0].Identity) != proc.Alive {
		t.Fatalf("nil snapshot owners = %+v", o.Owners)
	}
}

// A registry entry whose pid is live with other start ticks names a reused
// pid: its identity is reported (and probes Dead), never its activity.
func TestPIDReuseWrongProcStart(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
	tr.Turn("hello", "true", "", "Hi.")
	r.WriteTranscript(t, tr)
	p := start(t, cwd, nil, "sleep", "120")
	real, err := proc.NewHost().Identify(p.pid)
	if err != nil {
		t.Fatal(err)
	}
	wrong := strconv.FormatUint(real.StartTicks+12345, 10)
	r.WriteRegistry(t, claudetest.NewEntry(p.pid, wrong, claudetest.HostDomain(), id, cwd, "busy", time.Now().Add(-time.Hour)))

	a := newTestAdapter(t, &testFS{}, r.Dir)
	for _, snap := range []*proc.Snapshot{snapshot(t), nil} {
		obs := discover(t, a, snap)
		o := mustFind(t, obs, id)
		if len(o.Owners) != 1 {
			t.Fatalf("owners = %+v", o.Owners)
		}
		got := o.Owners[0].Identity
		if got.PID != p.pid || got.StartTicks == real.StartTicks || probe(got) != proc.Dead {
			t.Fatalf("reused pid reported as %v (probe %v)", got, probe(got))
		}
		if o.Activity == session.ActivityBusy || o.ActivityEvidence == evidenceRegistryState {
			t.Fatalf("activity taken from an invalid entry: %s (%s)", o.Activity, o.ActivityEvidence)
		}
		if issue(o.InFlight, session.ProblemStaleBusyMarker, strconv.Itoa(p.pid)) == nil {
			t.Fatalf("stale busy marker missing: %+v", o.InFlight)
		}
	}
}

// The owner is killed (-9) mid tool call: the transcript ends with a
// tool_use without result, the registry still says busy, and the tool's
// process tree (bash -> python3, with CLAUDE_PID and
// CLAUDE_CODE_SESSION_ID in its environment) keeps running.
func TestKillOwnerMidTool(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	owner, tools := toolTree(t, cwd, `CLAUDE_PID=$$ CLAUDE_CODE_SESSION_ID=`+id+` CLAUDECODE=1`)
	tr := claudetest.NewTranscript(id, cwd, time.Now())
	toolID := tr.CrashMidTool("run the long job", "python3 -c 'import time; time.sleep(120)'")
	r.WriteTranscript(t, tr)
	r.WriteRegistry(t, claudetest.LiveEntry(t, owner.pid, id, cwd, "busy"))
	r.WriteKey(t, owner.pid)

	a := newTestAdapter(t, &testFS{}, r.Dir)
	obs := discover(t, a, snapshot(t))
	o := mustFind(t, obs, id)
	if o.Activity != session.ActivityBusy || o.ActivityEvidence != evidenceRegistryState {
		t.Fatalf("live: activity %s (%s)", o.Activity, o.ActivityEvidence)
	}
	if len(o.Problems) != 0 {
		t.Fatalf("live owner, yet problems: %+v", o.Problems)
	}
	if probe(o.Owners[0].Identity) != proc.Alive {
		t.Fatal("owner not alive before the kill")
	}

	owner.kill()
	obs = discover(t, a, snapshot(t))
	o = mustFind(t, obs, id)
	if len(o.Owners) != 1 || probe(o.Owners[0].Identity) != proc.Dead {
		t.Fatalf("owner after kill: %+v", o.Owners)
	}
	call := issue(o.InFlight, session.ProblemOrphanedToolCall, toolID)
	if call == nil || !strings.Contains(call.Detail, "Bash") || call.Since.IsZero() {
		t.Fatalf("orphaned tool call missing: %+v", o.InFlight)
	}
	if issue(o.InFlight, session.ProblemStaleBusyMarker, strconv.Itoa(owner.pid)) == nil {
		t.Fatalf("stale busy marker missing: %+v", o.InFlight)
	}
	if o.Activity == session.ActivityBusy {
		t.Fatalf("activity from a dead owner: %s (%s)", o.Activity, o.ActivityEvidence)
	}
	// The same adapter (which remembers the tree) and a fresh one (which
	// has only the environment markers to go by, as after a restart) both
	// see them; only the one that saw the tree alive may reap them: the
	// markers are inherited by whatever a tool starts (orphans.go).
	fresh := mustFind(t, discover(t, newTestAdapter(t, &testFS{}, r.Dir), snapshot(t)), id)
	for _, got := range []*adapters.Observed{o, fresh} {
		if len(got.Problems) != len(tools) {
			t.Fatalf("problems %+v, want %d orphans", got.Problems, len(tools))
		}
		for _, tp := range tools {
			is := issue(got.Problems, session.ProblemOrphanProcesses, strconv.Itoa(tp.Identity.PID))
			if is == nil {
				t.Fatalf("orphan %d (%v) not reported: %+v", tp.Identity.PID, tp.Argv, got.Problems)
			}
			if !strings.Contains(is.Detail, cwd) || !strings.Contains(is.Detail, strconv.Itoa(owner.pid)) || !strings.Contains(is.Detail, "time.sleep") {
				t.Fatalf("orphan detail lacks cwd, owner or argv: %s", is.Detail)
			}
			if reapable := is.Process != nil && *is.Process == tp.Identity; reapable != (got == o) || strings.Contains(is.Detail, "suspect") == reapable {
				t.Errorf("pid %d reapable %v from the adapter that saw the tree %v: %+v", tp.Identity.PID, reapable, got == o, is)
			}
		}
	}
}

// Older versions set only CLAUDECODE=1: the leftover tools are found from
// the owner's descendants remembered while it lived.
func TestOrphansFromRememberedDescendants(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	owner, tools := toolTree(t, cwd, `CLAUDECODE=1`)
	tr := claudetest.NewTranscript(id, cwd, time.Now())
	tr.CrashMidTool("run it", "python3 long.py")
	r.WriteTranscript(t, tr)
	r.WriteRegistry(t, claudetest.LiveEntry(t, owner.pid, id, cwd, "busy"))

	a := newTestAdapter(t, &testFS{}, r.Dir)
	discover(t, a, snapshot(t)) // remembers the tree
	owner.kill()
	o := mustFind(t, discover(t, a, snapshot(t)), id)
	for _, tp := range tools {
		if issue(o.Problems, session.ProblemOrphanProcesses, strconv.Itoa(tp.Identity.PID)) == nil {
			t.Fatalf("orphan %d not reported: %+v", tp.Identity.PID, o.Problems)
		}
	}
	// Once the orphans are gone, so is the problem.
	_ = syscallKillGroup(owner.pid)
	testenv.Eventually(t, 10*time.Second, "orphans gone", func() bool {
		o := mustFind(t, discover(t, a, snapshot(t)), id)
		return len(o.Problems) == 0
	})
}

// Without a registry (older versions), a live claude in the session's cwd
// that started before its last write is an inferred candidate; one that
// started after (an old session in the same directory) is no evidence.
// Helper processes are never candidates; an argv naming the session is.
func TestInferredAndArgvOwners(t *testing.T) {
	r, cwd := newRoot(t)
	old, cur, named := claudetest.NewSessionID(), claudetest.NewSessionID(), claudetest.NewSessionID()

	oldTr := claudetest.NewTranscript(old, cwd, time.Now().Add(-24*time.Hour))
	oldTr.Turn("old work", "make", "ok", "Done.")
	r.WriteTranscript(t, oldTr)

	c1 := startAs(t, cwd, nil, "claude")
	c2 := startAs(t, cwd, nil, "claude")
	helper := startAs(t, cwd, nil, "claude", "--bg-spare")
	resumer := startAs(t, t.TempDir(), nil, "claude", "--resume", named)
	for _, p := range []*started{c1, c2, helper, resumer} {
		waitArgv(t, p.pid, "claude")
	}
	time.Sleep(50 * time.Millisecond) // start ticks are 10 ms

	tr := claudetest.NewTranscript(cur, cwd, time.Now())
	tr.Turn("new work", "ls", "", "Listed.")
	r.WriteTranscript(t, tr)
	ntr := claudetest.NewTranscript(named, cwd, time.Now().Add(-2*time.Hour))
	ntr.Turn("named", "ls", "", "ok")
	r.WriteTranscript(t, ntr)

	a := newTestAdapter(t, &testFS{}, r.Dir)
	obs := discover(t, a, snapshot(t))
	if o := mustFind(t, obs, old); len(o.Owners) != 0 {
		t.Fatalf("old session got owners %+v", o.Owners)
	}
	o := mustFind(t, obs, cur)
	pids := map[int]bool{}
	for _, ow := range o.Owners {
		if !ow.Inferred || ow.Evidence != evidenceCwdMatch {
			t.Fatalf("owner %+v not inferred", ow)
		}
		pids[ow.Identity.PID] = true
	}
	if len(o.Owners) != 2 || !pids[c1.pid] || !pids[c2.pid] {
		t.Fatalf("candidates = %+v, want pids %d and %d (not the helper %d)", o.Owners, c1.pid, c2.pid, helper.pid)
	}
	if o.Activity != session.ActivityIdle || o.ActivityEvidence != evidenceTranscript {
		t.Fatalf("activity %s (%s)", o.Activity, o.ActivityEvidence)
	}
	n := mustFind(t, obs, named)
	if len(n.Owners) != 1 || n.Owners[0].Identity.PID != resumer.pid || n.Owners[0].Inferred || n.Owners[0].Evidence != evidenceArgvResume {
		t.Fatalf("argv owner = %+v", n.Owners)
	}
	// No snapshot: nothing inferred.
	if o := mustFind(t, discover(t, a, nil), cur); len(o.Owners) != 0 {
		t.Fatalf("inferred without a snapshot: %+v", o.Owners)
	}
}

// A root named only by a live claude's CLAUDE_CONFIG_DIR is read too.
func TestLearnedRoot(t *testing.T) {
	r, cwd := newRoot(t)
	other := claudetest.NewRoot(t, filepath.Join(t.TempDir(), "profile2"))
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
	tr.Turn("in profile 2", "ls", "", "ok")
	other.WriteTranscript(t, tr)
	p := startAs(t, cwd, []string{"CLAUDE_CONFIG_DIR=" + other.Dir}, "claude")
	waitArgv(t, p.pid, "claude")

	a := New(Config{Roots: []string{r.Dir}, DefaultRoot: r.Dir, FS: &testFS{}})
	obs := discover(t, a, snapshot(t))
	o := mustFind(t, obs, id)
	if o.Source != other.ProjectDir(cwd) {
		t.Fatalf("source = %q, want the project dir under the learned root %s", o.Source, other.Dir)
	}
	found := false
	for _, w := range a.WatchPaths() {
		found = found || w == filepath.Join(other.Dir, "projects")
	}
	if !found {
		t.Fatalf("learned root not watched: %v", a.WatchPaths())
	}
}

// An unreadable project dir is an input error; the other roots (and the
// other projects) keep working. A root that cannot be read at all is an
// input error too, and only when no root can be read is Discover an error.
func TestUnreadableInputs(t *testing.T) {
	r1, cwd1 := newRoot(t)
	r2, cwd2 := newRoot(t)
	bad, good1, good2 := claudetest.NewSessionID(), claudetest.NewSessionID(), claudetest.NewSessionID()
	badCwd := filepath.Join(filepath.Dir(cwd1), "other")
	for _, x := range []struct {
		r       *claudetest.Root
		id, cwd string
	}{{r1, bad, badCwd}, {r1, good1, cwd1}, {r2, good2, cwd2}} {
		tr := claudetest.NewTranscript(x.id, x.cwd, time.Now().Add(-time.Hour))
		tr.Turn("hi", "ls", "", "ok")
		x.r.WriteTranscript(t, tr)
	}
	fsys := &testFS{}
	badDir := r1.ProjectDir(badCwd)
	fsys.failPath(badDir, errInjected)
	a := newTestAdapter(t, fsys, r1.Dir, r2.Dir)
	obs := discover(t, a, nil)
	if len(obs.Errors) != 1 || obs.Errors[0].Input != badDir {
		t.Fatalf("errors = %v", obs.Errors)
	}
	if find(obs, bad) != nil || find(obs, good1) == nil || find(obs, good2) == nil {
		t.Fatalf("sessions = %+v", obs.All())
	}

	// The whole first root unreadable: the second still works.
	fsys.failPath(filepath.Join(r1.Dir, "projects"), errInjected)
	obs = discover(t, a, nil)
	if find(obs, good2) == nil || find(obs, good1) != nil || len(obs.Errors) == 0 {
		t.Fatalf("sessions %+v errors %v", obs.All(), obs.Errors)
	}

	// No root readable at all: Discover fails.
	b := newTestAdapter(t, &statFailFS{testFS: fsys, fail: map[string]bool{r1.Dir: true, r2.Dir: true}}, r1.Dir, r2.Dir)
	if _, err := b.Discover(context.Background(), nil); err == nil {
		t.Fatal("no root readable, yet no error")
	}
	// A root that does not exist is not an error (Claude never ran there).
	c := newTestAdapter(t, &testFS{}, filepath.Join(t.TempDir(), "nope"))
	if obs, err := c.Discover(context.Background(), nil); err != nil || len(obs.Errors) != 0 {
		t.Fatalf("missing root: %v %v", err, obs.Errors)
	}
}

// statFailFS fails Stat of some paths.
type statFailFS struct {
	*testFS
	fail map[string]bool
}

func (f *statFailFS) Stat(name string) (os.FileInfo, error) {
	if f.fail[name] {
		return nil, &os.PathError{Op: "stat", Path: name, Err: errInjected}
	}
	return f.testFS.Stat(name)
}

// Activity comes from the transcript tail when a live owner has no status
// in the registry, and a trailing prompt without reply is in flight.
func TestTranscriptTailActivityAndTrailingPrompt(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now())
	tr.Turn("first", "ls", "", "ok")
	tr.QueueOperation("enqueue", "second").User("second question").AtisLatch()
	path := r.WriteTranscript(t, tr)
	owner := start(t, cwd, nil, "sleep", "120")
	r.WriteRegistry(t, claudetest.LiveEntry(t, owner.pid, id, cwd, ""))

	a := newTestAdapter(t, &testFS{}, r.Dir)
	o := mustFind(t, discover(t, a, snapshot(t)), id)
	if o.Activity != session.ActivityBusy || o.ActivityEvidence != evidenceTranscript {
		t.Fatalf("activity %s (%s)", o.Activity, o.ActivityEvidence)
	}
	if issue(o.InFlight, session.ProblemIncompleteMessage, "") == nil {
		t.Fatalf("trailing prompt not in flight: %+v", o.InFlight)
	}
	if o.Title != "first" {
		t.Fatalf("title %q", o.Title)
	}
	// The reply comes: idle, nothing in flight.
	reply := claudetest.NewTranscript(id, cwd, time.Now())
	reply.AssistantText("Answer.")
	reply.CostState()
	claudetest.Append(t, path, reply.Lines()...)
	o = mustFind(t, discover(t, a, snapshot(t)), id)
	if o.Activity != session.ActivityIdle || len(o.InFlight) != 0 {
		t.Fatalf("after reply: %s %+v", o.Activity, o.InFlight)
	}
}

func TestWatchPaths(t *testing.T) {
	r, cwd := newRoot(t)
	for i := range 5 {
		tr := claudetest.NewTranscript(claudetest.NewSessionID(), filepath.Join(cwd, strconv.Itoa(i)), time.Now())
		tr.User("x")
		r.WriteTranscript(t, tr)
	}
	missing := filepath.Join(t.TempDir(), "fresh")
	if err := os.MkdirAll(missing, 0o700); err != nil {
		t.Fatal(err)
	}
	a := New(Config{Roots: []string{r.Dir, missing}, DefaultRoot: r.Dir, NoLearnedRoots: true, MaxWatches: 5})
	before := a.WatchPaths()
	if len(before) != 3 { // sessions, projects, and the fresh root itself
		t.Fatalf("before the first pass: %v", before)
	}
	discover(t, a, nil)
	w := a.WatchPaths()
	if len(w) != 5 {
		t.Fatalf("watch paths not bounded: %v", w)
	}
	want := map[string]bool{filepath.Join(r.Dir, "sessions"): true, filepath.Join(r.Dir, "projects"): true, missing: true}
	for _, p := range w {
		delete(want, p)
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			t.Fatalf("watch path %s is not a directory", p)
		}
	}
	if len(want) != 0 {
		t.Fatalf("missing watch paths %v in %v", want, w)
	}
}

// Observations are stable: a pass with nothing changed reports the same.
func TestStablePasses(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now())
	tr.CrashMidTool("go", "sleep 1000")
	r.WriteTranscript(t, tr)
	a := newTestAdapter(t, &testFS{}, r.Dir)
	first := discover(t, a, nil)
	second := discover(t, a, nil)
	if first.Len() != 1 || second.Len() != 1 {
		t.Fatal("session count")
	}
	f, s := first.All()[0], second.All()[0]
	if f.UpstreamID != s.UpstreamID || len(f.InFlight) != len(s.InFlight) || !f.LastActivity.Equal(s.LastActivity) || len(f.InFlight) != 1 {
		t.Fatalf("passes differ: %+v vs %+v", f, s)
	}
	var _ adapters.Adapter = a
}

// A pending AskUserQuestion call (Claude Code 2.1.328's shape) waits for
// the user's answer: with no registry status the session is waiting for
// that question, and when the registry says "input needed" the question's
// words come from the call. Answered, the session is idle.
func TestPendingQuestionIsWaiting(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now())
	tr.Turn("first", "ls", "", "ok")
	tr.User("which database?")
	tr.AssistantToolUse("toolu_q1", "AskUserQuestion", map[string]any{"questions": []any{map[string]any{
		"header": "Database", "multiSelect": false, "question": "Which database should I use?",
		"options": []any{map[string]any{"label": "Postgres", "description": "A server"}},
	}}})
	path := r.WriteTranscript(t, tr)
	owner := start(t, cwd, nil, "sleep", "120")
	entry := claudetest.LiveEntry(t, owner.pid, id, cwd, "")
	r.WriteRegistry(t, entry)

	a := newTestAdapter(t, &testFS{}, r.Dir)
	o := mustFind(t, discover(t, a, snapshot(t)), id)
	want := session.WaitingFor{Kind: session.WaitingQuestion, Question: "Which database should I use?"}
	if o.Activity != session.ActivityWaiting || o.WaitingFor == nil || *o.WaitingFor != want || o.ActivitySource != session.SourceTranscript {
		t.Fatalf("no registry status: %s %+v from %s (%s)", o.Activity, o.WaitingFor, o.ActivitySource, o.ActivityEvidence)
	}

	entry.Status, entry.WaitingFor = "waiting", "input needed"
	r.WriteRegistry(t, entry)
	o = mustFind(t, discover(t, a, snapshot(t)), id)
	want.Detail = "input needed"
	if o.Activity != session.ActivityWaiting || o.WaitingFor == nil || *o.WaitingFor != want || o.ActivitySource != session.SourceRegistry {
		t.Fatalf("registry input needed: %s %+v from %s", o.Activity, o.WaitingFor, o.ActivitySource)
	}

	answer := claudetest.NewTranscript(id, cwd, time.Now())
	answer.ToolResult("toolu_q1", `User has answered your questions: "Which database should I use?"="Postgres".`)
	answer.AssistantText("Postgres it is.")
	claudetest.Append(t, path, answer.Lines()...)
	entry.Status, entry.WaitingFor = "", ""
	r.WriteRegistry(t, entry)
	o = mustFind(t, discover(t, a, snapshot(t)), id)
	if o.Activity != session.ActivityIdle || o.WaitingFor != nil {
		t.Fatalf("answered: %s %+v", o.Activity, o.WaitingFor)
	}
}

// A claude that a registry entry or its argv names as the owner of one
// session is no inferred owner of another in its folder: a supervisor
// that launched a helper there and outlives it must not keep the helper's
// ended session running.
func TestClaimedClaudeIsNoInferredOwner(t *testing.T) {
	r, cwd := newRoot(t)
	own, resumed, ended := claudetest.NewSessionID(), claudetest.NewSessionID(), claudetest.NewSessionID()
	supervisor := startAs(t, cwd, nil, "claude")
	resumer := startAs(t, cwd, nil, "claude", "--resume", resumed)
	free := startAs(t, cwd, nil, "claude")
	for _, p := range []*started{supervisor, resumer, free} {
		waitArgv(t, p.pid, "claude")
	}
	time.Sleep(50 * time.Millisecond) // start ticks are 10 ms
	r.WriteRegistry(t, claudetest.LiveEntry(t, supervisor.pid, own, cwd, "busy"))
	for _, id := range []string{own, resumed} {
		tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Minute))
		tr.Turn("work", "ls", "", "ok")
		r.WriteTranscript(t, tr)
	}
	tr := claudetest.NewTranscript(ended, cwd, time.Now())
	tr.Turn("the helper's work", "ls", "", "Done.")
	r.WriteTranscript(t, tr)

	a := newTestAdapter(t, &testFS{}, r.Dir)
	for pass := 0; pass < 2; pass++ { // the full build, then the quiet one
		obs := discover(t, a, snapshot(t))
		o := mustFind(t, obs, ended)
		if len(o.Owners) != 1 || o.Owners[0].Identity.PID != free.pid || !o.Owners[0].Inferred {
			t.Fatalf("pass %d: owners of the ended session %+v; want only the unclaimed claude %d (not the registry's %d nor the resumer %d)",
				pass, o.Owners, free.pid, supervisor.pid, resumer.pid)
		}
		if s := mustFind(t, obs, own); len(s.Owners) != 1 || s.Owners[0].Identity.PID != supervisor.pid {
			t.Fatalf("pass %d: the supervisor's own session: %+v", pass, s.Owners)
		}
	}
	free.kill()
	if o := mustFind(t, discover(t, a, snapshot(t)), ended); len(o.Owners) != 0 {
		t.Fatalf("with the unclaimed claude gone: owners %+v; want none", o.Owners)
	}
}
