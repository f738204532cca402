package session

import "testing"

// Check answers each thing that keeps a cursor from resuming its session
// with its own message, and a good cursor with nil.
func TestResumeCursorCheck(t *testing.T) {
	rec := &Record{ID: "abc123", Agent: "claude"}
	good := ResumeCursor{SchemaVersion: ResumeCursorVersion, Agent: "claude", UpstreamID: "up-1", Cwd: "/home/u/proj", Root: "/home/u/.claude"}
	if err := good.Check(rec); err != nil {
		t.Fatalf("a good cursor: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*ResumeCursor)
		want string
	}{
		{"newer schema", func(c *ResumeCursor) { c.SchemaVersion = ResumeCursorVersion + 1 },
			"resume cursor of abc123 has schema_version 2; this sessiond reads version 1"},
		{"no agent", func(c *ResumeCursor) { c.Agent = "" },
			`resume cursor of abc123 is malformed: agent "", session agent "claude"`},
		{"another agent", func(c *ResumeCursor) { c.Agent = "opencode" },
			`resume cursor of abc123 is malformed: agent "opencode", session agent "claude"`},
		{"no upstream id", func(c *ResumeCursor) { c.UpstreamID = "" },
			"resume cursor of abc123 is malformed: no upstream_id"},
		{"relative cwd", func(c *ResumeCursor) { c.Cwd = "proj" },
			`resume cursor of abc123 is malformed: cwd "proj" is not absolute`},
		{"no root", func(c *ResumeCursor) { c.Root = "" },
			"resume cursor of abc123 is malformed: no root"},
	} {
		cur := good
		c.edit(&cur)
		if err := cur.Check(rec); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	var none *ResumeCursor
	const want = "session abc123 has no resume cursor yet: its upstream id has not been confirmed by the agent's own data"
	if err := none.Check(rec); err == nil || err.Error() != want {
		t.Errorf("no cursor: %v, want %q", err, want)
	}
}
