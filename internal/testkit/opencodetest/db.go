// Package opencodetest builds realistic OpenCode data for tests: SQLite
// databases with the tables and columns of opencode 1.18.33, the legacy
// JSON storage of 1.1.x, and a fake OpenCode HTTP server.
//
// The shapes it writes are the ones described in docs/agents/opencode.md:
// a finished session, a session interrupted mid tool (the kill -9 shape:
// an assistant message whose time holds only "created" and a bash tool part
// left "running"), a child (subagent) session under a running task part,
// and a session waiting on a question. Nothing here touches a real
// ~/.local/share/opencode: every path is given by the caller.
package opencodetest

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver, registered as "sqlite"
)

// Version is the OpenCode version whose schema this package writes.
const Version = "1.18.33"

// DDL creates the tables of opencode 1.18.33 that sessiond reads, with the
// columns and indexes OpenCode declares, plus the event log tables. It is
// written out here rather than copied so a schema change upstream shows up
// as a failing real-agent check, not as silently updated fixtures.
const DDL = `
CREATE TABLE project (
	id TEXT PRIMARY KEY,
	worktree TEXT NOT NULL,
	vcs TEXT,
	name TEXT,
	icon_url TEXT,
	icon_color TEXT,
	time_created INTEGER NOT NULL,
	time_updated INTEGER NOT NULL,
	time_initialized INTEGER,
	sandboxes TEXT NOT NULL DEFAULT '[]'
);
CREATE TABLE session (
	id TEXT PRIMARY KEY,
	project_id TEXT NOT NULL REFERENCES project(id) ON DELETE CASCADE,
	workspace_id TEXT,
	parent_id TEXT,
	slug TEXT NOT NULL,
	directory TEXT NOT NULL,
	path TEXT,
	title TEXT NOT NULL,
	version TEXT NOT NULL,
	share_url TEXT,
	summary_additions INTEGER,
	summary_deletions INTEGER,
	summary_files INTEGER,
	summary_diffs TEXT,
	cost REAL NOT NULL DEFAULT 0,
	tokens_input INTEGER NOT NULL DEFAULT 0,
	tokens_output INTEGER NOT NULL DEFAULT 0,
	tokens_reasoning INTEGER NOT NULL DEFAULT 0,
	tokens_cache_read INTEGER NOT NULL DEFAULT 0,
	tokens_cache_write INTEGER NOT NULL DEFAULT 0,
	revert TEXT,
	permission TEXT,
	agent TEXT,
	model TEXT,
	time_created INTEGER NOT NULL,
	time_updated INTEGER NOT NULL,
	time_compacting INTEGER,
	time_archived INTEGER
);
CREATE INDEX session_project_idx ON session (project_id);
CREATE INDEX session_workspace_idx ON session (workspace_id);
CREATE INDEX session_parent_idx ON session (parent_id);
CREATE TABLE message (
	id TEXT PRIMARY KEY,
	session_id TEXT NOT NULL REFERENCES session(id) ON DELETE CASCADE,
	time_created INTEGER NOT NULL,
	time_updated INTEGER NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX message_session_time_created_id_idx ON message (session_id, time_created, id);
CREATE TABLE part (
	id TEXT PRIMARY KEY,
	message_id TEXT NOT NULL REFERENCES message(id) ON DELETE CASCADE,
	session_id TEXT NOT NULL,
	time_created INTEGER NOT NULL,
	time_updated INTEGER NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX part_message_id_id_idx ON part (message_id, id);
CREATE INDEX part_session_idx ON part (session_id);
CREATE TABLE event_sequence (
	aggregate_id TEXT PRIMARY KEY,
	seq INTEGER NOT NULL,
	owner_id TEXT
);
CREATE TABLE event (
	id TEXT PRIMARY KEY,
	aggregate_id TEXT NOT NULL REFERENCES event_sequence(aggregate_id) ON DELETE CASCADE,
	seq INTEGER NOT NULL,
	type TEXT NOT NULL,
	data TEXT NOT NULL
);
CREATE INDEX event_aggregate_seq_idx ON event (aggregate_id, seq);
`

// DB is an OpenCode database under construction. It is safe for use by one
// goroutine at a time.
type DB struct {
	Path string
	db   *sql.DB

	mu       sync.Mutex
	projects map[string]bool
}

