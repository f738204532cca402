package claude

import (
	"reflect"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
)

// A session seen only in its transcript keeps its Stamp (and its content)
// while the file does not change, gets a new one when it does, and none
// while a live claude in its cwd may own it or a registry entry names it.
func TestStampFollowsTheEvidence(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
	tr.Turn("work", "make", "ok", "Done.")
	path := r.WriteTranscript(t, tr)
	a := newTestAdapter(t, &testFS{}, r.Dir)

	first := *mustFind(t, discover(t, a, snapshot(t)), id)
	if first.Stamp == 0 {
		t.Fatal("a transcript-only session is not stamped")
	}
	again := *mustFind(t, discover(t, a, snapshot(t)), id)
	if again.Stamp != first.Stamp || !reflect.DeepEqual(again, first) {
		t.Fatalf("unchanged file, different observation:\n%+v\n%+v", again, first)
	}

	// The file grows: a new stamp, and the new content.
	more := claudetest.NewTranscript(id, cwd, time.Now())
	call := more.CrashMidTool("more", "sleep 9")
	appendTo(t, path, more.Bytes())
	grown := *mustFind(t, discover(t, a, snapshot(t)), id)
	if grown.Stamp == 0 || grown.Stamp == first.Stamp {
		t.Fatalf("grown file: stamp %d (was %d), in flight %+v", grown.Stamp, first.Stamp, grown.InFlight)
	}
	found := false
	for _, is := range grown.InFlight {
		found = found || is.Key == call
	}
	if !found {
		t.Fatalf("the new tool call is not in flight: %+v", grown.InFlight)
	}

	// A live claude in the cwd may own it: built afresh, unstamped.
	c := startAs(t, cwd, nil, "claude")
	waitArgv(t, c.pid, "claude")
	owned := *mustFind(t, discover(t, a, snapshot(t)), id)
	if owned.Stamp != 0 || len(owned.Owners) != 1 || owned.Owners[0].Identity.PID != c.pid {
		t.Fatalf("with a live claude in the cwd: stamp %d, owners %+v", owned.Stamp, owned.Owners)
	}
	// Its leftover child, if the pass saw it spawned, is an orphan of the
	// session: then unstamped too.
	c.kill()
	orphaned := *mustFind(t, discover(t, a, snapshot(t)), id)
	if (len(orphaned.Problems) > 0) != (orphaned.Stamp == 0) {
		t.Fatalf("stamp %d with problems %+v", orphaned.Stamp, orphaned.Problems)
	}
	// Once all of it is gone, the file alone speaks again, as before.
	if err := syscallKillGroup(c.pid); err != nil {
		t.Fatal(err)
	}
	var gone adapters.Observed
	testenv.Eventually(t, 10*time.Second, "the orphan to go", func() bool {
		gone = *mustFind(t, discover(t, a, snapshot(t)), id)
		return len(gone.Problems) == 0
	})
	if gone.Stamp != grown.Stamp || len(gone.Owners) != 0 {
		t.Fatalf("after the claude left: stamp %d (want %d), owners %+v", gone.Stamp, grown.Stamp, gone.Owners)
	}

	// A registry entry names it: unstamped.
	r.WriteRegistry(t, claudetest.NewEntry(999999, "1", claudetest.HostDomain(), id, cwd, "idle", time.Now().Add(-time.Minute)))
	named := *mustFind(t, discover(t, a, snapshot(t)), id)
	if named.Stamp != 0 || len(named.Owners) == 0 {
		t.Fatalf("named by a registry entry: stamp %d, owners %+v", named.Stamp, named.Owners)
	}
	// What the tracker is handed never aliases the cache.
	o := mustFind(t, discover(t, a, nil), id)
	o.InFlight = append(o.InFlight, adapters.Issue{Key: "scribble"})
	if o2 := mustFind(t, discover(t, a, nil), id); len(o2.InFlight) != len(o.InFlight)-1 {
		t.Fatalf("an append by the caller reached the cache: %+v", o2.InFlight)
	}
}
