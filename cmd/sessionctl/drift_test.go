package main

import (
	"testing"

	"github.com/sessiond/sessiond/api"
)

func TestDriftLine(t *testing.T) {
	for _, c := range []struct {
		d    api.Drift
		want string
	}{
		{api.Drift{Version: "2.1.340", Kind: "line_type", Input: "transcript", Inputs: 14, Values: []api.DriftValue{{Value: "x", Inputs: 9}, {Value: "y", Inputs: 5}}},
			"claude 2.1.340: 2 unknown line types (x, y) in 14 transcripts — activity may be approximate"},
		{api.Drift{Version: "2.1.340", Kind: "status", Input: "registry entry", Inputs: 1, Values: []api.DriftValue{{Value: "pondering", Inputs: 1}}},
			"claude 2.1.340: 1 unknown status value (pondering) in 1 registry entry — activity may be approximate"},
		{api.Drift{Version: "2.1.340", Kind: "field_type", Input: "registry entry", Inputs: 3, Values: []api.DriftValue{{Value: "startedAt: string", Inputs: 3}, {Value: "pid: string", Inputs: 1}}, Others: 2},
			"claude 2.1.340: 2 fields of another type (startedAt: string, pid: string, and others in 2) in 3 registry entries — activity may be approximate"},
		{api.Drift{Kind: "hook_event", Input: "hooked session", Inputs: 2, Values: []api.DriftValue{{Value: "FutureEvent", Inputs: 2}}},
			"claude (version not written): 1 unknown hook event (FutureEvent) in 2 hooked sessions — those hooks say nothing of activity"},
	} {
		if got := driftLine("claude", c.d); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
