package opencode

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// What OpenCode itself writes when it abandons a tool call or a turn
// (session/processor.ts on 1.18.33): a repaired session looks to every
// OpenCode client exactly like one OpenCode aborted.
const (
	abortedToolError = "Tool execution aborted"
	abortedMsgName   = "MessageAbortedError"
	abortedMsgText   = "The agent process died mid turn; marked aborted by sessiond"
)

// flightPart is a tool part row left pending or running.
type flightPart struct {
	ocPart
	Created int64 // time_created, ms
	Updated int64 // time_updated, ms
	Data    []byte
}

// flightMsg is an assistant message row without time.completed.
type flightMsg struct {
	ID      string
	Updated int64
	Data    []byte
}

// flight is what one session has in flight in a database.
type flight struct {
	parts []flightPart
	msgs  []flightMsg
	// lastWrite is the latest time_updated of the session row and its
	// message and part rows.
	lastWrite time.Time
	// found is false when the session has no row.
	found bool
}

func (f *flight) empty() bool { return len(f.parts) == 0 && len(f.msgs) == 0 }

// describe says what is in flight, for a step's detail.
func (f *flight) describe() string {
	var b []string
	if n := len(f.parts); n > 0 {
		b = append(b, plural(n, "tool part")+" pending/running")
	}
	if n := len(f.msgs); n > 0 {
		b = append(b, plural(n, "assistant message")+" without time.completed")
	}
	return strings.Join(b, ", ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// readFlight reads a session's in-flight rows. It runs on the read-only
// connection for planning and again inside the write transaction, so what
// is written is what the locked database shows.
func readFlight(ctx context.Context, conn *sql.Conn, sessionID string) (*flight, error) {
	f := &flight{}
	var upd sql.NullInt64
	err := conn.QueryRowContext(ctx, "SELECT time_updated FROM session WHERE id = ?", sessionID).Scan(&upd)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return f, nil
	case err != nil:
		return nil, explain(fmt.Errorf("read session %s: %w", sessionID, err))
	}
	f.found = true
	last := upd.Int64
	for _, q := range []string{"SELECT max(time_updated) FROM message WHERE session_id = ?", "SELECT max(time_updated) FROM part WHERE session_id = ?"} {
		var m sql.NullInt64
		if err := conn.QueryRowContext(ctx, q, sessionID).Scan(&m); err != nil {
			return nil, explain(fmt.Errorf("read last write of %s: %w", sessionID, err))
		}
		last = max(last, m.Int64)
	}
	f.lastWrite = msInt(last)

	rows, err := conn.QueryContext(ctx, "SELECT id, message_id, time_created, time_updated, data FROM part WHERE session_id = ? AND "+inFlightFilter+" ORDER BY id", sessionID)
	if err != nil {
		return nil, explain(fmt.Errorf("read parts of %s: %w", sessionID, err))
	}
	for rows.Next() {
		var fp flightPart
		var created, updated sql.NullInt64
		if err := rows.Scan(&fp.ID, &fp.MessageID, &created, &updated, &fp.Data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read part row of %s: %w", sessionID, err)
		}
		p, err := parsePart(fp.Data)
		if err != nil || !p.InFlight() {
			continue // the filter's literal matched inside other content
		}
		p.ID, p.MessageID, p.SessionID = fp.ID, fp.MessageID, sessionID
		fp.ocPart, fp.Created, fp.Updated = p, created.Int64, updated.Int64
		f.parts = append(f.parts, fp)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, explain(fmt.Errorf("read parts of %s: %w", sessionID, err))
	}

	// Every message is looked at, not only the last: an earlier crash may
	// have left an older turn open too. Parsing in Go rather than with
	// json_extract keeps one malformed row from failing the whole query.
	rows, err = conn.QueryContext(ctx, "SELECT id, time_updated, data FROM message WHERE session_id = ? ORDER BY time_created, id", sessionID)
	if err != nil {
		return nil, explain(fmt.Errorf("read messages of %s: %w", sessionID, err))
	}
	for rows.Next() {
		var fm flightMsg
		var updated sql.NullInt64
		if err := rows.Scan(&fm.ID, &updated, &fm.Data); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read message row of %s: %w", sessionID, err)
		}
		m, err := parseMessage(fm.Data)
		if err != nil || !m.Open() {
			continue
		}
		fm.Updated = updated.Int64
		f.msgs = append(f.msgs, fm)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, explain(fmt.Errorf("read messages of %s: %w", sessionID, err))
	}
	return f, nil
}

