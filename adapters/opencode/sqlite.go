package opencode

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"
	"modernc.org/sqlite" // pure-Go SQLite, registered as "sqlite"

	"github.com/sessiond/sessiond/adapters/internal/kit"
)

// schemaError says an OpenCode database does not have the tables or columns
// sessiond reads (they were checked on opencode 1.18.33). OpenCode changes
// its schema often; this error names exactly what is missing so the
// adapter can be updated instead of silently reading nothing.
type schemaError struct {
	Path string
	// MissingTables are tables that do not exist.
	MissingTables []string
	// MissingColumns maps a table to its missing columns.
	MissingColumns map[string][]string
}

func (e *schemaError) Error() string {
	var parts []string
	for _, t := range e.MissingTables {
		parts = append(parts, "table "+t+" is missing")
	}
	tables := make([]string, 0, len(e.MissingColumns))
	for t := range e.MissingColumns {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, t := range tables {
		parts = append(parts, fmt.Sprintf("table %s lacks column(s) %s", t, strings.Join(e.MissingColumns[t], ", ")))
	}
	return "OpenCode schema changed (expected opencode 1.18.33's): " + strings.Join(parts, "; ")
}

// sessionColumns and partColumns are the columns read of a session row
// and of a part row, in the order scanSession and scanTools take them.
var (
	sessionColumns = []string{"id", "directory", "title", "time_created", "time_updated"}
	partColumns    = []string{"id", "message_id", "session_id", "time_created", "time_updated", "data"}
)

// requiredColumns are the columns the adapter cannot work without.
var requiredColumns = map[string][]string{
	"session": sessionColumns,
	"message": {"id", "session_id", "time_created", "time_updated", "data"},
	"part":    partColumns,
}

// partSelect reads part rows for scanTools; each use adds its WHERE.
var partSelect = "SELECT " + strings.Join(partColumns, ", ") + " FROM part"

// optionalSessionColumns are read when present.
var optionalSessionColumns = []string{"parent_id", "project_id", "version", "time_archived"}

// maxAssistantScan bounds how many newest messages are walked to find the
// last assistant message of a session.
const maxAssistantScan = 200

// inFlightFilter preselects part rows that may be pending or running tool
// calls. JSON.stringify writes no spaces, and inside a JSON string the
// quotes would be escaped, so the literal only matches a real "status"
// key; the Go parser then checks the type and the state.
const inFlightFilter = `(instr(data, '"status":"running"') > 0 OR instr(data, '"status":"pending"') > 0)`

// scanFilter is inFlightFilter for a pass over the whole part table, the
// bulk of a whole read: the same test made by a Go function (strings.Index
// is many times faster than SQLite's instr in modernc's translated C, and
// VolatileArgs hands it the row's bytes without a copy, so nothing of them
// may be kept). SQL functions are
// registered with the driver for the whole process; should the name be
// taken, the SQL form is used.
var scanFilter = inFlightFilter

const scanFuncName = "sessiond_opencode_maybe_in_flight"

// maybeInFlight is inFlightFilter's test, in one pass over data. data may
// be SQLite's own memory: nothing of it is kept.
//
// It looks for `status":"` and checks the quote before it: JSON is full
// of quotes, and strings.Index anchored on one stops at every key, while
// an `s` is rarer. Half the time of the search for `"status":"` over the
// rows of the benchmark database (19 against 38 ms per 300,000 rows).
func maybeInFlight(data string) bool {
	const key = `status":"`
	for off := 0; ; {
		i := strings.Index(data[off:], key)
		if i < 0 {
			return false
		}
		i += off
		off = i + len(key)
		if i == 0 || data[i-1] != '"' {
			continue
		}
		if rest := data[off:]; strings.HasPrefix(rest, `running"`) || strings.HasPrefix(rest, `pending"`) {
			return true
		}
	}
}

func init() {
	err := sqlite.RegisterFunction(scanFuncName, &sqlite.FunctionImpl{
		NArgs: 1, Deterministic: true, VolatileArgs: true,
		Scalar: func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			var in bool
			switch v := args[0].(type) {
			case string:
				in = maybeInFlight(v)
			case []byte: // OpenCode writes text; a blob costs a copy
				in = maybeInFlight(string(v))
			}
			if in {
				return int64(1), nil
			}
			return int64(0), nil
		},
	})
	if err == nil {
		scanFilter = scanFuncName + "(data)"
	}
}