// Create makes a new database at path with the 1.18.33 schema in WAL mode,
// as OpenCode creates it.
func Create(path string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return open(path, "WAL", DDL)
}

// CreateJournal is Create with another journal mode ("DELETE" for the
// rollback journal, where a writer's lock blocks readers).
func CreateJournal(path, journalMode string) (*DB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return open(path, journalMode, DDL)
}

// CreateWithDDL makes a database with another schema, for schema-change tests.
func CreateWithDDL(path, ddl string) (*DB, error) {
	return open(path, "WAL", ddl)
}

func open(path, journal, ddl string) (*DB, error) {
	u := url.URL{Scheme: "file", OmitHost: true, Path: path}
	dsn := u.String() + "?_pragma=journal_mode(" + journal + ")&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(ddl); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema in %s: %w", path, err)
	}
	return &DB{Path: path, db: db, projects: map[string]bool{}}, nil
}

// MustCreate is Create for tests and benchmarks: it fails tb on error and
// closes the database at cleanup.
func MustCreate(tb testing.TB, path string) *DB {
	tb.Helper()
	d, err := Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

// Close closes the builder's connection. OpenCode keeps its connection open
// for its whole life; tests that model a running OpenCode keep it open too.
func (d *DB) Close() error { return d.db.Close() }

// SQL is the builder's connection, for tests that need raw statements (a
// writer that holds a lock, a schema change).
func (d *DB) SQL() *sql.DB { return d.db }

// Tx runs fn in one write transaction, as OpenCode writes a row and its
// event together. Use it for bulk data: one transaction is much faster.
func (d *DB) Tx(fn func(w *Writer) error) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	tx, err := d.db.Begin()
	if err != nil {
		return fmt.Errorf("begin on %s: %w", d.Path, err)
	}
	w := &Writer{tx: tx, d: d, stmts: map[string]*sql.Stmt{}}
	defer w.closeStmts()
	if err := fn(w); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit on %s: %w", d.Path, err)
	}
	return nil
}

// Session inserts one session row, or updates it in place.
func (d *DB) Session(s Session) error { return d.Tx(func(w *Writer) error { return w.session(s) }) }

// Message inserts one message row, or updates it in place.
func (d *DB) Message(m Message) error { return d.Tx(func(w *Writer) error { return w.message(m) }) }

// Part inserts one part row, or updates it in place.
func (d *DB) Part(p Part) error { return d.Tx(func(w *Writer) error { return w.part(p) }) }

// Touch sets a session's time_updated, as OpenCode does when it works on it.
func (d *DB) Touch(sessionID string, at time.Time) error {
	return d.Tx(func(w *Writer) error { return w.touch(sessionID, at) })
}

// Writer writes rows inside one transaction of DB.Tx.
type Writer struct {
	tx    *sql.Tx
	d     *DB
	stmts map[string]*sql.Stmt
}

func (w *Writer) exec(q string, args ...any) error {
	st, ok := w.stmts[q]
	if !ok {
		var err error
		st, err = w.tx.Prepare(q)
		if err != nil {
			return fmt.Errorf("prepare on %s: %w", w.d.Path, err)
		}
		w.stmts[q] = st
	}
	if _, err := st.Exec(args...); err != nil {
		return fmt.Errorf("write %s: %w", w.d.Path, err)
	}
	return nil
}

func (w *Writer) closeStmts() {
	for _, st := range w.stmts {
		st.Close()
	}
}

// Exec runs a raw statement inside the transaction.
func (w *Writer) Exec(q string, args ...any) error { return w.exec(q, args...) }

// Session is one session row. Zero fields get defaults: a fresh id, the
// project "prj_test", the title "test session", Created and Updated now.
type Session struct {
	ID        string
	ProjectID string
	ParentID  string
	Directory string
	Title     string
	Version   string
	Created   time.Time
	Updated   time.Time
	Archived  time.Time
}

func (s *Session) defaults() {
	if s.ID == "" {
		s.ID = NewID("ses")
	}
	if s.ProjectID == "" {
		s.ProjectID = "prj_test"
	}
	if s.Title == "" {
		s.Title = "test session"
	}
	if s.Version == "" {
		s.Version = Version
	}
	if s.Created.IsZero() {
		s.Created = time.Now()
	}
	if s.Updated.IsZero() {
		s.Updated = s.Created
	}
}

