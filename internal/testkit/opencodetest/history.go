package opencodetest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HistorySpec describes a database of many sessions for benchmarks: each
// session has Turns turns of a user message (2 parts) and an assistant
// message (step-start, a bash tool call, text, step-finish), the shape of
// the adapter's benchmark database. The first InFlight sessions have their
// last turn in flight (the assistant message incomplete, the tool call
// running), as after a kill -9.
type HistorySpec struct {
	Sessions int
	Turns    int
	InFlight int
	// Start is the first session's creation time (default 30 days ago);
	// session s starts 10 minutes after session s-1.
	Start time.Time
}

// WriteHistory creates a database at path holding spec's sessions, written
// in one transaction, and returns the session ids in order.
func WriteHistory(path string, spec HistorySpec) ([]string, error) {
	db, err := Create(path)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	if spec.Start.IsZero() {
		spec.Start = time.Now().Add(-30 * 24 * time.Hour)
	}
	output := strings.Repeat("ok  github.com/example/pkg  0.123s\n", 12)
	ids := make([]string, 0, spec.Sessions)
	err = db.Tx(func(w *Writer) error {
		for s := 0; s < spec.Sessions; s++ {
			t0 := spec.Start.Add(time.Duration(s) * 10 * time.Minute)
			sid := NewID("ses")
			ids = append(ids, sid)
			dir := "/home/dev/project" + strconv.Itoa(s%50)
			if err := w.session(Session{ID: sid, Directory: dir, Title: "session " + strconv.Itoa(s), Created: t0, Updated: t0.Add(time.Duration(spec.Turns) * time.Minute)}); err != nil {
				return err
			}
			for k := 0; k < spec.Turns; k++ {
				at := t0.Add(time.Duration(k) * time.Minute)
				flying := k == spec.Turns-1 && s < spec.InFlight
				um := Message{ID: NewID("msg"), SessionID: sid, Role: "user", Created: at}
				am := Message{ID: NewID("msg"), SessionID: sid, ParentID: um.ID, Cwd: dir, Created: at.Add(time.Second)}
				if !flying {
					am.Completed = at.Add(30 * time.Second)
				}
				for _, m := range []Message{um, am} {
					if err := w.message(m); err != nil {
						return err
					}
				}
				status := "completed"
				if flying {
					status = "running"
				}
				ps := []Part{
					{MessageID: um.ID, SessionID: sid, Type: "text", Text: "please run the tests in ./pkg and fix what fails", Start: at},
					{MessageID: um.ID, SessionID: sid, Type: "text", Text: "<system-reminder>context</system-reminder>", Start: at},
					{MessageID: am.ID, SessionID: sid, Type: "step-start", Start: at.Add(time.Second)},
					{MessageID: am.ID, SessionID: sid, Tool: "bash", Status: status, Input: map[string]any{"command": "go test ./...", "description": "run tests"}, Output: output, Start: at.Add(2 * time.Second), End: at.Add(20 * time.Second)},
					{MessageID: am.ID, SessionID: sid, Type: "text", Text: "All tests pass now; I changed pkg/foo.go to handle the empty case.", Start: at.Add(21 * time.Second), End: at.Add(29 * time.Second)},
					{MessageID: am.ID, SessionID: sid, Type: "step-finish", Start: at.Add(30 * time.Second)},
				}
				for _, p := range ps {
					if err := w.part(p); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("write history to %s: %w", path, err)
	}
	// OpenCode checkpoints its WAL; a fresh reader finds the data in the
	// main file.
	if _, err := db.SQL().Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return ids, nil
}
