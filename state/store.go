// Package state is sessiond's store: the session records, the event log and
// the schema version, kept in one bbolt file. It is the only package that
// touches bbolt, so every durability rule lives here: a change and its
// events commit in one transaction, event sequence numbers never repeat or
// go back, and a client is told about a change only after it committed.
//
// The bucket tree (schema version 4):
//
//	v1/
//	├── meta/
//	│   └── schema   -> big-endian uint32 schema version
//	├── sessions/
//	│   └── <id>     -> JSON session.Record (with "v", the record version)
//	├── upstream/    (since schema 2)
//	│   └── <agent> "\x00" <upstream id> -> <id>
//	├── events/      (bucket sequence = last event seq ever assigned)
//	│   └── <seq>    -> JSON session.Event; big-endian uint64 key
//	├── adapters/    (since schema 3)
//	│   └── <agent>/
//	│       └── <input> -> what the adapter learned of it, in its own format
//	└── sends/       (since schema 4)
//	    └── <id>     -> JSON session.Send: a prompt queued for a session
//
// Schema changes are ordered migrations (see migrations in schema.go), all
// run in one write transaction at Open. Version 1 had no upstream index;
// migration 2 builds it from the records. Migration 3 adds adapters/, a
// cache: losing it costs one re-read of every input, never a wrong status.
//
// Values are decoded inside the transaction that read them; no byte slice
// owned by bbolt outlives its transaction.
package state

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"go.uber.org/zap"

	"github.com/sessiond/sessiond/session"
)

// ErrLocked is the errors.Is target for "another sessiond holds the store",
// so the daemon can exit with its distinct code instead of restart-looping.
var ErrLocked = errors.New("store is locked by another sessiond")

// lockedError is returned by Open when the store's file lock could not be
// taken within Options.Timeout. It names the file so the user knows which
// daemon to look for.
type lockedError struct {
	// Path is the store file another process holds.
	Path string
}

// Error says which file is held and that the lock wait timed out.
func (e *lockedError) Error() string {
	return fmt.Sprintf("another sessiond holds %s (store lock timed out)", e.Path)
}

// Is makes errors.Is(err, ErrLocked) true for a *lockedError.
func (e *lockedError) Is(target error) bool { return target == ErrLocked }

// ErrNotFound means no session matches the id or reference asked for; the
// API turns it into a 404 rather than a server error.
var ErrNotFound = errors.New("session not found")

// AmbiguousError is returned by Lookup when a reference (a prefix) matches
// several sessions, so the caller can show the user which ones.
type AmbiguousError struct {
	// Ref is the reference the user gave.
	Ref string
	// Candidates are the ids of every matching session, sorted.
	Candidates []string
}

// Error lists the candidates so the user can pick a longer reference.
func (e *AmbiguousError) Error() string {
	return fmt.Sprintf("%q matches %d sessions: %s", e.Ref, len(e.Candidates), strings.Join(e.Candidates, ", "))
}

// ErrConflict means the (agent, upstream id) pair is already recorded for
// another session: the pair is unique, so one upstream conversation never
// becomes two sessiond sessions.
var ErrConflict = errors.New("upstream id already recorded")

// ErrIDInUse is returned by Create when the record carries an id another
// session already has; a caller that chose the id at random picks again.
var ErrIDInUse = errors.New("session id already in use")

// Defaults of Options, chosen for a per-user daemon.
const (
	defaultTimeout     = time.Second
	defaultMaxEvents   = 100000
	defaultMaxEventAge = 30 * 24 * time.Hour
)

// initialMmapSize is bbolt's first mapping of the store: 10,000 sessions
// and a full event log take about 40 MiB.
const initialMmapSize = 128 << 20

// recordVersion is the value of session.Record.V this package writes, so a
// later version can tell which record layout it reads.
const recordVersion = 1

// Options tune Open. The zero value is usable.
type Options struct {
	// Timeout bounds the wait for the file lock, so a second sessiond fails
	// fast with ErrLocked instead of hanging. Default 1s.
	Timeout time.Duration
	// Logger receives the store's logs; nil means zap.NewNop().
	Logger *zap.Logger
	// MaxEvents bounds the event log by count. Default 100000.
	MaxEvents int
	// MaxEventAge bounds the event log by age. Default 30 days.
	MaxEventAge time.Duration
	// Now is the clock for timestamps and retention, replaceable in tests.
	// Default time.Now.
	Now func() time.Time
}

