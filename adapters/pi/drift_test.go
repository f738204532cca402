package pi

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// TestDriftOfSessionFiles: an entry type, a message role and a stopReason
// 0.73.1 does not write, and a field of another JSON type, in the last
// turn's lines, are counted once per file however often it is read, under
// the session format its header names; the file's session carries
// format_drift; a restart keeps the counts without reading the file
// again; a new turn, or the file gone, takes them away. The turn state
// stays what the known lines say.
func TestDriftOfSessionFiles(t *testing.T) {
	root := t.TempDir()
	path := writeSession(t, root, "/p", id1, user(1, "go"), entry(2, "checkpoint", nil),
		msg(3, map[string]any{"role": "thinking", "content": "hm"}), callBash(4, "c1", "make"))
	other := writeSession(t, root, "/p", id2, user(1, "a"), say(2, "b", "stop"))
	// Settle the files' mtimes, so a stat is trusted.
	settle := func() {
		old := time.Now().Add(-time.Minute)
		os.Chtimes(path, old, old)
		os.Chtimes(other, old, old)
	}
	settle()
	const version = "session format 3"
	want := []adapters.Drift{{Version: version, Kind: adapters.DriftLineType, Input: "session file", Inputs: 1,
		Values: []adapters.DriftValue{{Value: "checkpoint", Inputs: 1}, {Value: "message:thinking", Inputs: 1}}}}
	check := func(what string, a *Adapter, want []adapters.Drift, activity session.Activity, values ...string) {
		t.Helper()
		got, obs := discover(t, a, nil)
		if !reflect.DeepEqual(obs.Drift, want) {
			t.Errorf("%s: drift %+v, want %+v", what, obs.Drift, want)
		}
		for id, o := range got {
			var p *adapters.Issue
			for i := range o.Problems {
				if o.Problems[i].Kind == session.ProblemFormatDrift {
					p = &o.Problems[i]
				}
			}
			switch {
			case (id != id1 || len(want) == 0) && p != nil:
				t.Errorf("%s: %s has %+v", what, id, p)
			case id == id1 && len(want) > 0 && p == nil:
				t.Errorf("%s: no format_drift in %+v", what, o.Problems)
			case id == id1 && p != nil:
				for _, v := range append(values, "pi "+version) {
					if !strings.Contains(p.Detail, v) {
						t.Errorf("%s: %q lacks %q", what, p.Detail, v)
					}
				}
			}
			if id == id1 && o.Activity != activity {
				t.Errorf("%s: activity %s, want %s", what, o.Activity, activity)
			}
		}
	}
	a := newAdapter(root)
	check("read", a, want, session.ActivityBusy, "checkpoint", "message:thinking")
	appendTo(t, path, entry(5, "checkpoint", nil), jsonLine(map[string]any{"type": "label", "id": "x1", "timestamp": 17}))
	want = append([]adapters.Drift{{Version: version, Kind: adapters.DriftFieldType, Input: "session file", Inputs: 1,
		Values: []adapters.DriftValue{{Value: "timestamp: number", Inputs: 1}}}}, want...)
	check("appended", a, want, session.ActivityBusy, "checkpoint", "timestamp: number")

	settle()
	check("settled", a, want, session.ActivityBusy, "checkpoint")
	cp := a.Checkpoint()
	cp.Commit()
	b := newAdapter(root)
	b.Restore(cp.Put)
	check("restored", b, want, session.ActivityBusy, "checkpoint")
	if cp := b.Checkpoint(); len(cp.Put) != 0 {
		t.Errorf("a restart read %d files again", len(cp.Put))
	}
	// The reply ends the turn with a stopReason 0.73.1 does not write:
	// only that is left of the turn's drift.
	appendTo(t, path, say(6, "later", "paused"))
	want = []adapters.Drift{{Version: version, Kind: adapters.DriftStatus, Input: "session file", Inputs: 1,
		Values: []adapters.DriftValue{{Value: "paused", Inputs: 1}}}}
	check("a new turn", b, want, session.ActivityIdle, "paused")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	b.RequestRescan()
	check("removed", b, nil, session.ActivityIdle)
}
