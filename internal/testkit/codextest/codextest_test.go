package codextest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters/codex"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// A generated home reads as its spec says through the real adapter: every
// rollout a session with its cwd and prompt, the in-flight ones busy with
// their call left without output, the rest idle.
func TestWriteHomeReadsBack(t *testing.T) {
	root := t.TempDir()
	h, err := codextest.WriteHome(root, codextest.HomeSpec{Rollouts: 60, Days: 7, MaxTurns: 20, InFlightEvery: 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.IDs) != 60 || len(h.InFlight) != 3 || h.Bytes < 60*30<<10 {
		t.Fatalf("home: %d ids, %d in flight, %d bytes", len(h.IDs), len(h.InFlight), h.Bytes)
	}
	a := codex.New(codex.Config{Roots: []string{root}, NoLearnedRoots: true})
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	obs, err := a.Discover(context.Background(), snap)
	if err != nil || len(obs.Errors) != 0 || len(obs.Warnings) != 0 {
		t.Fatalf("discover: %v, errors %v, warnings %v", err, obs.Errors, obs.Warnings)
	}
	inFlight := map[string]bool{}
	for _, id := range h.InFlight {
		inFlight[id] = true
	}
	seen := 0
	for _, o := range obs.All() {
		seen++
		if !strings.HasPrefix(o.Cwd, "/home/user/src/project-") || !strings.HasPrefix(o.Title, "fix issue ") {
			t.Errorf("%s: cwd %q title %q", o.UpstreamID, o.Cwd, o.Title)
		}
		busy := o.Activity == session.ActivityBusy && len(o.InFlight) == 1 && o.InFlight[0].Kind == session.ProblemOrphanedToolCall
		if inFlight[o.UpstreamID] != busy || (!busy && o.Activity != session.ActivityIdle) {
			t.Errorf("%s (in flight %v): activity %s, in flight %+v", o.UpstreamID, inFlight[o.UpstreamID], o.Activity, o.InFlight)
		}
	}
	if seen != 60 {
		t.Errorf("%d sessions, want 60", seen)
	}
}