// session writes a session row (and its project row the first time). An
// existing row is updated in place, as OpenCode's upserts do (INSERT … ON
// CONFLICT DO UPDATE): it keeps its rowid, and nothing that references it
// is touched. (INSERT OR REPLACE would delete the row first, and with it,
// through ON DELETE CASCADE, every message and part of the session.)
func (w *Writer) session(s Session) error {
	s.defaults()
	if !w.d.projects[s.ProjectID] {
		if err := w.exec(`INSERT OR IGNORE INTO project (id, worktree, vcs, time_created, time_updated) VALUES (?, ?, 'git', ?, ?)`,
			s.ProjectID, s.Directory, ms(s.Created), ms(s.Created)); err != nil {
			return err
		}
		w.d.projects[s.ProjectID] = true
	}
	return w.exec(`INSERT INTO session (id, project_id, parent_id, slug, directory, title, version, time_created, time_updated, time_archived)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET project_id = excluded.project_id, parent_id = excluded.parent_id, slug = excluded.slug,
			directory = excluded.directory, title = excluded.title, version = excluded.version,
			time_created = excluded.time_created, time_updated = excluded.time_updated, time_archived = excluded.time_archived`,
		s.ID, s.ProjectID, nullStr(s.ParentID), "slug-"+s.ID, s.Directory, s.Title, s.Version,
		ms(s.Created), ms(s.Updated), nullTime(s.Archived))
}

// touch sets a session's time_updated.
func (w *Writer) touch(sessionID string, at time.Time) error {
	return w.exec(`UPDATE session SET time_updated = ? WHERE id = ?`, ms(at), sessionID)
}

// Message is one message row. Role is "user" or "assistant" (default).
// An assistant message is complete when Completed is set; the kill -9
// shape leaves it zero.
type Message struct {
	ID         string
	SessionID  string
	Role       string
	ParentID   string
	Agent      string
	ProviderID string
	ModelID    string
	Cwd        string
	Created    time.Time
	Completed  time.Time
	Updated    time.Time
	Error      *MessageError
}

// MessageError is an assistant message's error (MessageAbortedError, ...).
type MessageError struct {
	Name    string
	Message string
}

func (m *Message) defaults() {
	if m.ID == "" {
		m.ID = NewID("msg")
	}
	if m.Role == "" {
		m.Role = "assistant"
	}
	if m.Agent == "" {
		m.Agent = "build"
	}
	if m.ProviderID == "" {
		m.ProviderID = "fake"
	}
	if m.ModelID == "" {
		m.ModelID = "fake-model"
	}
	if m.Created.IsZero() {
		m.Created = time.Now()
	}
	if m.Updated.IsZero() {
		m.Updated = m.Created
		if m.Completed.After(m.Updated) {
			m.Updated = m.Completed
		}
	}
}

// DataJSON is the message's data column: the message JSON without id and
// sessionID, as OpenCode stores it.
func (m Message) DataJSON() string {
	m.defaults()
	return mustJSON(m.object(false))
}

// LegacyJSON is the message as a 1.1.x storage/message file (with ids).
func (m Message) LegacyJSON() string {
	m.defaults()
	return mustJSON(m.object(true))
}

func (m *Message) object(withIDs bool) map[string]any {
	t := map[string]any{"created": ms(m.Created)}
	o := map[string]any{"role": m.Role, "time": t, "agent": m.Agent}
	if withIDs {
		o["id"] = m.ID
		o["sessionID"] = m.SessionID
	}
	if m.Role == "user" {
		o["model"] = map[string]any{"providerID": m.ProviderID, "modelID": m.ModelID}
		return o
	}
	if !m.Completed.IsZero() {
		t["completed"] = ms(m.Completed)
	}
	o["parentID"] = m.ParentID
	o["mode"] = m.Agent
	o["modelID"] = m.ModelID
	o["providerID"] = m.ProviderID
	o["path"] = map[string]any{"cwd": m.Cwd, "root": m.Cwd}
	o["cost"] = 0
	o["tokens"] = map[string]any{"input": 0, "output": 0, "reasoning": 0, "cache": map[string]any{"read": 0, "write": 0}}
	if m.Error != nil {
		o["error"] = map[string]any{"name": m.Error.Name, "data": map[string]any{"message": m.Error.Message}}
	}
	return o
}

