package claude

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/session"
)

// TestDriftCountedOnceKeptAcrossRestartAndGone: transcripts showing a line
// type no known version writes are counted once each per version, however
// often they are read (appends), kept by a restart that reads nothing
// (the checkpoint), and taken out when a transcript goes; the sessions
// carry format_drift.
func TestDriftCountedOnceKeptAcrossRestartAndGone(t *testing.T) {
	r, cwd := newRoot(t)
	var paths []string
	var ids []string
	for i := range 3 {
		id := claudetest.NewSessionID()
		tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
		tr.Version = fmt.Sprintf("2.1.34%d", i%2)
		tr.User("hello")
		tr.Add([]byte(fmt.Sprintf(`{"type":"thought-stream","sessionId":%q}`, id)))
		paths = append(paths, r.WriteTranscript(t, tr))
		ids = append(ids, id)
	}
	a := newTestAdapter(t, &testFS{}, r.Dir)
	want := []adapters.Drift{
		{Version: "2.1.340", Kind: adapters.DriftLineType, Input: "transcript", Inputs: 2, Values: []adapters.DriftValue{{Value: "thought-stream", Inputs: 2}}},
		{Version: "2.1.341", Kind: adapters.DriftLineType, Input: "transcript", Inputs: 1, Values: []adapters.DriftValue{{Value: "thought-stream", Inputs: 1}}},
	}
	obs := discover(t, a, nil)
	if !reflect.DeepEqual(obs.Drift, want) {
		t.Fatalf("first pass: %+v", obs.Drift)
	}
	for _, id := range ids {
		if is := issue(mustFind(t, obs, id).Problems, session.ProblemFormatDrift, ""); is == nil {
			t.Fatalf("%s: no format_drift in %+v", id, mustFind(t, obs, id).Problems)
		}
	}
	claudetest.Append(t, paths[0], []byte(`{"type":"thought-stream"}`))
	if obs = discover(t, a, nil); !reflect.DeepEqual(obs.Drift, want) {
		t.Fatalf("after an append: %+v", obs.Drift)
	}
	store := map[string][]byte{}
	save(store, a.Checkpoint())
	fsys := &testFS{}
	b := newTestAdapter(t, fsys, r.Dir)
	b.Restore(store)
	if obs = discover(t, b, nil); !reflect.DeepEqual(obs.Drift, want) || fsys.read.Load() != 0 {
		t.Fatalf("restored (read %d bytes): %+v", fsys.read.Load(), obs.Drift)
	}
	if err := os.Remove(paths[2]); err != nil {
		t.Fatal(err)
	}
	b.RequestRescan()
	want[0].Inputs, want[0].Values[0].Inputs = 1, 1 // the gone one was 2.1.340's
	if obs = discover(t, b, nil); !reflect.DeepEqual(obs.Drift, want) {
		t.Fatalf("after one went: %+v", obs.Drift)
	}
}

// TestRegistryAndHookDrift: a registry status, a waitingFor value and a
// field type no known version writes, and a hook event outside the known
// ones, are counted; known ones are not.
func TestRegistryAndHookDrift(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	en := claudetest.NewEntry(4000001, "1", "", id, cwd, "pondering", time.Now())
	en.WaitingFor = "a new dialog"
	en.Version = "2.1.340"
	path := r.WriteRegistry(t, en)
	b, _ := os.ReadFile(path)
	b = []byte(strings.Replace(string(b), `"startedAt":`, `"startedAt":"`, 1))
	b = []byte(strings.Replace(string(b), `,"procStart"`, `","procStart"`, 1))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t, &testFS{}, r.Dir)
	for _, ev := range []string{"PreToolUse", "PreSkillShellCommandV9", "Stop", "PreSkillShellCommandV9"} {
		if _, err := a.ReadHook([]byte(fmt.Sprintf(`{"session_id":%q,"hook_event_name":%q}`, id, ev))); err != nil {
			t.Fatal(err)
		}
	}
	obs := discover(t, a, nil)
	got := map[string]string{}
	for _, d := range obs.Drift {
		var vals []string
		for _, v := range d.Values {
			vals = append(vals, fmt.Sprintf("%s×%d", v.Value, v.Inputs))
		}
		got[string(d.Kind)+" "+d.Input] = d.Version + " " + strings.Join(vals, ",")
	}
	want := map[string]string{
		"status registry entry":      "2.1.340 pondering×1",
		"waiting_for registry entry": "2.1.340 a new dialog×1",
		"field_type registry entry":  "2.1.340 startedAt: string×1",
		"hook_event hooked session":  " PreSkillShellCommandV9×1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("drift %v\nwant  %v\n(raw %s)", got, want, b)
	}
	o := mustFind(t, obs, id)
	if is := issue(o.Problems, session.ProblemFormatDrift, "2.1.340"); is == nil || !strings.Contains(is.Detail, "pondering") {
		t.Fatalf("problems %+v", o.Problems)
	}
}
