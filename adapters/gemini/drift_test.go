package gemini

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// TestDriftOfChats: a message type and a tool call status 0.61.0 does not
// write, an operation it does not know and a field of another JSON type
// are counted once per chat however often it is read (under no version:
// Gemini CLI writes none in a chat), carried as format_drift by the
// chat's session, kept across a restart without reading the chat again,
// and forgotten with the chat; the turn state stays what the known lines
// say.
func TestDriftOfChats(t *testing.T) {
	tr := newTree(t)
	chats := tr.project("p", "/p")
	const id = "dddddddd-0000-0000-0000-000000000001"
	l := newLines().header(id, hashOf("/p")).user("u1", "plan it")
	l.line(map[string]any{"id": "t1", "timestamp": l.ts(), "type": "thought", "content": "hmm"})
	l.gemini("g1", "", l.call("c1", "deferred", "make"))
	path := filepath.Join(chats, "session-2026-11-27T10-00-dddddddd.jsonl")
	tr.write(path, l.b.Bytes())
	plain := newLines().header("eeeeeeee-0000-0000-0000-000000000002", hashOf("/p")).user("u1", "q").gemini("g1", "a")
	tr.write(filepath.Join(chats, "session-2026-11-27T10-01-eeeeeeee.jsonl"), plain.b.Bytes())

	discover := func(a *Adapter) adapters.Observation {
		t.Helper()
		obs, err := a.Discover(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return obs
	}
	want := []adapters.Drift{
		{Kind: adapters.DriftLineType, Input: "chat", Inputs: 1, Values: []adapters.DriftValue{{Value: "thought", Inputs: 1}}},
		{Kind: adapters.DriftStatus, Input: "chat", Inputs: 1, Values: []adapters.DriftValue{{Value: "deferred", Inputs: 1}}},
	}
	check := func(what string, obs adapters.Observation, want []adapters.Drift, values ...string) {
		t.Helper()
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
			case o.UpstreamID != id && p != nil:
				t.Errorf("%s: %s has %+v", what, o.UpstreamID, p)
			case o.UpstreamID == id && p == nil:
				t.Errorf("%s: no format_drift in %+v", what, o.Problems)
			case o.UpstreamID == id:
				for _, v := range append(values, "gemini (version not written)") {
					if !strings.Contains(p.Detail, v) {
						t.Errorf("%s: %q lacks %q", what, p.Detail, v)
					}
				}
				// The call of an unknown status is still a call not done.
				if o.Activity != session.ActivityBusy {
					t.Errorf("%s: activity %s", what, o.Activity)
				}
			}
		}
	}
	a := New(Config{Roots: []string{tr.root}})
	check("read", discover(a), want, "thought", "deferred")
	// Appended to: the same values count once; new ones add.
	more := newLines()
	more.now = l.now
	more.line(map[string]any{"id": "t2", "timestamp": more.ts(), "type": "thought", "content": "more"})
	more.line(map[string]any{"$truncate": 2})
	more.line(map[string]any{"id": "g2", "timestamp": 12, "type": "gemini", "content": "", "toolCalls": []any{more.call("c2", "deferred", "make")}})
	tr.appendTo(path, more.b.Bytes())
	want = []adapters.Drift{
		{Kind: adapters.DriftFieldType, Input: "chat", Inputs: 1, Values: []adapters.DriftValue{{Value: "timestamp: number", Inputs: 1}}},
		{Kind: adapters.DriftLineType, Input: "chat", Inputs: 1, Values: []adapters.DriftValue{{Value: "$truncate", Inputs: 1}, {Value: "thought", Inputs: 1}}},
		{Kind: adapters.DriftStatus, Input: "chat", Inputs: 1, Values: []adapters.DriftValue{{Value: "deferred", Inputs: 1}}},
	}
	obs := discover(a)
	check("appended", obs, want, "thought", "deferred", "$truncate", "timestamp: number")
	if len(obs.Warnings) != 0 {
		t.Errorf("drift is no damage: warnings %v", obs.Warnings)
	}

	cp := a.Checkpoint()
	b := New(Config{Roots: []string{tr.root}})
	b.Restore(cp.Put)
	gen := b.gen
	check("restored", discover(b), want, "thought", "deferred")
	if b.gen != gen {
		t.Errorf("a restart read %d chats again", b.gen-gen)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	b.RequestRescan()
	check("removed", discover(b), nil)
}