// readFlightRO checks the schema and reads a session's in-flight rows on
// a short read-only connection.
func (a *Adapter) readFlightRO(ctx context.Context, dbPath, sessionID string) (*flight, error) {
	db, conn, err := openRO(ctx, dbPath, a.cfg.BusyTimeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dbPath, err)
	}
	defer db.Close()
	defer conn.Close()
	if _, err := checkSchema(ctx, conn, dbPath); err != nil {
		return nil, err
	}
	f, err := readFlight(ctx, conn, sessionID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dbPath, err)
	}
	return f, nil
}

// decodeObject decodes a JSON object keeping numbers as written, so
// millisecond times survive a round trip unchanged (float64 would turn
// 1732000000000 into 1.732e+12).
func decodeObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("not a JSON object")
	}
	return m, nil
}

// interruptedState is the tool state OpenCode writes when it abandons a
// call: status error, "Tool execution aborted", metadata.interrupted, the
// input and start time kept, time.end now. Built from the part's JSON
// (the data column or a server's part object).
func interruptedState(part map[string]any, created, now int64) (map[string]any, error) {
	st, ok := part["state"].(map[string]any)
	if !ok {
		return nil, errors.New("tool part has no state object (OpenCode's part format changed?)")
	}
	input := st["input"]
	if input == nil {
		input = map[string]any{}
	}
	md, _ := st["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
	}
	md["interrupted"] = true
	var start any = json.Number(strconv.FormatInt(created, 10))
	if tm, ok := st["time"].(map[string]any); ok && tm["start"] != nil {
		start = tm["start"]
	}
	return map[string]any{
		"status":   "error",
		"input":    input,
		"error":    abortedToolError,
		"metadata": md,
		"time":     map[string]any{"start": start, "end": now},
	}, nil
}

// offlineStep is the single step that reports why the offline repair
// cannot run now.
func offlineStep(dbPath, detail string) session.Step {
	return session.StepPending("repair database offline", dbPath, detail)
}

// offline is rung 2 of the ladder: no process holds the database, so
// sessiond may write it. It backs the database up, then in one BEGIN
// IMMEDIATE transaction of milliseconds marks the in-flight tool parts
// and messages aborted, as OpenCode would have. f is the plan's read; the
// transaction reads again and writes what the locked database shows.
func (a *Adapter) offline(ctx context.Context, dbPath, sessionID string, f *flight, apply bool, why string) ([]session.Step, error) {
	// Holders first: a live process is the reason that lasts, and the one
	// the user can act on.
	if held, detail := a.held(dbPath); held {
		if why != "" {
			detail += "; " + why
		}
		return []session.Step{offlineStep(dbPath, "pending: "+detail+"; "+f.describe()+"; nothing written (a live OpenCode rewrites rows from memory and would undo an edit)")}, nil
	}
	now := a.cfg.Now()
	if age := now.Sub(f.lastWrite); age < a.cfg.RepairGrace {
		return []session.Step{offlineStep(dbPath,
			fmt.Sprintf("pending: %s; the session was written %s ago, and is repaired only once still for %s", f.describe(), age.Round(time.Second), a.cfg.RepairGrace))}, nil
	}
	backup := session.StepPlanned("back up database", dbPath, "VACUUM INTO "+a.backupDir(dbPath))
	if a.cfg.BackupDir == "" {
		return []session.Step{backup.Failed(errors.New("no backup directory configured: sessiond never writes OpenCode's database without a backup"))}, nil
	}
	if !apply {
		return append([]session.Step{backup}, adapters.DryRun(flightPlan(f, nil))...), nil
	}
	return a.applyOffline(ctx, dbPath, sessionID, backup)
}

// held reports whether another process holds the database open, and who.
func (a *Adapter) held(dbPath string) (bool, string) {
	return a.holders(dbPath, nil)
}

// heldByOthers is held, with the known OpenCode servers left out.
func (a *Adapter) heldByOthers(dbPath string) (bool, string) {
	servers := map[int]bool{}
	for _, s := range a.lastServers() {
		servers[s.Owner.PID] = true
	}
	return a.holders(dbPath, servers)
}

func (a *Adapter) holders(dbPath string, except map[int]bool) (bool, string) {
	all, err := dbHolders(a.cfg.ProcRoot, dbPath, os.Getpid())
	if err != nil {
		return true, "cannot tell which processes hold the database open (" + err.Error() + ")"
	}
	var pids []int
	for _, p := range all {
		if !except[p] {
			pids = append(pids, p)
		}
	}
	if len(pids) == 0 {
		return false, ""
	}
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return true, "held by pid " + strings.Join(s, ", ")
}

