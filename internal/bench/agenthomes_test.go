package bench

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/copilot"
	"github.com/sessiond/sessiond/adapters/gemini"
	"github.com/sessiond/sessiond/adapters/pi"
	"github.com/sessiond/sessiond/adapters/qwen"
	"github.com/sessiond/sessiond/api"
)

// Each generated home reads through the agent's real adapter as its spec
// says: every session once, under its id, with its folder; the in-flight
// ones with their call left in flight, the rest with nothing in flight;
// no input an error or a warning. The floor's layout lists every file of
// the home.
func TestAgentHomesReadBack(t *testing.T) {
	for _, agent := range newAgents {
		t.Run(agent, func(t *testing.T) {
			// More sessions than the adapter kit's ParallelMin (64): the
			// first pass reads them on several cores (under -race in CI).
			h, err := writeAgentHome(agent, t.TempDir(), agentSpec{Sessions: 80, Projects: 4, MaxTurns: 5, InFlightEvery: 20, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			if h.InFlight != 4 || len(h.IDs) != 80 {
				t.Fatalf("%d sessions, %d in flight; want 80, 4", len(h.IDs), h.InFlight)
			}
			var a adapters.Adapter
			switch agent {
			case "gemini":
				a = gemini.New(gemini.Config{Roots: []string{h.Root}})
			case "qwen":
				a = qwen.New(qwen.Config{Roots: []string{h.Root}})
			case "pi":
				a = pi.New(pi.Config{Roots: []string{h.Root}})
			case "copilot":
				a = copilot.New(copilot.Config{Roots: []string{h.Root}})
			}
			obs, err := a.Discover(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(obs.Errors) > 0 || len(obs.Warnings) > 0 {
				t.Errorf("errors %v, warnings %v", obs.Errors, obs.Warnings)
			}
			var ids []string
			inFlight := 0
			for _, o := range obs.All() {
				ids = append(ids, o.UpstreamID)
				if !strings.HasPrefix(o.Cwd, "/home/u/src/proj-") {
					t.Errorf("session %s: cwd %q", o.UpstreamID, o.Cwd)
				}
				if len(o.InFlight) > 0 {
					inFlight++
				}
			}
			want := slices.Clone(h.IDs)
			slices.Sort(want)
			slices.Sort(ids)
			if !slices.Equal(ids, want) {
				t.Errorf("read %d sessions, wrote %d: %v", len(ids), len(want), ids)
			}
			if inFlight != h.InFlight {
				t.Errorf("%d sessions with work in flight, want %d", inFlight, h.InFlight)
			}
			files := 0
			if err := listLayout(h.Root, h.floor.Levels, func(string) { files++ }); err != nil {
				t.Fatal(err)
			}
			if files != h.Files {
				t.Errorf("the floor lists %d files, the home has %d", files, h.Files)
			}
		})
	}
}

// The count check fails on a session missing, one listed twice, and one
// of an agent not given.
func TestCheckListed(t *testing.T) {
	ss := []api.Session{{Agent: "pi", UpstreamID: "a"}, {Agent: "pi", UpstreamID: "b"}, {Agent: "qwen", UpstreamID: "c"}}
	if err := checkListed(ss, map[string][]string{"pi": {"a", "b"}, "qwen": {"c"}}); err != nil {
		t.Errorf("the list is the data: %v", err)
	}
	for name, want := range map[string]map[string][]string{
		"missing":   {"pi": {"a", "b", "x"}, "qwen": {"c"}},
		"unwanted":  {"pi": {"a", "b"}},
		"other ids": {"pi": {"a", "x"}, "qwen": {"c"}},
	} {
		if err := checkListed(ss, want); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if err := checkListed(append(ss, ss[0]), map[string][]string{"pi": {"a", "b"}, "qwen": {"c"}}); err == nil {
		t.Errorf("a session listed twice: no error")
	}
}
