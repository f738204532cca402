package opencode

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/internal/testkit/opencodetest"
)

func TestParseMessage(t *testing.T) {
	at := time.UnixMilli(1750000000123)
	open := opencodetest.Message{ID: "msg_1", SessionID: "ses_1", Cwd: "/w", Created: at}
	m, err := parseMessage([]byte(open.DataJSON()))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Assistant() || !m.Open() || !m.Created.Equal(at) || m.Cwd != "/w" || m.Agent != "build" {
		t.Fatalf("open assistant message parsed as %+v", m)
	}
	done := open
	done.Completed = at.Add(time.Second)
	done.Error = &opencodetest.MessageError{Name: "MessageAbortedError", Message: "aborted"}
	m, err = parseMessage([]byte(done.LegacyJSON()))
	if err != nil {
		t.Fatal(err)
	}
	if m.Open() || m.ID != "msg_1" || m.SessionID != "ses_1" || m.ErrorName != "MessageAbortedError" || m.ErrorMessage != "aborted" {
		t.Fatalf("completed message parsed as %+v", m)
	}
	user, err := parseMessage([]byte(opencodetest.Message{Role: "user"}.DataJSON()))
	if err != nil || user.Assistant() || user.Open() {
		t.Fatalf("user message: %+v %v", user, err)
	}
	for _, bad := range []string{``, `{}`, `[]`, `{"role":"assistant","time":{"created":"yesterday"}}`, `{"role":7}`} {
		if _, err := parseMessage([]byte(bad)); err == nil {
			t.Errorf("parseMessage(%q): no error", bad)
		}
	}
	// Odd but valid: null times, float milliseconds, huge values.
	m, err = parseMessage([]byte(`{"role":"assistant","time":{"created":1.75e12,"completed":null}}`))
	if err != nil || !m.Open() || m.Created.IsZero() {
		t.Fatalf("float/null times: %+v %v", m, err)
	}
	m, err = parseMessage([]byte(`{"role":"assistant","time":{"created":1e300,"completed":-5}}`))
	if err != nil || !m.Created.IsZero() || !m.Open() {
		t.Fatalf("out of range times: %+v %v", m, err)
	}
}

func TestParsePart(t *testing.T) {
	at := time.UnixMilli(1750000000000)
	running := opencodetest.Part{ID: "prt_1", MessageID: "msg_1", SessionID: "ses_1", Tool: "bash", CallID: "call_1", Status: "running", Start: at}
	p, err := parsePart([]byte(running.DataJSON()))
	if err != nil {
		t.Fatal(err)
	}
	if !p.InFlight() || p.Tool != "bash" || p.CallID != "call_1" || !p.Start.Equal(at) {
		t.Fatalf("running part parsed as %+v", p)
	}
	pending := running
	pending.Status = "pending"
	if p, err = parsePart([]byte(pending.LegacyJSON())); err != nil || !p.InFlight() || p.ID != "prt_1" {
		t.Fatalf("pending part: %+v %v", p, err)
	}
	aborted := running
	aborted.Status, aborted.Error, aborted.Metadata = "error", "Tool execution aborted", map[string]any{"interrupted": true}
	if p, err = parsePart([]byte(aborted.DataJSON())); err != nil || p.InFlight() || !p.Interrupted {
		t.Fatalf("aborted part: %+v %v", p, err)
	}
	task := opencodetest.Part{Tool: "task", Status: "running", Metadata: map[string]any{"sessionId": "ses_child"}}
	if p, err = parsePart([]byte(task.DataJSON())); err != nil || p.ChildSessionID != "ses_child" {
		t.Fatalf("task part: %+v %v", p, err)
	}
	text := opencodetest.Part{Type: "text", Text: `{"status":"running"}`}
	if p, err = parsePart([]byte(text.DataJSON())); err != nil || p.InFlight() {
		t.Fatalf("text part that mentions running: %+v %v", p, err)
	}
	for _, bad := range []string{``, `{}`, `{"type":"tool"}`, `{"type":"tool","state":{"status":3}}`, `{"type":"tool","state":{"status":"running","time":{"start":"x"}}}`} {
		if _, err := parsePart([]byte(bad)); err == nil {
			t.Errorf("parsePart(%q): no error", bad)
		}
	}
}