// flightPlan lists one step per in-flight row, each written by w, the
// repair's transaction. w is nil for a dry run, which runs no step.
func flightPlan(f *flight, w *rowWriter) []adapters.PlannedStep {
	var plan []adapters.PlannedStep
	for _, p := range f.parts {
		d := fmt.Sprintf("tool %s (call %s, message %s) is %s: set to error %q, metadata.interrupted, time.end", orDash(p.Tool), orDash(p.CallID), p.MessageID, p.Status, abortedToolError)
		plan = append(plan, adapters.Plan("mark tool part interrupted", p.ID, d,
			func(ctx context.Context) error { return w.interruptPart(ctx, p) }))
	}
	for _, m := range f.msgs {
		plan = append(plan, adapters.Plan("complete assistant message", m.ID, "set time.completed and error "+abortedMsgName,
			func(ctx context.Context) error { return w.abortMessage(ctx, m) }))
	}
	return plan
}

// writeDSN opens the database read-write with a short busy timeout: a
// repair waits milliseconds for the lock, never the 5 s that would make
// OpenCode fail, and comes back later instead.
func writeDSN(path string, busy time.Duration) string {
	u := url.URL{Scheme: "file", OmitHost: true, Path: path}
	return u.String() + "?mode=rw&_pragma=busy_timeout(" + strconv.FormatInt(busy.Milliseconds(), 10) + ")"
}

func isBusy(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "SQLITE_BUSY") || strings.Contains(msg, "database is locked")
}

// applyOffline backs up and writes. The write connection is its own,
// separate from the adapter's read-only ones, and closed before return.
func (a *Adapter) applyOffline(ctx context.Context, dbPath, sessionID string, backup session.Step) ([]session.Step, error) {
	db, err := sql.Open("sqlite", writeDSN(dbPath, a.cfg.WriteBusyTimeout))
	if err != nil {
		return nil, fmt.Errorf("open %s for writing: %w", dbPath, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("open %s for writing: %w", dbPath, explain(err))
	}
	defer conn.Close()
	// The schema is checked on the very connection that writes.
	if _, err := checkSchema(ctx, conn, dbPath); err != nil {
		return nil, err
	}
	locked := func(err error) []session.Step {
		return []session.Step{offlineStep(dbPath,
			fmt.Sprintf("pending: the database is locked by another writer past %s (%v); nothing written", a.cfg.WriteBusyTimeout, err))}
	}
	// Probe the write lock before the backup, so a locked database does
	// not leave a backup per retry and push the useful ones out.
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		if isBusy(err) {
			return locked(err), nil
		}
		return nil, fmt.Errorf("lock %s: %w", dbPath, explain(err))
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		return nil, fmt.Errorf("unlock %s: %w", dbPath, err)
	}

	path, err := a.backupTo(ctx, conn, dbPath, sessionID)
	if err != nil {
		return []session.Step{backup.Failed(err)}, nil
	}
	backup.Outcome, backup.Detail = session.OutcomeDone, "to "+path

	steps, err := a.writeTx(ctx, conn, dbPath, sessionID)
	if err != nil {
		if isBusy(err) {
			return append([]session.Step{backup}, locked(err)...), nil
		}
		return nil, err
	}
	return append([]session.Step{backup}, steps...), nil
}

// writeTx is the one short transaction. Any failure rolls everything
// back: a session is either fully repaired or untouched.
func (a *Adapter) writeTx(ctx context.Context, conn *sql.Conn, dbPath, sessionID string) (steps []session.Step, err error) {
	began := time.Now()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return nil, err
	}
	committed := false
	defer func() {
		if !committed {
			// A cancelled ctx must not keep the lock: roll back regardless.
			if _, rerr := conn.ExecContext(context.Background(), "ROLLBACK"); rerr != nil {
				a.log.Warn("rollback of an OpenCode repair failed", zap.String("db", dbPath), zap.Error(rerr))
			}
		}
	}()
	f, err := readFlight(ctx, conn, sessionID)
	if err != nil {
		return nil, err
	}
	if f.empty() {
		return []session.Step{session.StepSkipped("nothing in flight", sessionID, "repaired meanwhile")}, nil
	}
	now := a.cfg.Now()
	if age := now.Sub(f.lastWrite); age < a.cfg.RepairGrace {
		return []session.Step{offlineStep(dbPath, fmt.Sprintf("pending: written %s ago, meanwhile; nothing written", age.Round(time.Second)))}, nil
	}
	w := &rowWriter{conn: conn, nowMs: now.UnixMilli(), cutoff: now.Add(-a.cfg.RepairGrace).UnixMilli()}
	steps, err = adapters.Apply(ctx, flightPlan(f, w))
	if err != nil {
		return nil, err
	}
	// A process that opened the database since the plan could rewrite
	// these rows from memory: look once more, just before committing.
	if held, detail := a.held(dbPath); held {
		return []session.Step{offlineStep(dbPath, "pending: "+detail+" (opened meanwhile); rolled back, nothing written")}, nil
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return nil, fmt.Errorf("commit repair of %s: %w", sessionID, err)
	}
	committed = true
	a.log.Info("repaired OpenCode session offline", zap.String("db", dbPath), zap.String("session", sessionID),
		zap.Int("parts", len(f.parts)), zap.Int("messages", len(f.msgs)), zap.Duration("locked_for", time.Since(began)))
	return steps, nil
}