// dbReader reads one opencode*.db incrementally. Not safe for concurrent
// use; Discover serializes passes.
type dbReader struct {
	path string
	busy time.Duration
	log  *zap.Logger

	sessions map[string]*sessionData // nil before the first successful pass
	cur      cursors                 // how far the passes read
	lastFull time.Time
	fulls    int // whole reads done, for tests
	// warning is why the last pass read nothing although it could open
	// the file (an empty database that stays empty), nil otherwise.
	warning error
	// restored is what a checkpoint saved of this database before a
	// restart: the first read adopts it as if it had read it itself, and
	// then checks it like any earlier pass's (see cursors). Nil once used.
	restored *savedDB
	// files is the database's and its -wal's stat as the last successful
	// read found them before it opened the database (see dbFiles);
	// unchanged counts the passes that found them the same and read
	// nothing, for tests.
	files     dbFiles
	unchanged int
}

// dbFiles is what stat says of a database and its -wal: every write
// OpenCode makes changes one of them (the -wal in WAL mode, the database
// itself at a checkpoint or in rollback-journal mode). The -shm is left
// out: every reader writes to it, this one included.
type dbFiles struct {
	db, wal os.FileInfo // nil when absent
	at      time.Time   // when they were stat'ed
}

func statDBFiles(path string) dbFiles {
	f := dbFiles{at: time.Now()}
	if fi, err := os.Stat(path); err == nil {
		f.db = fi
	}
	if fi, err := os.Stat(path + "-wal"); err == nil {
		f.wal = fi
	}
	return f
}

// sameAs reports whether f shows no change since old, a stat taken
// before a read that then succeeded, and old's files had settled when it
// was taken (kit.Settled: a write in the same tick of the file system's
// clock can leave mtime and size as they were).
func (f dbFiles) sameAs(old dbFiles) bool {
	same := func(a, b os.FileInfo) bool {
		if a == nil || b == nil {
			return a == nil && b == nil
		}
		return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) && kit.Settled(b.ModTime(), old.at)
	}
	return f.db != nil && same(f.db, old.db) && same(f.wal, old.wal)
}

// cursors say how far the passes have read a database: the largest
// message and part rowids, the ids of those two rows, and the file's
// identity. A pass reads only rows past the rowids, which is sound while
// every new row gets a larger rowid than the cursor's: SQLite gives a new
// row max(rowid)+1, so that holds as long as the row at the cursor still
// exists. When it is gone (deleted, the file replaced, a VACUUM that
// renumbered the rows), rowids at or below the cursor may be given again,
// and the next pass reads the database whole.
type cursors struct {
	msgRowid  int64
	msgID     string
	partRowid int64
	partID    string
	// dev and ino are the file's identity; idKnown is false where the
	// platform does not say.
	dev, ino uint64
	idKnown  bool
}

// emptyDBWarnAfter: a database with no table that has not changed for
// this long is not one OpenCode is creating; it is named as bad data.
const emptyDBWarnAfter = 10 * time.Second

// dsn is the read-only connection string: mode=ro and a busy timeout,
// never immutable (the file changes under us: OpenCode writes it).
func dsn(path string, busy time.Duration) string {
	u := url.URL{Scheme: "file", OmitHost: true, Path: path}
	q := "mode=ro&_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")&_pragma=query_only(1)"
	return u.String() + "?" + q
}