func FuzzParseMessage(f *testing.F) {
	at := time.UnixMilli(1750000000000)
	f.Add([]byte(opencodetest.Message{Created: at}.DataJSON()))
	f.Add([]byte(opencodetest.Message{Created: at, Completed: at, Error: &opencodetest.MessageError{Name: "APIError", Message: "x"}}.LegacyJSON()))
	f.Add([]byte(opencodetest.Message{Role: "user", Created: at}.DataJSON()))
	f.Add([]byte(`{"role":"assistant","time":{"created":1e308,"completed":null},"error":{"data":{"message":[1]}}}`))
	f.Add([]byte(`{"role":"assistant","path":null,"time":null}`))
	f.Add([]byte(`{"role":"narrator","time":{"created":"yesterday"}}`))
	f.Add([]byte(`{"role":5}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := parseMessage(b)
		// What it did not understand is noted, bounded, never a panic.
		var seen kit.Seen
		messageDrift(&seen, m, err)
		if n := len(seen.Items()); n > 1 {
			t.Fatalf("one message noted %d values: %+v", n, seen.Items())
		}
		if err != nil {
			return
		}
		if m.Role == "" {
			t.Fatal("parsed a message without a role")
		}
		if m.Open() && !m.Assistant() {
			t.Fatal("a non-assistant message is open")
		}
	})
}

func FuzzParsePart(f *testing.F) {
	at := time.UnixMilli(1750000000000)
	for _, st := range []string{"pending", "running", "completed", "error"} {
		f.Add([]byte(opencodetest.Part{Tool: "bash", Status: st, Start: at, End: at}.DataJSON()))
	}
	f.Add([]byte(opencodetest.Part{Tool: "task", Status: "running", Metadata: map[string]any{"sessionId": "ses_c", "interrupted": "yes"}}.LegacyJSON()))
	f.Add([]byte(opencodetest.Part{Type: "step-start"}.DataJSON()))
	f.Add([]byte(`{"type":"tool","state":{"status":"running","title":{},"metadata":null,"time":{"start":null}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := parsePart(b)
		if err != nil {
			return
		}
		if p.Type == "" {
			t.Fatal("parsed a part without a type")
		}
		if p.InFlight() && p.Type != "tool" {
			t.Fatal("a non-tool part is in flight")
		}
	})
}

// The whole-table scan's Go filter selects exactly the rows of the SQL
// one: the same superset of in-flight tool parts, on text and blob data,
// on nested statuses (a todowrite input's todos), escaped ones inside
// strings, other spacing, multibyte text and empty or null data.
func TestScanFilterSameAsSQL(t *testing.T) {
	if scanFilter == inFlightFilter {
		t.Fatal("the Go filter function is not registered")
	}
	db := opencodetest.MustCreate(t, t.TempDir()+"/opencode.db")
	at := time.Now().Add(-time.Hour)
	sh, err := db.InterruptedMidTool("/w", at)
	if err != nil {
		t.Fatal(err)
	}
	datas := []string{
		`{"type":"tool","tool":"bash","callID":"c","state":{"status":"running","input":{},"time":{"start":1}}}`,
		`{"type":"tool","tool":"bash","callID":"c","state":{"status":"pending","input":{},"raw":""}}`,
		`{"type":"tool","tool":"bash","state":{"status":"completed","input":{},"output":"\"status\":\"running\"","time":{"start":1,"end":2}}}`,
		`{"type":"tool","tool":"todowrite","state":{"status":"completed","input":{"todos":[{"content":"x","status":"pending"}]}}}`,
		`{"type":"tool","state":{"status": "running"}}`,
		`{"type":"text","text":"ünïcødé \"status\":\"pending\" 日本語"}`,
		`{"type":"tool","state":{"status":"runnin`,
		`{"type":"tool","state":{"status":"running`,
		`"status":"pending"`,
		`{"status":"pendingX"}`,
		``,
	}
	err = db.Tx(func(w *opencodetest.Writer) error {
		for i, d := range datas {
			for _, blob := range []bool{false, true} {
				var v any = d
				if blob {
					v = []byte(d)
				}
				if err := w.Exec(`INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, 1, 1, ?)`,
					fmt.Sprintf("prt_%02d_%v", i, blob), sh.AssistantMessageID, sh.SessionID, v); err != nil {
					return err
				}
			}
		}
		return w.Exec(`INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES ('prt_null', ?, ?, 1, 1, '')`, sh.AssistantMessageID, sh.SessionID)
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(filter string) []string {
		rows, err := db.SQL().Query("SELECT id FROM part WHERE " + filter + " ORDER BY id")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out = append(out, id)
		}
		return out
	}
	sqlIDs, goIDs := ids(inFlightFilter), ids(scanFilter)
	if !slices.Equal(sqlIDs, goIDs) {
		t.Errorf("SQL filter selects %v, Go filter %v", sqlIDs, goIDs)
	}
	if len(sqlIDs) != 9 { // the shape's running part, and 4 of the strings as text and as blob
		t.Errorf("selected %d rows: %v", len(sqlIDs), sqlIDs)
	}
}