// rowWriter writes a repair's rows inside its transaction. A row is
// written only if its time_updated is at most cutoff: one written since
// then fails the repair, which rolls back.
type rowWriter struct {
	conn   *sql.Conn
	nowMs  int64
	cutoff int64
}

// interruptPart sets a tool part's state to the one OpenCode writes when it
// abandons a call.
func (w *rowWriter) interruptPart(ctx context.Context, p flightPart) error {
	obj, err := decodeObject(p.Data)
	if err != nil {
		return fmt.Errorf("part %s: %w", p.ID, err)
	}
	st, err := interruptedState(obj, p.Created, w.nowMs)
	if err != nil {
		return fmt.Errorf("part %s: %w", p.ID, err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	// json_set replaces only the state: every other byte of the row
	// stays as OpenCode wrote it. time_updated is left alone on purpose:
	// it is the agent's last activity, and a repair is not activity (a
	// bumped time would make sessiond see fresh writes by no owner and
	// call the session unknown for a grace period instead of stopped).
	res, err := w.conn.ExecContext(ctx, "UPDATE part SET data = json_set(data, '$.state', json(?)) WHERE id = ? AND time_updated <= ?",
		string(b), p.ID, w.cutoff)
	if err != nil {
		return fmt.Errorf("update part %s: %w", p.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("update part %s: %d rows changed, want 1", p.ID, n)
	}
	return nil
}

// abortMessage completes an assistant message with the error OpenCode
// writes when it abandons a turn.
func (w *rowWriter) abortMessage(ctx context.Context, m flightMsg) error {
	errJSON, _ := json.Marshal(map[string]any{"name": abortedMsgName, "data": map[string]any{"message": abortedMsgText}})
	obj, err := decodeObject(m.Data)
	if err != nil {
		return fmt.Errorf("message %s: %w", m.ID, err)
	}
	if _, ok := obj["time"].(map[string]any); !ok {
		return fmt.Errorf("message %s has no time object (OpenCode's message format changed?)", m.ID)
	}
	// json_insert keeps an error the message already has: the first
	// cause is the truer one.
	res, err := w.conn.ExecContext(ctx, "UPDATE message SET data = json_insert(json_set(data, '$.time.completed', ?), '$.error', json(?)) WHERE id = ? AND time_updated <= ?",
		w.nowMs, string(errJSON), m.ID, w.cutoff)
	if err != nil {
		return fmt.Errorf("update message %s: %w", m.ID, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("update message %s: %d rows changed, want 1", m.ID, n)
	}
	return nil
}

// backupDir is where one database's backups go: a directory per database
// name, so retention counts each database's own backups.
func (a *Adapter) backupDir(dbPath string) string {
	return filepath.Join(a.cfg.BackupDir, filepath.Base(dbPath))
}

// backupTo writes a consistent copy with VACUUM INTO (it reads through the
// WAL), to a temporary name renamed once complete, so a kill -9 mid backup
// never leaves a truncated file that looks like a backup. Then it prunes
// to the newest BackupKeep.
func (a *Adapter) backupTo(ctx context.Context, conn *sql.Conn, dbPath, sessionID string) (string, error) {
	dir := a.backupDir(dbPath)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create backup dir: %w", err)
	}
	name := a.cfg.Now().UTC().Format("20060102T150405.000000000Z") + "-" + sessionID + ".db"
	final := filepath.Join(dir, name)
	tmp := final + ".tmp"
	os.Remove(tmp)
	if _, err := conn.ExecContext(ctx, "VACUUM INTO ?", tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("VACUUM INTO %s: %w", tmp, explain(err))
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("backup %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("backup %s: %w", final, err)
	}
	a.pruneBackups(dir)
	return final, nil
}

// pruneBackups keeps the newest BackupKeep backups of a directory (names
// start with their UTC time, so they sort by age) and removes leftovers of
// interrupted backups.
func (a *Adapter) pruneBackups(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var names []string
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, ".db.tmp"):
			// Left by a backup killed mid way; a fresh one may be in
			// progress in another sessiond's test, so only old ones go.
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 10*time.Minute {
				os.Remove(filepath.Join(dir, n))
			}
		case strings.HasSuffix(n, ".db"):
			names = append(names, n)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(names)))
	for _, n := range names[min(len(names), a.cfg.BackupKeep):] {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			a.log.Warn("prune OpenCode backup", zap.String("path", filepath.Join(dir, n)), zap.Error(err))
		}
	}
}