// Store is sessiond's open store. It is safe for concurrent use: bbolt
// serializes writers and gives readers consistent snapshots.
type Store struct {
	db        *bolt.DB
	path      string
	recovered string
	log       *zap.Logger
	now       func() time.Time
	maxEvents int
	maxAge    time.Duration
	pruneStep uint64

	mu      sync.Mutex
	changed chan struct{}

	// writeMu serializes Batches (see Batch). cache holds every record as
	// last committed, once List first loaded it: state is the only writer,
	// so a pass need not decode every record from bbolt each time.
	writeMu sync.Mutex
	cacheMu sync.RWMutex
	cache   map[string]*session.Record
	// sorted is the cache in List's order, built on demand and dropped on
	// every write; ListShared hands it out.
	sorted []*session.Record

	closeOnce sync.Once
	closeErr  error

	commits commitStats
}

// commitStats count the store's write transactions and their time, from
// Batch's start to the commit's end (fsync included).
type commitStats struct {
	n, nanos atomic.Uint64
}

func (c *commitStats) observe(d time.Duration) {
	c.n.Add(1)
	c.nanos.Add(uint64(d))
}

// CommitStats are the write transactions of Batch (every session change),
// and the time they took, fsync included: where a death's latency goes
// once it is noticed.
type CommitStats struct {
	Commits uint64
	Time    time.Duration
}

// CommitStats returns the counts so far.
func (s *Store) CommitStats() CommitStats {
	return CommitStats{Commits: s.commits.n.Load(), Time: time.Duration(s.commits.nanos.Load())}
}

// Open opens (creating if needed) the store file at path, takes its lock,
// checks it and migrates it to the current schema.
//
// A lock timeout returns an error that is ErrLocked (errors.Is) and names
// the file. An OS error (permission, a missing or unreadable directory) is
// returned as is and the file is left alone. A file bbolt cannot read or
// that fails the consistency check is renamed to <path>.corrupt-<UTC time>,
// logged at Error level, and a fresh store is started; Recovered returns
// where the file went. A file whose schema is newer than this build knows
// is refused and left untouched.
func Open(path string, opts Options) (*Store, error) {
	s := &Store{
		path:      path,
		log:       opts.Logger,
		now:       opts.Now,
		maxEvents: opts.MaxEvents,
		maxAge:    opts.MaxEventAge,
		changed:   make(chan struct{}),
	}
	if s.log == nil {
		s.log = zap.NewNop()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.maxEvents <= 0 {
		s.maxEvents = defaultMaxEvents
	}
	if s.maxAge <= 0 {
		s.maxAge = defaultMaxEventAge
	}
	// Prune about every 256 appends, more often when the bound is small so
	// the log never runs far past it.
	s.pruneStep = uint64(min(256, max(1, s.maxEvents/4)))
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultTimeout
	}

	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	err := s.openAndMigrate(timeout)
	var ce *corruptError
	if !errors.As(err, &ce) {
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	moved, rerr := moveAside(path, s.now())
	if rerr != nil {
		return nil, fmt.Errorf("open store %s: %w (and moving it aside failed: %v)", path, err, rerr)
	}
	s.log.Error("store file is corrupt: moved it aside and started a fresh store; sessions will be rediscovered",
		zap.String("path", path), zap.String("moved_to", moved), zap.Error(ce.err))
	s.recovered = moved
	if err := s.openAndMigrate(timeout); err != nil {
		return nil, fmt.Errorf("open fresh store %s after moving the corrupt one to %s: %w", path, moved, err)
	}
	return s, nil
}

// openAndMigrate opens and checks the file, then brings its schema up to
// date. A *corruptError means the file should be moved aside.
func (s *Store) openAndMigrate(timeout time.Duration) error {
	db, err := openChecked(s.path, timeout)
	if err != nil {
		return err
	}
	s.db = db
	if err := s.migrate(); err != nil {
		db.Close()
		s.db = nil
		var ce *corruptError
		if errors.As(err, &ce) {
			return err
		}
		return fmt.Errorf("open store %s: %w", s.path, err)
	}
	return nil
}

// corruptError marks an Open failure that means the file's content is bad,
// as opposed to a lock or OS error; only these move the file aside.
type corruptError struct{ err error }

func (e *corruptError) Error() string { return e.err.Error() }
func (e *corruptError) Unwrap() error { return e.err }

// openChecked opens path with bbolt and runs the consistency check. Errors
// are a *lockedError, an OS error, or a *corruptError.
func openChecked(path string, timeout time.Duration) (db *bolt.DB, err error) {
	// Keep the file, so a panic inside bolt.Open (a corrupt freelist page)
	// does not leak the descriptor and with it the lock.
	var file *os.File
	openFile := func(name string, flag int, perm os.FileMode) (*os.File, error) {
		f, err := os.OpenFile(name, flag, perm)
		file = f
		return f, err
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = &corruptError{fmt.Errorf("bbolt panicked opening the file: %v", r)}
				if file != nil {
					file.Close()
				}
			}
		}()
		// InitialMmapSize: a first start that writes thousands of records
		// would otherwise remap the file each time it doubles, and every
		// remap copies each open node out of the old mapping. It is
		// address space, not memory.
		db, err = bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout, OpenFile: openFile, InitialMmapSize: initialMmapSize})
	}()
	if err != nil {
		var ce *corruptError
		switch {
		case errors.As(err, &ce):
			return nil, err
		case errors.Is(err, berrors.ErrTimeout):
			return nil, &lockedError{Path: path}
		case isOSError(err):
			return nil, fmt.Errorf("open store %s: %w", path, err)
		default:
			return nil, &corruptError{fmt.Errorf("open store %s: %w", path, err)}
		}
	}
	if err := check(db); err != nil {
		db.Close()
		return nil, &corruptError{fmt.Errorf("check store %s: %w", path, err)}
	}
	return db, nil
}