// message writes a message row; an existing one is updated in place, its
// parts kept (see Writer.session).
func (w *Writer) message(m Message) error {
	m.defaults()
	return w.exec(`INSERT INTO message (id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, time_created = excluded.time_created,
			time_updated = excluded.time_updated, data = excluded.data`,
		m.ID, m.SessionID, ms(m.Created), ms(m.Updated), mustJSON(m.object(false)))
}

// Part is one part row. Type "tool" (default when Tool is set) carries Tool,
// CallID and Status ("pending", "running", "completed", "error"); "text"
// carries Text; "step-start" nothing.
type Part struct {
	ID        string
	MessageID string
	SessionID string
	Type      string
	Text      string
	Tool      string
	CallID    string
	Status    string
	Input     map[string]any
	Output    string
	Error     string
	Title     string
	Metadata  map[string]any
	Start     time.Time
	End       time.Time
	Created   time.Time
	Updated   time.Time
}

func (p *Part) defaults() {
	if p.ID == "" {
		p.ID = NewID("prt")
	}
	if p.Type == "" {
		if p.Tool != "" {
			p.Type = "tool"
		} else {
			p.Type = "text"
		}
	}
	if p.Type == "tool" {
		if p.CallID == "" {
			p.CallID = "call_" + randString(16)
		}
		if p.Status == "" {
			p.Status = "completed"
		}
		if p.Input == nil {
			p.Input = map[string]any{}
		}
	}
	if p.Created.IsZero() {
		p.Created = p.Start
		if p.Created.IsZero() {
			p.Created = time.Now()
		}
	}
	if p.Start.IsZero() {
		p.Start = p.Created
	}
	if p.Updated.IsZero() {
		p.Updated = p.Created
		if p.End.After(p.Updated) {
			p.Updated = p.End
		}
	}
}

// DataJSON is the part's data column (no id, sessionID, messageID).
func (p Part) DataJSON() string {
	p.defaults()
	return mustJSON(p.object(false))
}

// LegacyJSON is the part as a 1.1.x storage/part file (with ids).
func (p Part) LegacyJSON() string {
	p.defaults()
	return mustJSON(p.object(true))
}

func (p *Part) object(withIDs bool) map[string]any {
	o := map[string]any{"type": p.Type}
	if withIDs {
		o["id"] = p.ID
		o["sessionID"] = p.SessionID
		o["messageID"] = p.MessageID
	}
	switch p.Type {
	case "tool":
		o["tool"] = p.Tool
		o["callID"] = p.CallID
		st := map[string]any{"status": p.Status, "input": p.Input}
		switch p.Status {
		case "pending":
			st["raw"] = ""
		case "running":
			if p.Title != "" {
				st["title"] = p.Title
			}
			if p.Metadata != nil {
				st["metadata"] = p.Metadata
			}
			st["time"] = map[string]any{"start": ms(p.Start)}
		case "completed":
			st["output"] = p.Output
			st["title"] = p.Title
			md := p.Metadata
			if md == nil {
				md = map[string]any{}
			}
			st["metadata"] = md
			end := p.End
			if end.IsZero() {
				end = p.Start
			}
			st["time"] = map[string]any{"start": ms(p.Start), "end": ms(end)}
		case "error":
			st["error"] = p.Error
			if p.Metadata != nil {
				st["metadata"] = p.Metadata
			}
			end := p.End
			if end.IsZero() {
				end = p.Start
			}
			st["time"] = map[string]any{"start": ms(p.Start), "end": ms(end)}
		}
		o["state"] = st
	case "text", "reasoning":
		o["text"] = p.Text
		t := map[string]any{"start": ms(p.Start)}
		if !p.End.IsZero() {
			t["end"] = ms(p.End)
		}
		o["time"] = t
	case "step-start":
		o["snapshot"] = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
	case "step-finish":
		o["reason"] = "stop"
		o["cost"] = 0
		o["tokens"] = map[string]any{"input": 0, "output": 0, "reasoning": 0, "cache": map[string]any{"read": 0, "write": 0}}
	}
	return o
}

