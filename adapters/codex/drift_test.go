package codex

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// TestDriftOfRolloutItems: an item type 0.169.0 does not write, in a
// rollout's running turn, is counted under the rollout's cli_version once
// however often the rollout is read, carried as format_drift by its
// session, kept across a restart, and gone once a new turn starts.
func TestDriftOfRolloutItems(t *testing.T) {
	discover := func(t *testing.T, a *Adapter) adapters.Observation {
		t.Helper()
		obs, err := a.Discover(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	root := home(t, "killed.jsonl", "done.jsonl")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	discover(t, a)
	var path string
	for _, f := range a.roots[root].files {
		if f.id == fixtures[1].id {
			path = f.path
		}
	}
	appendLine := func(l string) {
		t.Helper()
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(l + "\n")
		fh.Close()
	}
	const odd = `{"timestamp":"2026-11-25T00:16:00.000Z","type":"id_block","payload":{"next":7}}`
	appendLine(odd)
	obs := discover(t, a)
	version := a.roots[root].files[path].meta.CLIVersion
	want := []adapters.Drift{{Version: version, Kind: adapters.DriftLineType, Input: "rollout", Inputs: 1,
		Values: []adapters.DriftValue{{Value: "id_block", Inputs: 1}}}}
	if version == "" || !reflect.DeepEqual(obs.Drift, want) {
		t.Fatalf("drift %+v, want %+v", obs.Drift, want)
	}
	check := func(what string, obs adapters.Observation) {
		t.Helper()
		for _, o := range obs.All() {
			var p *adapters.Issue
			for i := range o.Problems {
				if o.Problems[i].Kind == session.ProblemFormatDrift {
					p = &o.Problems[i]
				}
			}
			switch {
			case o.UpstreamID == fixtures[1].id && (p == nil || !strings.Contains(p.Detail, "codex "+version) || !strings.Contains(p.Detail, "id_block")):
				t.Errorf("%s: %s problems %+v", what, o.UpstreamID, o.Problems)
			case o.UpstreamID != fixtures[1].id && p != nil:
				t.Errorf("%s: %s has %+v", what, o.UpstreamID, p)
			}
		}
	}
	check("read", obs)
	appendLine(odd)
	if obs = discover(t, a); !reflect.DeepEqual(obs.Drift, want) {
		t.Fatalf("appended again: %+v", obs.Drift)
	}
	put, _ := checkpoint(a)
	b := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	b.Restore(put)
	obs = discover(t, b)
	if !reflect.DeepEqual(obs.Drift, want) {
		t.Fatalf("restored: %+v", obs.Drift)
	}
	check("restored", obs)
	if put, _ := checkpoint(b); len(put) != 0 {
		t.Errorf("a restart read %d rollouts again", len(put))
	}
	appendLine(`{"timestamp":"2026-11-25T00:17:00.000Z","type":"event_msg","payload":{"type":"task_started","turn_id":"t9"}}`)
	if obs = discover(t, b); len(obs.Drift) != 0 {
		t.Fatalf("after a new turn: %+v", obs.Drift)
	}
}

// TestNewerItemsAreNoDrift: the item types 0.171.0 adds (id_allocation,
// token_usage_record), whatever their payload, in a rollout's running
// turn, are known: no drift, no format_drift.
func TestNewerItemsAreNoDrift(t *testing.T) {
	root := home(t, "killed.jsonl")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	if _, err := a.Discover(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	var path string
	for _, f := range a.roots[root].files {
		path = f.path
	}
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fh.WriteString(strings.Join(unknownItems, "\n") + "\n")
	fh.Close()
	obs, err := a.Discover(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(obs.Drift) != 0 {
		t.Errorf("drift %+v", obs.Drift)
	}
	for _, o := range obs.All() {
		for _, p := range o.Problems {
			if p.Kind == session.ProblemFormatDrift {
				t.Errorf("%s: %+v", o.UpstreamID, p)
			}
		}
	}
}