// openRO opens a read-only connection. The caller closes the *sql.DB: a
// connection is held only for the pass, so sessiond itself never shows up
// as "a process holding the database open" between passes.
func openRO(ctx context.Context, path string, busy time.Duration) (*sql.DB, *sql.Conn, error) {
	db, err := sql.Open("sqlite", dsn(path, busy))
	if err != nil {
		return nil, nil, fmt.Errorf("open: %w", err)
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("open: %w", explain(err))
	}
	return db, conn, nil
}

// explain adds what an SQLite error means for sessiond.
func explain(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked"):
		return fmt.Errorf("database is locked by a writer past the busy timeout; keeping the last known state: %w", err)
	case strings.Contains(msg, "SQLITE_NOTADB") || strings.Contains(msg, "not a database"):
		return fmt.Errorf("not an SQLite database (corrupt or truncated file): %w", err)
	case strings.Contains(msg, "SQLITE_CORRUPT") || strings.Contains(msg, "malformed"):
		return fmt.Errorf("database is corrupt: %w", err)
	case strings.Contains(msg, "SQLITE_CANTOPEN") || strings.Contains(msg, "unable to open"):
		return fmt.Errorf("cannot open the database file (permissions, or a missing -shm/-wal that cannot be created): %w", err)
	}
	return err
}

// checkSchema verifies the tables and columns sessiond reads and returns
// the optional session columns present.
func checkSchema(ctx context.Context, conn *sql.Conn, path string) (map[string]bool, error) {
	se := &schemaError{Path: path, MissingColumns: map[string][]string{}}
	var sessCols map[string]bool
	for _, table := range []string{"session", "message", "part"} {
		cols, err := tableColumns(ctx, conn, table)
		if err != nil {
			return nil, explain(err)
		}
		if len(cols) == 0 {
			se.MissingTables = append(se.MissingTables, table)
			continue
		}
		for _, c := range requiredColumns[table] {
			if !cols[c] {
				se.MissingColumns[table] = append(se.MissingColumns[table], c)
			}
		}
		if table == "session" {
			sessCols = cols
		}
	}
	if len(se.MissingTables) > 0 || len(se.MissingColumns) > 0 {
		return nil, se
	}
	opt := map[string]bool{}
	for _, c := range optionalSessionColumns {
		opt[c] = sessCols[c]
	}
	return opt, nil
}

// noTables reports whether the database has no table yet.
func noTables(ctx context.Context, conn *sql.Conn) bool {
	var n int
	err := conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE type = 'table'").Scan(&n)
	return err == nil && n == 0
}

func tableColumns(ctx context.Context, conn *sql.Conn, table string) (map[string]bool, error) {
	rows, err := conn.QueryContext(ctx, "SELECT name FROM pragma_table_info(?)", table)
	if err != nil {
		return nil, fmt.Errorf("read schema of %s: %w", table, err)
	}
	defer rows.Close()
	cols := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, fmt.Errorf("read schema of %s: %w", table, err)
		}
		cols[name] = true
	}
	return cols, rows.Err()
}

