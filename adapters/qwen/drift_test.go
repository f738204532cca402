package qwen

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// TestDriftOfChats: a record type and a tool result status 0.24.4 does
// not write, and a field of another JSON type, are counted once per chat
// however often it is read, under the version its records name; the
// chat's session carries format_drift; a restart keeps the counts without
// reading the chat again; a chat gone takes its share along. The turn
// state stays what the known records say.
func TestDriftOfChats(t *testing.T) {
	root := home(t, "headless-done.jsonl", "headless-killed-mid-tool.jsonl")
	path := chatPath(root, idKilled)
	appendLines := func(lines ...string) {
		t.Helper()
		fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fh.WriteString(strings.Join(lines, "\n") + "\n")
		fh.Close()
	}
	a := New(Config{Roots: []string{root}})
	if _, obs := discoverSnap(t, a, nil); len(obs.Drift) != 0 {
		t.Fatalf("the fixtures show drift: %+v", obs.Drift)
	}
	appendLines(`{"uuid":"d1","parentUuid":null,"sessionId":"`+idKilled+`","timestamp":"2026-11-27T10:00:00.000Z","type":"checkpoint","cwd":"/tmp/proj","version":"0.24.4"}`,
		`{"uuid":"d2","parentUuid":"d1","sessionId":"`+idKilled+`","timestamp":"2026-11-27T10:00:01.000Z","type":"tool_result","cwd":"/tmp/proj","version":"0.24.4","toolCallResult":{"callId":"nobody","status":"deferred"}}`)
	want := []adapters.Drift{
		{Version: "0.24.4", Kind: adapters.DriftLineType, Input: "chat", Inputs: 1, Values: []adapters.DriftValue{{Value: "checkpoint", Inputs: 1}}},
		{Version: "0.24.4", Kind: adapters.DriftStatus, Input: "chat", Inputs: 1, Values: []adapters.DriftValue{{Value: "deferred", Inputs: 1}}},
	}
	check := func(what string, a *Adapter, want []adapters.Drift, values ...string) {
		t.Helper()
		got, obs := discoverSnap(t, a, nil)
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
			case id != idKilled && p != nil:
				t.Errorf("%s: %s has %+v", what, id, p)
			case id == idKilled && len(want) > 0 && p == nil:
				t.Errorf("%s: no format_drift in %+v", what, o.Problems)
			case id == idKilled && p != nil:
				for _, v := range append(values, "qwen 0.24.4") {
					if !strings.Contains(p.Detail, v) {
						t.Errorf("%s: %q lacks %q", what, p.Detail, v)
					}
				}
			}
			// The killed chat's call still has no result: busy.
			if id == idKilled && o.Activity != session.ActivityBusy {
				t.Errorf("%s: activity %s", what, o.Activity)
			}
		}
	}
	check("appended", a, want, "checkpoint", "deferred")
	appendLines(`{"uuid":"d3","parentUuid":"d2","sessionId":"`+idKilled+`","timestamp":"2026-11-27T10:00:02.000Z","type":"checkpoint","cwd":"/tmp/proj","version":"0.24.4"}`,
		`{"uuid":"d4","parentUuid":"d3","sessionId":"`+idKilled+`","timestamp":1795000000,"type":"system","subtype":"ui_telemetry","cwd":"/tmp/proj","version":"0.24.4"}`)
	want = append([]adapters.Drift{{Version: "0.24.4", Kind: adapters.DriftFieldType, Input: "chat", Inputs: 1,
		Values: []adapters.DriftValue{{Value: "timestamp: number", Inputs: 1}}}}, want...)
	check("appended again", a, want, "checkpoint", "deferred", "timestamp: number")

	put, _ := checkpoint(a)
	b := New(Config{Roots: []string{root}})
	b.Restore(put)
	reads := b.reads
	check("restored", b, want, "checkpoint", "deferred")
	if b.reads != reads {
		t.Errorf("a restart read %d chats again", b.reads-reads)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	b.RequestRescan()
	check("removed", b, nil)
}

// TestDriftOfHooks: a hook event 0.24.4 does not send is counted once per
// session, says nothing of the activity, and is named in the report.
func TestDriftOfHooks(t *testing.T) {
	root := home(t)
	a := New(Config{Roots: []string{root}})
	for i := 0; i < 2; i++ {
		h, err := a.ReadHook([]byte(`{"session_id":"` + idDone + `","hook_event_name":"FutureEvent","cwd":"/tmp/proj"}`))
		if err != nil || h.Activity != "" || h.WaitingFor != nil {
			t.Fatalf("%+v %v", h, err)
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(string(fixture(t, "hooks.jsonl"))), "\n") {
		if _, err := a.ReadHook([]byte(l)); err != nil {
			t.Fatal(err)
		}
	}
	_, obs := discoverSnap(t, a, nil)
	want := []adapters.Drift{{Kind: adapters.DriftHookEvent, Input: "hooked session", Inputs: 1, Values: []adapters.DriftValue{{Value: "FutureEvent", Inputs: 1}}}}
	if !reflect.DeepEqual(obs.Drift, want) {
		t.Errorf("drift %+v, want %+v", obs.Drift, want)
	}
}