// isOSError reports whether err came from the operating system (permission,
// missing directory, I/O) rather than from the file's content.
func isOSError(err error) bool {
	var pe *fs.PathError
	var se *os.SyscallError
	var errno syscall.Errno
	return errors.As(err, &pe) || errors.As(err, &se) || errors.As(err, &errno)
}

// check walks every bucket and value, then runs bbolt's own consistency
// check. The walk runs here, with faults turned into panics and recovered,
// because a junk page offset can point outside the mapping; bbolt's Check
// runs in a goroutine of its own where such a fault would kill the process.
func check(db *bolt.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("reading pages panicked: %v", r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return db.View(func(tx *bolt.Tx) error {
		var n int
		if err := tx.ForEach(func(name []byte, b *bolt.Bucket) error { return walk(b, &n) }); err != nil {
			return err
		}
		var errs []string
		for e := range tx.Check() {
			errs = append(errs, e.Error())
		}
		if len(errs) > 0 {
			if len(errs) > 5 {
				errs = append(errs[:5], fmt.Sprintf("and %d more", len(errs)-5))
			}
			return errors.New(strings.Join(errs, "; "))
		}
		return nil
	})
}

// walk reads every key and value below b. Reading (not just slicing) is
// the point: a junk offset faults here, where the fault is recovered.
func walk(b *bolt.Bucket, n *int) error {
	return b.ForEach(func(k, v []byte) error {
		*n += int(touch(k)) + int(touch(v))
		if v == nil {
			if c := b.Bucket(k); c != nil {
				return walk(c, n)
			}
		}
		return nil
	})
}

// touch reads a byte of every 512 and the last one, enough to fault on
// any unmapped page the slice spans.
func touch(b []byte) (x byte) {
	for i := 0; i < len(b); i += 512 {
		x ^= b[i]
	}
	if len(b) > 0 {
		x ^= b[len(b)-1]
	}
	return x
}

// moveAside renames a corrupt store file out of the way, keeping it for
// inspection, and returns the new path.
func moveAside(path string, now time.Time) (string, error) {
	base := path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	dst := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
			break
		}
		dst = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(path, dst); err != nil {
		return "", err
	}
	return dst, nil
}

// ReleaseMapped gives back the resident pages of the mapped store file.
// bbolt reads through a shared mapping of the file, and each page read
// stays in the process's resident set: a first start that creates 12,000
// sessions touched ~20 MiB of it, the largest share of RSS that is not
// heap, though every record is decoded in the cache by then. The pages
// stay in the page cache and come back on the next access. Called after
// the startup pass. The read transaction keeps bbolt from remapping the
// file meanwhile.
func (s *Store) ReleaseMapped() error {
	return s.db.View(func(tx *bolt.Tx) error {
		return releaseMapped(s.db.Info().Data, uintptr(tx.Size()))
	})
}

// Close releases the file and its lock. Calling it again is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("close store %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// Path is the store file, for health reports and messages.
func (s *Store) Path() string { return s.path }

// Recovered returns where a corrupt store file was moved at Open, or "" if
// the file was sound, so health reports can tell the user.
func (s *Store) Recovered() string { return s.recovered }

// Changed returns a channel that is closed after the next committed
// transaction that appended events. Take it before reading events, then
// wait on it, and a commit in between is never missed. It is a broadcast:
// call Changed again for the commit after that.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// notify wakes every Changed waiter. Called only after a commit succeeded,
// so a woken reader always sees the change (invariant 5 of docs/design.md).
func (s *Store) notify() {
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}