// part writes a part row; an existing one is updated in place, keeping
// its rowid (see Writer.session).
func (w *Writer) part(p Part) error {
	p.defaults()
	return w.exec(`INSERT INTO part (id, message_id, session_id, time_created, time_updated, data) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET message_id = excluded.message_id, session_id = excluded.session_id,
			time_created = excluded.time_created, time_updated = excluded.time_updated, data = excluded.data`,
		p.ID, p.MessageID, p.SessionID, ms(p.Created), ms(p.Updated), mustJSON(p.object(false)))
}

// Shape names the rows a scenario wrote.
type Shape struct {
	SessionID string
	// UserMessageID and AssistantMessageID are the last turn's messages.
	UserMessageID      string
	AssistantMessageID string
	// ToolPartID is the scenario's tool part (the running one, if any).
	ToolPartID string
	// ChildID is the child session of a Child scenario.
	ChildID string
}

// Finished writes a session in dir whose last turn completed at `at`: a
// user message, an assistant message with time.completed, a completed bash
// tool part and a text part.
func (d *DB) Finished(dir string, at time.Time) (Shape, error) {
	var sh Shape
	err := d.Tx(func(w *Writer) error {
		var err error
		sh, err = w.finished(dir, at)
		return err
	})
	return sh, err
}

// finished is DB.Finished inside a transaction.
func (w *Writer) finished(dir string, at time.Time) (Shape, error) {
	return turn(w, Session{Directory: dir, Title: "finished session", Created: at.Add(-time.Minute), Updated: at}, at, "completed")
}

// InterruptedMidTool writes the shape `kill -9` of `opencode run` leaves
// while its bash tool runs (checked on 1.18.33): the assistant message's
// time holds only "created", a step-start part, and the bash tool part with
// state.status "running" and state.time.start. `at` is the last write.
func (d *DB) InterruptedMidTool(dir string, at time.Time) (Shape, error) {
	var sh Shape
	err := d.Tx(func(w *Writer) error {
		var err error
		sh, err = w.InterruptedMidTool(dir, at)
		return err
	})
	return sh, err
}

// InterruptedMidTool is DB.InterruptedMidTool inside a transaction.
func (w *Writer) InterruptedMidTool(dir string, at time.Time) (Shape, error) {
	return turn(w, Session{Directory: dir, Title: "interrupted session", Created: at.Add(-time.Minute), Updated: at}, at, "running")
}

// WaitingOnQuestion writes a session whose assistant message is open with a
// `question` tool part running: OpenCode waits for the user's answer.
func (d *DB) WaitingOnQuestion(dir string, at time.Time) (Shape, error) {
	var sh Shape
	err := d.Tx(func(w *Writer) error {
		s := Session{Directory: dir, Title: "question session", Created: at.Add(-time.Minute), Updated: at}
		s.defaults()
		if err := w.session(s); err != nil {
			return err
		}
		sh.SessionID = s.ID
		sh.UserMessageID, sh.AssistantMessageID = NewID("msg"), NewID("msg")
		if err := w.message(Message{ID: sh.UserMessageID, SessionID: s.ID, Role: "user", Created: at.Add(-20 * time.Second)}); err != nil {
			return err
		}
		if err := w.message(Message{ID: sh.AssistantMessageID, SessionID: s.ID, ParentID: sh.UserMessageID, Cwd: dir, Created: at.Add(-15 * time.Second), Updated: at}); err != nil {
			return err
		}
		sh.ToolPartID = NewID("prt")
		return w.part(Part{ID: sh.ToolPartID, MessageID: sh.AssistantMessageID, SessionID: s.ID, Tool: "question", Status: "running",
			Input: map[string]any{"questions": []any{map[string]any{"question": "Which database?", "header": "DB", "options": []any{map[string]any{"label": "sqlite"}, map[string]any{"label": "postgres"}}}}},
			Start: at.Add(-10 * time.Second), Updated: at})
	})
	return sh, err
}

