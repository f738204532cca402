package opencodetest

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Legacy writes the JSON storage of OpenCode up to 1.1.x under
// <dataDir>/storage: session/<projectID>/<sessionID>.json,
// message/<sessionID>/<messageID>.json and part/<messageID>/<partID>.json.
type Legacy struct {
	// Root is the storage directory.
	Root string
}

// NewLegacy returns a writer for dataDir/storage.
func NewLegacy(dataDir string) *Legacy {
	return &Legacy{Root: filepath.Join(dataDir, "storage")}
}

func (l *Legacy) write(rel string, body string, mtime time.Time) error {
	path := filepath.Join(l.Root, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("legacy fixture: %w", err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return fmt.Errorf("legacy fixture: %w", err)
	}
	if !mtime.IsZero() {
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			return fmt.Errorf("legacy fixture: %w", err)
		}
	}
	return nil
}

// sessionJSON is a session as a 1.1.x storage/session file.
func (s Session) sessionJSON() string {
	s.defaults()
	t := map[string]any{"created": ms(s.Created), "updated": ms(s.Updated)}
	if !s.Archived.IsZero() {
		t["archived"] = ms(s.Archived)
	}
	o := map[string]any{"id": s.ID, "version": "1.1.10", "projectID": s.ProjectID, "directory": s.Directory, "title": s.Title, "time": t}
	if s.ParentID != "" {
		o["parentID"] = s.ParentID
	}
	return mustJSON(o)
}

// Session writes a session file; it returns the session with defaults filled.
func (l *Legacy) Session(s Session) (Session, error) {
	s.defaults()
	return s, l.write(filepath.Join("session", s.ProjectID, s.ID+".json"), s.sessionJSON(), s.Updated)
}

// message writes a message file.
func (l *Legacy) message(m Message) (Message, error) {
	m.defaults()
	return m, l.write(filepath.Join("message", m.SessionID, m.ID+".json"), m.LegacyJSON(), m.Updated)
}

// part writes a part file.
func (l *Legacy) part(p Part) (Part, error) {
	p.defaults()
	return p, l.write(filepath.Join("part", p.MessageID, p.ID+".json"), p.LegacyJSON(), p.Updated)
}

// Finished writes a finished legacy session in dir (see DB.Finished).
func (l *Legacy) Finished(dir string, at time.Time) (Shape, error) {
	return l.turn(dir, at, "completed")
}

// InterruptedMidTool writes the kill -9 shape in legacy storage.
func (l *Legacy) InterruptedMidTool(dir string, at time.Time) (Shape, error) {
	return l.turn(dir, at, "running")
}

func (l *Legacy) turn(dir string, at time.Time, toolState string) (Shape, error) {
	var sh Shape
	s, err := l.Session(Session{Directory: dir, Title: "legacy " + toolState, Created: at.Add(-time.Minute), Updated: at})
	if err != nil {
		return sh, err
	}
	sh.SessionID = s.ID
	um, err := l.message(Message{SessionID: s.ID, Role: "user", Created: at.Add(-30 * time.Second)})
	if err != nil {
		return sh, err
	}
	sh.UserMessageID = um.ID
	am := Message{SessionID: s.ID, ParentID: um.ID, Cwd: dir, Created: at.Add(-25 * time.Second), Updated: at}
	if toolState == "completed" {
		am.Completed = at
	}
	if am, err = l.message(am); err != nil {
		return sh, err
	}
	sh.AssistantMessageID = am.ID
	tp := Part{MessageID: am.ID, SessionID: s.ID, Tool: "bash", Status: toolState, Input: map[string]any{"command": "make test"}, Start: at.Add(-20 * time.Second), Updated: at}
	if toolState == "completed" {
		tp.Output, tp.End = "ok", at
	}
	if tp, err = l.part(tp); err != nil {
		return sh, err
	}
	sh.ToolPartID = tp.ID
	return sh, nil
}