// read runs one pass over the database: a cold pass on first use, after a
// deletion moved a rowid cursor back, or every fullEvery; otherwise only
// the sessions that changed since the last pass plus every session with
// work in flight. On error the cache is left as it was.
func (r *dbReader) read(ctx context.Context, now time.Time, fullEvery time.Duration) error {
	// Nothing written since the last read: nothing to read. Each read
	// opens the database, checks its schema and queries every session's
	// time (about 20 ms of CPU at 2,000 sessions, 0.43 % of a core at the
	// default 5 s tick); a stat of two files is enough to know.
	files := statDBFiles(r.path)
	if r.sessions != nil && r.restored == nil && files.sameAs(r.files) && (fullEvery <= 0 || now.Sub(r.lastFull) < fullEvery) {
		r.unchanged++
		return nil
	}
	r.files = dbFiles{}
	r.warning = nil
	// The file's identity is taken before it is opened: if it is replaced
	// in between, the next pass sees another identity and reads it whole
	// (a restored backup is not trusted to continue where the old file's
	// cursors stopped). Where the platform does not say, the rowid
	// cursors alone tell a replaced database.
	var dev, ino uint64
	var idKnown bool
	if fi, err := os.Stat(r.path); err == nil {
		dev, ino, idKnown = kit.FileID(fi)
	}
	db, conn, err := openRO(ctx, r.path, r.busy)
	if err != nil {
		return err
	}
	defer db.Close()
	defer conn.Close()

	opt, err := checkSchema(ctx, conn, r.path)
	if err != nil {
		var se *schemaError
		if errors.As(err, &se) && len(se.MissingTables) == 3 && noTables(ctx, conn) {
			// A database with no table at all is one OpenCode is creating
			// (its first start runs the migrations just after the file
			// appears; seen with 1.18.33): nothing to read yet, and no
			// schema change. The next pass reads it cold.
			r.sessions, r.cur, r.restored = nil, cursors{}, nil
			if fi, err := os.Stat(r.path); err == nil && now.Sub(fi.ModTime()) >= emptyDBWarnAfter {
				// Still empty long after it appeared: not being created. No
				// error (nothing to keep a last state for), but named.
				r.warning = fmt.Errorf("database has no tables (unchanged since %s): nothing read", fi.ModTime().UTC().Format(time.RFC3339))
			}
			return nil
		}
		return err
	}
	// The rowid cursors are read before the data, so a row written while
	// this pass reads is seen again next pass rather than missed.
	cur, err := readCursors(ctx, conn)
	if err != nil {
		return explain(err)
	}
	cur.dev, cur.ino, cur.idKnown = dev, ino, idKnown
	if r.restored != nil {
		if r.sessions == nil {
			// What the previous sessiond learned, as if this process had
			// read it: checked below like the state of any earlier pass.
			// The full re-read backstop counts from now.
			r.sessions, r.cur, r.lastFull = r.restored.sessions, r.restored.cur, now
		}
		r.restored = nil
	}
	why, err := r.mustReadAll(ctx, conn, cur, now, fullEvery)
	if err != nil {
		return explain(err)
	}
	var next map[string]*sessionData
	if why != "" {
		switch {
		case r.sessions == nil:
		case why == whyPeriodic:
			r.log.Debug("reading the OpenCode database whole", zap.String("db", r.path), zap.String("why", why))
		default:
			r.log.Info("reading the OpenCode database whole", zap.String("db", r.path), zap.String("why", why))
		}
		next, err = r.readAll(ctx, conn, opt)
		if err == nil {
			r.lastFull = now
			r.fulls++
		}
	} else {
		next, err = r.readChanged(ctx, conn, opt)
	}
	if err != nil {
		return explain(err)
	}
	r.sessions = next
	r.cur = cur
	r.files = files
	return nil
}

// readCursors reads the largest rowid of message and part and the ids of
// those rows; zero and "" for an empty table.
func readCursors(ctx context.Context, conn *sql.Conn) (cursors, error) {
	var c cursors
	for _, t := range []struct {
		table string
		rowid *int64
		id    *string
	}{{"message", &c.msgRowid, &c.msgID}, {"part", &c.partRowid, &c.partID}} {
		var id sql.NullString
		err := conn.QueryRowContext(ctx, "SELECT rowid, id FROM "+t.table+" ORDER BY rowid DESC LIMIT 1").Scan(t.rowid, &id)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return c, fmt.Errorf("read cursors: %w", err)
		}
		*t.id = id.String
	}
	return c, nil
}

const whyPeriodic = "periodic full read"

