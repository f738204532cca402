package claude

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// Every pass that reuses the quiet sessions must equal a full build of the
// same pass, through every kind of change: claude processes coming and
// going in a cwd, an argv naming a session, registry entries, a second
// root holding the same id, transcripts growing, appearing, vanishing.
func TestQuietReuseEqualsFullBuild(t *testing.T) {
	checked := 0
	quietCheck = func(reused, full []adapters.Observed) {
		checked++
		if len(reused) != len(full) {
			t.Fatalf("reused %d sessions, the full build %d", len(reused), len(full))
		}
		for i := range full {
			r, f := reused[i], full[i]
			r.Stamp, f.Stamp = 0, 0
			if !reflect.DeepEqual(r, f) {
				t.Fatalf("session %s: reused\n%+v\nfull\n%+v", f.UpstreamID, r, f)
			}
		}
	}
	t.Cleanup(func() { quietCheck = nil })

	r, _ := newRoot(t)
	other := claudetest.NewRoot(t, filepath.Join(t.TempDir(), "other"))
	var cwds []string
	for i := range 3 {
		d := filepath.Join(t.TempDir(), "proj")
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		cwds = append(cwds, d)
		_ = i
	}
	var ids, paths []string
	for i := range 30 {
		id := claudetest.NewSessionID()
		tr := claudetest.NewTranscript(id, cwds[i%3], time.Now().Add(-time.Hour))
		tr.Turn("work", "make", "ok", "Done.")
		if i%7 == 0 {
			tr.CrashMidTool("run", "sleep 9")
		}
		ids = append(ids, id)
		paths = append(paths, r.WriteTranscript(t, tr))
	}
	// The same id in a second root.
	dup := claudetest.NewTranscript(ids[4], cwds[1], time.Now().Add(-2*time.Hour))
	dup.Turn("elsewhere", "ls", "", "ok")
	other.WriteTranscript(t, dup)

	a := newTestAdapter(t, &testFS{}, r.Dir, other.Dir)
	pass := func() adapters.Observation {
		t.Helper()
		obs := discover(t, a, snapshot(t))
		checkShape(t, a)
		return obs
	}
	steady := func(what string) {
		t.Helper()
		before := a.counters().QuietReused
		pass()
		pass()
		if a.counters().QuietReused < before+1 {
			t.Fatalf("%s: no pass reused the quiet sessions", what)
		}
	}
	pass()
	steady("history")

	c := startAs(t, cwds[0], nil, "claude")
	waitArgv(t, c.pid, "claude")
	steady("a claude in a cwd")
	res := startAs(t, t.TempDir(), nil, "claude", "--resume", ids[2])
	waitArgv(t, res.pid, "claude")
	steady("a claude resuming a session")

	r.WriteRegistry(t, claudetest.NewEntry(999998, "1", claudetest.HostDomain(), ids[5], cwds[2], "busy", time.Now().Add(-time.Minute)))
	steady("a registry entry")

	// The registry's session is loud: its transcript growing (a busy
	// session's, every pass it writes) builds it alone, and the very next
	// pass hands out the same set.
	busy := claudetest.NewTranscript(ids[5], cwds[2], time.Now())
	busy.Turn("go on", "ls", "", "ok")
	set := pass().Quiet
	before := a.counters().QuietReused
	appendTo(t, paths[5], busy.Bytes())
	if obs := pass(); a.counters().QuietReused != before+1 || obs.Quiet != set {
		t.Fatalf("a loud session's transcript grew: reused %d, the same set %v", a.counters().QuietReused-before, obs.Quiet == set)
	}

	more := claudetest.NewTranscript(ids[9], cwds[0], time.Now())
	more.Turn("more", "ls", "", "ok")
	appendTo(t, paths[9], more.Bytes())
	steady("a transcript grew")

	if err := os.Remove(paths[11]); err != nil {
		t.Fatal(err)
	}
	n := claudetest.NewTranscript(claudetest.NewSessionID(), cwds[1], time.Now())
	n.Turn("new", "ls", "", "ok")
	r.WriteTranscript(t, n)
	steady("a transcript gone and one new")

	c.kill()
	res.kill()
	if err := syscallKillGroup(c.pid); err != nil {
		t.Fatal(err)
	}
	_ = syscallKillGroup(res.pid)
	steady("the claudes gone")

	obs := pass()
	if find(obs, ids[11]) != nil || find(obs, n.SessionID) == nil {
		t.Fatal("a deleted or a new transcript is misreported")
	}
	if checked < 7 {
		t.Fatalf("only %d reused passes were checked", checked)
	}
}

// checkShape holds each project's kept share of shapePrint to the sum
// over its files' states now.
func checkShape(t *testing.T, a *Adapter) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.roots {
		for _, p := range r.projects {
			var want uint64
			for _, f := range p.files {
				if f.read {
					want += f.shapeHash()
				}
			}
			if got := p.fileShape(); got != want {
				t.Fatalf("project %s: kept shape %x, the sum over its files %x", p.path, got, want)
			}
		}
	}
}
