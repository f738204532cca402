package opencode

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
	"github.com/sessiond/sessiond/session"
)

// TestDriftOfMessages: a message of a role sessiond does not know, and
// one whose time is text, are counted per OpenCode version, once per
// session however often it is read, carried as format_drift by their
// sessions, and kept across a restart (the checkpoint).
func TestDriftOfMessages(t *testing.T) {
	dir := t.TempDir()
	db := opencodetest.MustCreate(t, filepath.Join(dir, "opencode.db"))
	at := time.Now().Add(-time.Hour)
	odd, _ := db.Finished("/w", at)
	textTime, _ := db.Finished("/w2", at)
	plain, _ := db.Finished("/w3", at)
	if err := db.Message(opencodetest.Message{SessionID: odd.SessionID, Role: "narrator", Created: at.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := db.Tx(func(w *opencodetest.Writer) error {
		return w.Exec(`UPDATE message SET data = json_set(data, '$.time.created', 'yesterday') WHERE session_id = ?`, textTime.SessionID)
	}); err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t, dir, nil)
	want := []adapters.Drift{
		{Version: opencodetest.Version, Kind: adapters.DriftFieldType, Input: "session", Inputs: 1, Values: []adapters.DriftValue{{Value: "message.time: string", Inputs: 1}}},
		{Version: opencodetest.Version, Kind: adapters.DriftLineType, Input: "session", Inputs: 1, Values: []adapters.DriftValue{{Value: "message role narrator", Inputs: 1}}},
	}
	check := func(what string, a *Adapter) {
		t.Helper()
		obs := discover(t, a)
		if !reflect.DeepEqual(obs.Drift, want) {
			t.Fatalf("%s: drift %+v, want %+v", what, obs.Drift, want)
		}
		for id, detail := range map[string]string{odd.SessionID: "message role narrator", textTime.SessionID: "message.time: string"} {
			o := find(t, obs, id)
			p := problemOf(o, session.ProblemFormatDrift)
			if p == nil || !strings.Contains(p.Detail, "opencode "+opencodetest.Version) || !strings.Contains(p.Detail, detail) {
				t.Errorf("%s: session %s problems %+v", what, id, o.Problems)
			}
		}
		if p := problemOf(find(t, obs, plain.SessionID), session.ProblemFormatDrift); p != nil {
			t.Errorf("%s: a session understood whole has %+v", what, p)
		}
	}
	check("first pass", a)
	// A new message in the odd session: read again, counted once.
	if err := db.Message(opencodetest.Message{SessionID: odd.SessionID, Role: "narrator", Created: at.Add(2 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	check("read again", a)
	cp := a.Checkpoint()
	cp.Commit()
	b := newTestAdapter(t, dir, nil)
	b.Restore(cp.Put)
	check("restored", b)
}

func problemOf(o adapters.Observed, kind session.ProblemKind) *adapters.Issue {
	for i := range o.Problems {
		if o.Problems[i].Kind == kind {
			return &o.Problems[i]
		}
	}
	return nil
}