// mustReadAll says why this pass must read the database whole ("" when
// reading what changed since r.cur is enough): nothing read yet, another
// file at the path, a rowid cursor past the table's end or whose row is
// gone, or the periodic full read due.
func (r *dbReader) mustReadAll(ctx context.Context, conn *sql.Conn, cur cursors, now time.Time, fullEvery time.Duration) (string, error) {
	switch {
	case r.sessions == nil:
		return "first read", nil
	case r.cur.idKnown && cur.idKnown && (r.cur.dev != cur.dev || r.cur.ino != cur.ino):
		return "another file at the path (replaced)", nil
	case cur.msgRowid < r.cur.msgRowid || cur.partRowid < r.cur.partRowid:
		return "rows were deleted past a cursor", nil
	case fullEvery > 0 && now.Sub(r.lastFull) >= fullEvery:
		return whyPeriodic, nil
	}
	for _, t := range []struct {
		table string
		rowid int64
		id    string
	}{{"message", r.cur.msgRowid, r.cur.msgID}, {"part", r.cur.partRowid, r.cur.partID}} {
		if t.rowid == 0 {
			continue
		}
		var id sql.NullString
		err := conn.QueryRowContext(ctx, "SELECT id FROM "+t.table+" WHERE rowid = ?", t.rowid).Scan(&id)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return "the " + t.table + " row at the cursor is gone", nil
		case err != nil:
			return "", fmt.Errorf("check cursors: %w", err)
		case id.String != t.id:
			return "the " + t.table + " row at the cursor is another row", nil
		}
	}
	return "", nil
}

