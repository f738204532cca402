package copilot

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/copilottest"
	"github.com/sessiond/sessiond/session"
)

// TestDriftOfEventLogs: an event type 1.0.102's schema does not name, a
// shutdownType it does not, and a field of another JSON type are counted
// once per session however often its events.jsonl is read, under the
// copilotVersion of its session.start; the session carries format_drift;
// a restart keeps the counts without reading the file again; the folder
// gone takes them away. The turn state stays what the known lines say.
func TestDriftOfEventLogs(t *testing.T) {
	root := t.TempDir()
	s := newSession(t, root, 1)
	must(t, s.Headless("Run the long job", "sleep 300", true))
	must(t, s.Raw([]byte(`{"type":"session.thought_stream","data":{},"id":"d1","timestamp":"2026-11-28T00:48:00.000Z","parentId":null}`)))
	plain := newSession(t, root, 2)
	must(t, plain.Headless("Say hi", "echo hi", false))
	settle := func() {
		old := time.Now().Add(-time.Minute)
		for _, x := range []*copilottest.Session{s, plain} {
			for _, p := range []string{x.EventsPath(), x.Dir} {
				must(t, os.Chtimes(p, old, old))
			}
		}
	}
	settle()
	const version = "1.0.102"
	want := []adapters.Drift{{Version: version, Kind: adapters.DriftLineType, Input: "event log", Inputs: 1,
		Values: []adapters.DriftValue{{Value: "session.thought_stream", Inputs: 1}}}}
	check := func(what string, a *Adapter, want []adapters.Drift, activity session.Activity, values ...string) {
		t.Helper()
		obs, err := a.Discover(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(obs.Drift, want) {
			t.Errorf("%s: drift %+v, want %+v", what, obs.Drift, want)
		}
		for _, o := range obs.All() {
			var p *adapters.Issue
			for i := range o.Problems {
				if o.Problems[i].Kind == session.ProblemFormatDrift {
					p = &o.Problems[i]
				}
			}
			switch {
			case (o.UpstreamID != s.ID || len(want) == 0) && p != nil:
				t.Errorf("%s: %s has %+v", what, o.UpstreamID, p)
			case o.UpstreamID == s.ID && len(want) > 0 && p == nil:
				t.Errorf("%s: no format_drift in %+v", what, o.Problems)
			case o.UpstreamID == s.ID && p != nil:
				for _, v := range append(values, "copilot "+version) {
					if !strings.Contains(p.Detail, v) {
						t.Errorf("%s: %q lacks %q", what, p.Detail, v)
					}
				}
			}
			if o.UpstreamID == s.ID && o.Activity != activity {
				t.Errorf("%s: activity %s, want %s", what, o.Activity, activity)
			}
		}
	}
	a := New(Config{Roots: []string{root}})
	// The killed headless run: its bash call never completed.
	check("read", a, want, session.ActivityBusy, "session.thought_stream")
	must(t, s.Raw([]byte(`{"type":"session.thought_stream","data":{},"id":"d2","timestamp":"2026-11-28T00:48:01.000Z","parentId":null}`)))
	must(t, s.Raw([]byte(`{"type":"abort","data":{"reason":7},"id":"d3","timestamp":"2026-11-28T00:48:02.000Z","parentId":null}`)))
	must(t, s.Shutdown("suspended"))
	want = []adapters.Drift{
		{Version: version, Kind: adapters.DriftFieldType, Input: "event log", Inputs: 1, Values: []adapters.DriftValue{{Value: "data.reason: number", Inputs: 1}}},
		{Version: version, Kind: adapters.DriftLineType, Input: "event log", Inputs: 1, Values: []adapters.DriftValue{{Value: "session.thought_stream", Inputs: 1}}},
		{Version: version, Kind: adapters.DriftStatus, Input: "event log", Inputs: 1, Values: []adapters.DriftValue{{Value: "suspended", Inputs: 1}}},
	}
	check("appended", a, want, session.ActivityIdle, "session.thought_stream", "suspended", "data.reason: number")
	settle()
	check("settled", a, want, session.ActivityIdle)
	put, _ := checkpoint(a)
	b := New(Config{Roots: []string{root}})
	b.Restore(put)
	check("restored", b, want, session.ActivityIdle, "suspended")
	if put, _ := checkpoint(b); len(put) != 0 {
		t.Errorf("a restart read %d sessions again", len(put))
	}
	must(t, os.RemoveAll(s.Dir))
	must(t, os.Chtimes(filepath.Dir(s.Dir), time.Now(), time.Now()))
	b.RequestRescan()
	check("removed", b, nil, session.ActivityIdle)
}