// Child writes a parent session whose `task` tool part runs a subagent, and
// that child session (parent_id set). The child's own last turn is
// "running" (a bash tool in flight, written at `at`) or "completed".
func (d *DB) Child(dir string, at time.Time, childState string) (Shape, error) {
	var sh Shape
	err := d.Tx(func(w *Writer) error {
		parent := Session{Directory: dir, Title: "parent session", Created: at.Add(-2 * time.Minute), Updated: at.Add(-time.Minute)}
		parent.defaults()
		if err := w.session(parent); err != nil {
			return err
		}
		sh.SessionID = parent.ID
		sh.ChildID = NewID("ses")
		sh.UserMessageID, sh.AssistantMessageID = NewID("msg"), NewID("msg")
		if err := w.message(Message{ID: sh.UserMessageID, SessionID: parent.ID, Role: "user", Created: at.Add(-90 * time.Second)}); err != nil {
			return err
		}
		if err := w.message(Message{ID: sh.AssistantMessageID, SessionID: parent.ID, ParentID: sh.UserMessageID, Cwd: dir, Created: at.Add(-80 * time.Second), Updated: at.Add(-time.Minute)}); err != nil {
			return err
		}
		sh.ToolPartID = NewID("prt")
		if err := w.part(Part{ID: sh.ToolPartID, MessageID: sh.AssistantMessageID, SessionID: parent.ID, Tool: "task", Status: "running",
			Input:    map[string]any{"description": "explore", "prompt": "look around", "subagent_type": "general"},
			Title:    "explore",
			Metadata: map[string]any{"sessionId": sh.ChildID},
			Start:    at.Add(-time.Minute), Updated: at.Add(-time.Minute)}); err != nil {
			return err
		}
		_, err := turn(w, Session{ID: sh.ChildID, ParentID: parent.ID, Directory: dir, Title: "explore (@general subagent)", Created: at.Add(-time.Minute), Updated: at}, at, childState)
		return err
	})
	return sh, err
}

// turn writes a session with one user message and one assistant turn whose
// bash tool part is in toolState ("completed" closes the message too).
func turn(w *Writer, s Session, at time.Time, toolState string) (Shape, error) {
	var sh Shape
	s.defaults()
	if err := w.session(s); err != nil {
		return sh, err
	}
	sh.SessionID = s.ID
	sh.UserMessageID, sh.AssistantMessageID = NewID("msg"), NewID("msg")
	if err := w.message(Message{ID: sh.UserMessageID, SessionID: s.ID, Role: "user", Created: at.Add(-30 * time.Second)}); err != nil {
		return sh, err
	}
	am := Message{ID: sh.AssistantMessageID, SessionID: s.ID, ParentID: sh.UserMessageID, Cwd: s.Directory, Created: at.Add(-25 * time.Second), Updated: at}
	if toolState == "completed" {
		am.Completed = at
	}
	if err := w.message(am); err != nil {
		return sh, err
	}
	if err := w.part(Part{MessageID: am.ID, SessionID: s.ID, Type: "step-start", Created: at.Add(-24 * time.Second)}); err != nil {
		return sh, err
	}
	sh.ToolPartID = NewID("prt")
	tp := Part{ID: sh.ToolPartID, MessageID: am.ID, SessionID: s.ID, Tool: "bash", Status: toolState,
		Input: map[string]any{"command": "python3 -c 'import time; time.sleep(600)'", "description": "long job"},
		Title: "long job", Start: at.Add(-20 * time.Second), Updated: at}
	if toolState == "completed" {
		tp.Output = "ok\n"
		tp.End = at.Add(-time.Second)
	} else {
		tp.Metadata = map[string]any{"output": "", "description": "long job"}
	}
	if err := w.part(tp); err != nil {
		return sh, err
	}
	if toolState == "completed" {
		return sh, w.part(Part{MessageID: am.ID, SessionID: s.ID, Type: "text", Text: "Done.", Start: at.Add(-time.Second), End: at})
	}
	return sh, nil
}

// ms is OpenCode's time unit: milliseconds since the epoch.
func ms(t time.Time) int64 { return t.UnixMilli() }

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return ms(t)
}

func nullStr(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

var idCounter atomic.Uint64

// NewID returns an OpenCode-style ascending id ("ses_…", "msg_…", "prt_…"):
// 12 hex digits of time and counter, then 14 random base62 characters, so
// ids sort in creation order as OpenCode's do.
func NewID(prefix string) string {
	n := uint64(time.Now().UnixMilli())*0x1000 + idCounter.Add(1)%0x1000
	return fmt.Sprintf("%s_%012x%s", prefix, n&0xffffffffffff, randString(14))
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

func randString(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = base62[rand.IntN(len(base62))]
	}
	return string(b)
}