// sessionSelect reads session rows for scanSession: the optional columns
// the database lacks read as NULL.
func sessionSelect(opt map[string]bool) string {
	cols := slices.Clone(sessionColumns)
	for _, c := range optionalSessionColumns {
		if opt[c] {
			cols = append(cols, c)
		} else {
			cols = append(cols, "NULL AS "+c)
		}
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM session"
}

func (r *dbReader) scanSession(rows *sql.Rows) (*sessionData, error) {
	var (
		id, dir, title           string
		created, updated         sql.NullInt64
		parent, project, version sql.NullString
		archived                 sql.NullInt64
	)
	if err := rows.Scan(&id, &dir, &title, &created, &updated, &parent, &project, &version, &archived); err != nil {
		return nil, fmt.Errorf("read session row: %w", err)
	}
	s := &sessionData{
		ID: id, Directory: dir, Title: title, ParentID: parent.String, ProjectID: project.String, Version: version.String,
		Created: msInt(created.Int64), Updated: msInt(updated.Int64), Archived: msInt(archived.Int64), Source: r.path,
	}
	s.touch(s.Updated)
	return s, nil
}

// readAll reads every session: the session table, one pass over the part
// table for in-flight tool calls, and per session its newest messages.
func (r *dbReader) readAll(ctx context.Context, conn *sql.Conn, opt map[string]bool) (map[string]*sessionData, error) {
	out := map[string]*sessionData{}
	rows, err := conn.QueryContext(ctx, sessionSelect(opt))
	if err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}
	for rows.Next() {
		s, err := r.scanSession(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out[s.ID] = s
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read sessions: %w", err)
	}

	tools, err := r.queryTools(ctx, conn, partSelect+" WHERE "+scanFilter)
	if err != nil {
		return nil, err
	}
	for sid, ts := range tools {
		if s := out[sid]; s != nil {
			s.Tools = ts
		}
	}
	d, err := newDetailReader(ctx, conn)
	if err != nil {
		return nil, err
	}
	defer d.close()
	for _, s := range out {
		if err := r.finish(ctx, d, s); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// finish completes a session whose row and in-flight tool calls were
// read: its newest messages, and its last write among all of them.
func (r *dbReader) finish(ctx context.Context, d *detailReader, s *sessionData) error {
	if err := d.read(ctx, s, r.log); err != nil {
		return err
	}
	s.sortTools()
	for _, t := range s.Tools {
		s.touch(t.Updated)
	}
	return nil
}

// readChanged re-reads only what changed: sessions whose row is new or has
// a new time_updated, sessions with new message or part rows (by rowid),
// and every session with work in flight.
func (r *dbReader) readChanged(ctx context.Context, conn *sql.Conn, opt map[string]bool) (map[string]*sessionData, error) {
	present, changed, err := r.changedSessions(ctx, conn)
	if err != nil {
		return nil, err
	}
	// New in-flight tool parts can only be new rows: a finished part never
	// goes back to running, and a deletion that could let a rowid be reused
	// forces a full pass.
	newTools, err := r.queryTools(ctx, conn, partSelect+" WHERE rowid > ? AND "+inFlightFilter, r.cur.partRowid)
	if err != nil {
		return nil, err
	}
	for id, s := range r.sessions {
		if s.inFlight() {
			changed[id] = true
		}
	}

	next := make(map[string]*sessionData, len(present))
	for id := range present {
		if !changed[id] {
			next[id] = r.sessions[id]
		}
	}
	if len(changed) == 0 {
		return next, nil
	}
	ids := make([]string, 0, len(changed))
	for id := range changed {
		if present[id] {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	if err := r.reread(ctx, conn, opt, ids, newTools, next); err != nil {
		return nil, err
	}
	return next, nil
}

// changedSessions lists the sessions present in the session table and,
// among the sessions present or known, those changed since the last pass:
// a new row or a new time_updated, or new message or part rows (by rowid).
func (r *dbReader) changedSessions(ctx context.Context, conn *sql.Conn) (present, changed map[string]bool, err error) {
	changed = map[string]bool{}
	present = map[string]bool{}
	rows, err := conn.QueryContext(ctx, "SELECT id, time_updated FROM session")
	if err != nil {
		return nil, nil, fmt.Errorf("read sessions: %w", err)
	}
	for rows.Next() {
		var id string
		var upd sql.NullInt64
		if err := rows.Scan(&id, &upd); err != nil {
			rows.Close()
			return nil, nil, fmt.Errorf("read sessions: %w", err)
		}
		present[id] = true
		if old := r.sessions[id]; old == nil || !old.Updated.Equal(msInt(upd.Int64)) {
			changed[id] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read sessions: %w", err)
	}
	// No DISTINCT: with it SQLite walks the whole session index instead
	// of seeking the rowid range.
	for _, q := range []struct {
		sql   string
		since int64
	}{
		{"SELECT session_id FROM message WHERE rowid > ?", r.cur.msgRowid},
		{"SELECT session_id FROM part WHERE rowid > ?", r.cur.partRowid},
	} {
		ids, err := queryStrings(ctx, conn, q.sql, q.since)
		if err != nil {
			return nil, nil, err
		}
		for _, id := range ids {
			changed[id] = true
		}
	}
	return present, changed, nil
}

// reread reads the sessions ids again into next: each one's row, its
// in-flight tool calls (newTools are its new in-flight part rows) and its
// newest messages. A session deleted meanwhile is left out.
func (r *dbReader) reread(ctx context.Context, conn *sql.Conn, opt map[string]bool, ids []string, newTools map[string][]toolCall, next map[string]*sessionData) error {
	one, err := conn.PrepareContext(ctx, sessionSelect(opt)+" WHERE id = ?")
	if err != nil {
		return fmt.Errorf("read sessions: %w", err)
	}
	defer one.Close()
	d, err := newDetailReader(ctx, conn)
	if err != nil {
		return err
	}
	defer d.close()
	// A session seen for the first time has all its parts read; a known one
	// re-reads the parts that were in flight, by id, plus its new rows.
	toolStmt, err := conn.PrepareContext(ctx, partSelect+" WHERE session_id = ? AND "+inFlightFilter)
	if err != nil {
		return fmt.Errorf("read parts: %w", err)
	}
	defer toolStmt.Close()
	partStmt, err := conn.PrepareContext(ctx, partSelect+" WHERE id = ?")
	if err != nil {
		return fmt.Errorf("read parts: %w", err)
	}
	defer partStmt.Close()

	for _, id := range ids {
		s, err := r.readSessionRow(ctx, one, id)
		if err != nil {
			return err
		}
		if s == nil {
			continue // deleted meanwhile
		}
		if s.Tools, err = r.rereadTools(ctx, id, toolStmt, partStmt, newTools[id]); err != nil {
			return err
		}
		if err := r.finish(ctx, d, s); err != nil {
			return err
		}
		next[id] = s
	}
	return nil
}

// readSessionRow reads one session's row with the statement one (by id);
// nil when the row is gone.
func (r *dbReader) readSessionRow(ctx context.Context, one *sql.Stmt, id string) (*sessionData, error) {
	rows, err := one.QueryContext(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("read session %s: %w", id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, nil
	}
	return r.scanSession(rows)
}

// rereadTools reads a changed session's in-flight tool calls: all of them,
// with toolStmt (by session), for a session seen for the first time; for a
// known one, its new in-flight rows (fresh) and, with partStmt (by id), the
// rows that were in flight.
func (r *dbReader) rereadTools(ctx context.Context, id string, toolStmt, partStmt *sql.Stmt, fresh []toolCall) ([]toolCall, error) {
	old := r.sessions[id]
	if old == nil {
		trows, err := toolStmt.QueryContext(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("read parts of %s: %w", id, err)
		}
		tools, err := r.scanTools(trows)
		if err != nil {
			return nil, err
		}
		return tools[id], nil
	}
	var out []toolCall
	seen := map[string]bool{}
	for _, t := range fresh {
		seen[t.ID] = true
		out = append(out, t)
	}
	for _, t := range old.Tools {
		if seen[t.ID] {
			continue
		}
		prows, err := partStmt.QueryContext(ctx, t.ID)
		if err != nil {
			return nil, fmt.Errorf("read part %s: %w", t.ID, err)
		}
		tools, err := r.scanTools(prows)
		if err != nil {
			return nil, err
		}
		out = append(out, tools[id]...)
	}
	return out, nil
}

func queryStrings(ctx context.Context, conn *sql.Conn, q string, args ...any) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query changes: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s sql.NullString
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("query changes: %w", err)
		}
		out = append(out, s.String)
	}
	return out, rows.Err()
}

func (r *dbReader) queryTools(ctx context.Context, conn *sql.Conn, q string, args ...any) (map[string][]toolCall, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read parts: %w", err)
	}
	return r.scanTools(rows)
}

// scanTools parses preselected part rows and keeps the real in-flight tool
// calls, grouped by session. It closes rows.
func (r *dbReader) scanTools(rows *sql.Rows) (map[string][]toolCall, error) {
	defer rows.Close()
	out := map[string][]toolCall{}
	for rows.Next() {
		var id, mid, sid string
		var created, updated sql.NullInt64
		var data []byte
		if err := rows.Scan(&id, &mid, &sid, &created, &updated, &data); err != nil {
			return nil, fmt.Errorf("read part row: %w", err)
		}
		p, err := parsePart(data)
		if err != nil {
			r.log.Debug("skipping unparseable part", zap.String("db", r.path), zap.String("part", id), zap.Error(err))
			continue
		}
		if !p.InFlight() {
			continue
		}
		p.ID, p.MessageID, p.SessionID = id, mid, sid
		out[sid] = append(out[sid], toolCall{ocPart: p, Created: msInt(created.Int64), Updated: msInt(updated.Int64)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read parts: %w", err)
	}
	return out, nil
}

// detailReader holds the per-session statement: a session's messages from
// the newest, each with the latest time_updated among its parts (computed
// only for the rows stepped over, which are few), so a session costs one
// query and one read transaction.
type detailReader struct {
	msgs *sql.Stmt
}

func newDetailReader(ctx context.Context, conn *sql.Conn) (*detailReader, error) {
	msgs, err := conn.PrepareContext(ctx, `SELECT id, time_updated, data, (SELECT max(time_updated) FROM part WHERE part.message_id = message.id)
		FROM message WHERE session_id = ? ORDER BY time_created DESC, id DESC`)
	if err != nil {
		return nil, fmt.Errorf("read messages: %w", err)
	}
	return &detailReader{msgs: msgs}, nil
}

func (d *detailReader) close() { d.msgs.Close() }

// read finds the session's last assistant message, walking its messages
// from the newest, and the latest write among them and the parts of that
// last assistant message.
func (d *detailReader) read(ctx context.Context, s *sessionData, log *zap.Logger) error {
	rows, err := d.msgs.QueryContext(ctx, s.ID)
	if err != nil {
		return fmt.Errorf("read messages of %s: %w", s.ID, err)
	}
	s.LastAssistant = nil
	s.drift = kit.Seen{}
	for n := 0; n < maxAssistantScan && rows.Next(); n++ {
		var id string
		var upd, partsUpd sql.NullInt64
		var data []byte
		if err := rows.Scan(&id, &upd, &data, &partsUpd); err != nil {
			rows.Close()
			return fmt.Errorf("read message row of %s: %w", s.ID, err)
		}
		s.touch(msInt(upd.Int64))
		m, err := parseMessage(data)
		messageDrift(&s.drift, m, err)
		if err != nil {
			log.Debug("skipping unparseable message", zap.String("session", s.ID), zap.String("message", id), zap.Error(err))
			continue
		}
		if m.Assistant() {
			m.ID, m.SessionID = id, s.ID
			s.LastAssistant = &m
			s.touch(msInt(partsUpd.Int64))
			break
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("read messages of %s: %w", s.ID, err)
	}
	return ctx.Err()
}

// readOnly runs fn on a short read-only connection to the database at
// path whose schema has been checked: the one-off lookups (does a session
// exist, its first prompt, its in-flight rows) share the opening, the check
// and the closing.
func readOnly(ctx context.Context, path string, busy time.Duration, fn func(*sql.Conn) error) error {
	db, conn, err := openRO(ctx, path, busy)
	if err != nil {
		return err
	}
	defer db.Close()
	defer conn.Close()
	if _, err := checkSchema(ctx, conn, path); err != nil {
		return err
	}
	return fn(conn)
}

// sessionExists looks one id up in a database: true/false, or an error
// when the database could not answer.
func sessionExists(ctx context.Context, path string, busy time.Duration, id string) (bool, error) {
	found := false
	err := readOnly(ctx, path, busy, func(conn *sql.Conn) error {
		var one int
		err := conn.QueryRowContext(ctx, "SELECT 1 FROM session WHERE id = ?", id).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return explain(err)
		}
		found = true
		return nil
	})
	return found, err
}

// firstPrompt reads a session's first user message's text, as `opencode
// run <message>` writes it: "" when the session has no user message yet or
// its first message holds no text. Only the first message and its parts are
// read.
func firstPrompt(ctx context.Context, path string, busy time.Duration, id string) (string, error) {
	var text string
	err := readOnly(ctx, path, busy, func(conn *sql.Conn) (err error) {
		text, err = firstPromptOn(ctx, conn, id)
		return err
	})
	return text, err
}

func firstPromptOn(ctx context.Context, conn *sql.Conn, id string) (string, error) {
	var msgID, msgData string
	err := conn.QueryRowContext(ctx, "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id LIMIT 1", id).Scan(&msgID, &msgData)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil
	case err != nil:
		return "", explain(err)
	}
	var m struct {
		Role string `json:"role"`
	}
	if json.Unmarshal([]byte(msgData), &m) != nil || m.Role != "user" {
		return "", nil
	}
	rows, err := conn.QueryContext(ctx, "SELECT data FROM part WHERE message_id = ? ORDER BY time_created, id", msgID)
	if err != nil {
		return "", explain(err)
	}
	defer rows.Close()
	for rows.Next() {
		var data string
		if err := rows.Scan(&data); err != nil {
			return "", explain(err)
		}
		var p struct {
			Type      string `json:"type"`
			Text      string `json:"text"`
			Synthetic bool   `json:"synthetic"`
		}
		if json.Unmarshal([]byte(data), &p) == nil && p.Type == "text" && !p.Synthetic && p.Text != "" {
			return p.Text, nil
		}
	}
	return "", explain(rows.Err())
}
