package state

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/sessiond/sessiond/session"
)

func TestOpenCreatesPrivateFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "deeper", "sessiond.db")
	st := openT(t, path, Options{})
	if st.Path() != path || st.Recovered() != "" {
		t.Fatalf("Path %q, Recovered %q", st.Path(), st.Recovered())
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, want 0600", fi.Mode().Perm())
	}
	di, _ := os.Stat(filepath.Dir(path))
	if di.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v, want 0700", di.Mode().Perm())
	}
	if v := schemaOf(t, st); v != currentSchema || currentSchema != 4 {
		t.Fatalf("schema %d, want %d", v, currentSchema)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func schemaOf(t *testing.T, st *Store) uint32 {
	t.Helper()
	var v uint32
	if err := st.db.View(func(tx *bolt.Tx) (err error) { v, err = readSchema(tx); return err }); err != nil {
		t.Fatal(err)
	}
	return v
}

func checkLocked(t *testing.T, path string, err error) {
	t.Helper()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v, want ErrLocked", err)
	}
	var le *lockedError
	if !errors.As(err, &le) || le.Path != path {
		t.Fatalf("second open: %#v, want *lockedError for %s", err, path)
	}
	if want := "another sessiond holds " + path + " (store lock timed out)"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
}

func TestSecondOpenInProcessIsLocked(t *testing.T) {
	path := dbPath(t)
	st := openT(t, path, Options{})
	start := time.Now()
	st2, err := Open(path, Options{Timeout: 100 * time.Millisecond})
	if err == nil {
		st2.Close()
	}
	checkLocked(t, path, err)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("lock wait took %v", d)
	}
	st.Close()
	openT(t, path, Options{Timeout: 100 * time.Millisecond})
}

func TestOpenLockedBySubprocess(t *testing.T) {
	path := dbPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"=hold", envDB+"="+path)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("child said %q, %v", line, err)
	}
	_, err = Open(path, Options{Timeout: 100 * time.Millisecond})
	checkLocked(t, path, err)

	stdin.Close() // the child closes the store and exits
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	openT(t, path, Options{Timeout: 100 * time.Millisecond})
}

// writeFixture writes a store of the given schema version with raw bbolt
// calls, the way an older (or newer) sessiond left it: v1/meta, v1/sessions
// and v1/events, and no upstream index.
func writeFixture(t *testing.T, path string, schema uint32, recs []*session.Record, events int) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		root, err := tx.CreateBucket([]byte("v1"))
		if err != nil {
			return err
		}
		meta, _ := root.CreateBucket([]byte("meta"))
		if err := meta.Put([]byte("schema"), binary.BigEndian.AppendUint32(nil, schema)); err != nil {
			return err
		}
		sessions, _ := root.CreateBucket([]byte("sessions"))
		for _, r := range recs {
			b, _ := json.Marshal(r)
			if err := sessions.Put([]byte(r.ID), b); err != nil {
				return err
			}
		}
		evb, _ := root.CreateBucket([]byte("events"))
		for range events {
			seq, _ := evb.NextSequence()
			b, _ := json.Marshal(session.Event{Seq: seq, Type: session.EventCreated, Time: time.Now()})
			if err := evb.Put(binary.BigEndian.AppendUint64(nil, seq), b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMigrateFromV1(t *testing.T) {
	path := dbPath(t)
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	v1 := func(id, agent, up string, at time.Duration) *session.Record {
		r := rec(agent, up)
		r.V, r.ID, r.CreatedAt, r.UpdatedAt = 1, id, t0.Add(at), t0.Add(at)
		return r
	}
	writeFixture(t, path, 1, []*session.Record{
		v1("aaaaaaaaaaaa", "claude", "3f2a9c1e", 0),
		v1("bbbbbbbbbbbb", "opencode", "ses_1", 1),
		v1("cccccccccccc", "opencode", "", 2), // launched, no upstream id yet
		// Version 1 did not enforce uniqueness: the earlier record keeps it.
		v1("dddddddddddd", "claude", "dup", 5),
		v1("eeeeeeeeeeee", "claude", "dup", 4),
	}, 7)

	logs, seen := observer.New(zapcore.InfoLevel)
	st := openT(t, path, Options{Logger: zap.New(logs)})
	if v := schemaOf(t, st); v != currentSchema {
		t.Fatalf("schema after migration %d, want %d", v, currentSchema)
	}
	if seen.FilterMessage("migrated store schema").Len() != 1 {
		t.Errorf("migration not logged: %v", seen.All())
	}
	for _, tc := range []struct{ agent, up, id string }{
		{"claude", "3f2a9c1e", "aaaaaaaaaaaa"},
		{"opencode", "ses_1", "bbbbbbbbbbbb"},
		{"claude", "dup", "eeeeeeeeeeee"},
	} {
		if r, err := st.ByUpstream(tc.agent, tc.up); err != nil || r.ID != tc.id {
			t.Errorf("ByUpstream(%s, %s) = %v, %v; want %s", tc.agent, tc.up, r, err, tc.id)
		}
	}
	if r, err := st.Lookup("ses_1"); err != nil || r.ID != "bbbbbbbbbbbb" {
		t.Errorf("Lookup by upstream after migration: %v, %v", r, err)
	}
	if err := st.Create(rec("opencode", "ses_1"), session.Event{}); !errors.Is(err, ErrConflict) {
		t.Errorf("the migrated index does not guard uniqueness: %v", err)
	}
	r := mustCreate(t, st, rec("opencode", "ses_2"))
	if evs, _ := st.Events(7, 0); len(evs) != 1 || evs[0].Seq != 8 || evs[0].SessionID != r.ID {
		t.Fatalf("events after migration: %+v", evs)
	}
	st.Close()

	// Reopening runs nothing again.
	logs, seen = observer.New(zapcore.InfoLevel)
	st = openT(t, path, Options{Logger: zap.New(logs)})
	if seen.FilterMessage("migrated store schema").Len() != 0 {
		t.Error("migration ran twice")
	}
	if r, err := st.ByUpstream("opencode", "ses_2"); err != nil || r.ID == "" {
		t.Fatal(err)
	}
}

func TestOpenAlignsEventSequence(t *testing.T) {
	path := dbPath(t)
	writeFixture(t, path, 2, nil, 3)
	// A writer that put a key past the bucket sequence must not make seqs repeat.
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		root := tx.Bucket([]byte("v1"))
		root.CreateBucket([]byte("upstream"))
		return root.Bucket([]byte("events")).Put(binary.BigEndian.AppendUint64(nil, 100), []byte(`{"seq":100,"type":"session.action"}`))
	})
	db.Close()
	st := openT(t, path, Options{})
	err = st.Batch(func(tx *Tx) error {
		seq, err := tx.Append(session.Event{Type: session.EventAction})
		if seq != 101 {
			t.Errorf("seq %d after 100", seq)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := dbPath(t)
	writeFixture(t, path, currentSchema+1, []*session.Record{{ID: "aaaaaaaaaaaa", Agent: "claude"}}, 2)
	before, _ := os.ReadFile(path)
	st, err := Open(path, Options{})
	if err == nil {
		st.Close()
		t.Fatal("opened a store with a newer schema")
	}
	if errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "newer") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want a clear schema error naming the file", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("the newer store was modified")
	}
	if m, _ := filepath.Glob(path + ".corrupt-*"); len(m) != 0 {
		t.Fatalf("a newer store was moved aside: %v", m)
	}
}

// corruptOpen opens a corrupt file and checks it was moved aside, logged,
// and replaced by a fresh working store.
func corruptOpen(t *testing.T, path string) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	logs, seen := observer.New(zapcore.ErrorLevel)
	st := openT(t, path, Options{Logger: zap.New(logs)})
	moved := st.Recovered()
	if !regexp.MustCompile(`^` + regexp.QuoteMeta(path) + `\.corrupt-\d{8}T\d{6}Z$`).MatchString(moved) {
		t.Fatalf("Recovered() = %q, want %s.corrupt-<UTC time>", moved, path)
	}
	if kept, err := os.ReadFile(moved); err != nil || !bytes.Equal(kept, before) {
		t.Fatalf("moved file differs from the corrupt one (%v)", err)
	}
	entries := seen.All()
	if len(entries) != 1 || entries[0].Level != zapcore.ErrorLevel {
		t.Fatalf("logged %v, want one Error entry", entries)
	}
	f := entries[0].ContextMap()
	t.Logf("recovered: %v", f["error"])
	if f["path"] != path || f["moved_to"] != moved || f["error"] == nil {
		t.Fatalf("log fields %v", f)
	}
	// The fresh store works.
	r := mustCreate(t, st, rec("claude", "after-recovery"))
	if got, err := st.Lookup("after-recovery"); err != nil || got.ID != r.ID {
		t.Fatalf("fresh store: %v, %v", got, err)
	}
	if recs, _ := st.List(); len(recs) != 1 {
		t.Fatalf("fresh store holds %d records", len(recs))
	}
}

func TestCorruptGarbageMovedAside(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{100, 3 * 4096, 64 << 10} {
		path := dbPath(t)
		junk := make([]byte, size)
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(path, junk, 0o600); err != nil {
			t.Fatal(err)
		}
		corruptOpen(t, path)
	}
}

// TestCorruptPagesMovedAside overwrites pages of a valid store in use with
// junk: Open's check must catch it (or recover bbolt's panic).
func TestCorruptPagesMovedAside(t *testing.T) {
	// "leaf body" keeps the page headers and fills the element table with
	// 0xff: offsets then point far outside the mapping, which faults
	// unless the walk turns faults into panics.
	for _, kind := range []string{"leaf", "branch", "freelist", "first three", "leaf body", "leaf offsets"} {
		t.Run(kind, func(t *testing.T) {
			path := dbPath(t)
			st := openT(t, path, Options{})
			err := st.Batch(func(tx *Tx) error {
				for i := range 400 {
					r := rec("claude", "u-"+NewID())
					r.Title = strings.Repeat("t", i%50)
					if err := tx.Create(r, session.Event{Type: session.EventCreated}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// A few updates leave free pages and a freelist.
			recs, _ := st.List()
			for _, r := range recs[:5] {
				st.Update(r.ID, func(r *session.Record) ([]session.Event, error) {
					r.Status = session.StatusStopped
					return nil, nil
				})
			}
			var pages []int
			var pageSize int
			st.db.View(func(tx *bolt.Tx) error {
				pageSize = st.db.Info().PageSize
				for id := 2; ; id++ {
					p, err := tx.Page(id)
					if err != nil || p == nil {
						break
					}
					if p.Type == kind || (kind == "first three" && p.Type != "free") || (strings.HasPrefix(kind, "leaf ") && p.Type == "leaf") {
						pages = append(pages, id)
					}
				}
				return nil
			})
			st.Close()
			if len(pages) == 0 {
				t.Fatalf("no %s page in the store", kind)
			}
			if len(pages) > 3 {
				pages = pages[:3]
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(len(kind)), 7))
			junk := make([]byte, pageSize)
			for _, id := range pages {
				off := 0
				for i := range junk {
					junk[i] = byte(rng.Uint32())
				}
				switch kind {
				case "leaf body":
					off = 16 // page header: id, flags, count, overflow
					for i := range junk {
						junk[i] = 0xff
					}
				case "leaf offsets":
					// Elements {flags, pos, ksize, vsize} that all point
					// 64 MiB past the page: outside the file and the map.
					off = 16
					for i := 0; i+16 <= len(junk); i += 16 {
						binary.LittleEndian.PutUint32(junk[i:], 0)
						binary.LittleEndian.PutUint32(junk[i+4:], 64<<20)
						binary.LittleEndian.PutUint32(junk[i+8:], 8)
						binary.LittleEndian.PutUint32(junk[i+12:], 8)
					}
				}
				if _, err := f.WriteAt(junk[off:], int64(id*pageSize+off)); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			t.Logf("overwrote %s pages %v", kind, pages)
			corruptOpen(t, path)
		})
	}
}

func TestUnreadableFileNotMoved(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: chmod 000 does not stop root from reading the file")
	}
	path := dbPath(t)
	st := openT(t, path, Options{})
	mustCreate(t, st, rec("claude", "u"))
	st.Close()
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(path, 0o600) })
	_, err := Open(path, Options{})
	if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want a permission error naming the file", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("file gone: %v", err)
	}
	if m, _ := filepath.Glob(path + ".corrupt-*"); len(m) != 0 {
		t.Fatalf("an unreadable file was moved aside: %v", m)
	}
}

func TestOpenOSErrorsNotMoved(t *testing.T) {
	// The store path is a directory: an OS error, not corruption.
	path := dbPath(t)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v", err)
	}
	if m, _ := filepath.Glob(path + ".corrupt-*"); len(m) != 0 {
		t.Fatalf("moved aside: %v", m)
	}
	// The parent is a file: MkdirAll fails.
	parent := filepath.Join(t.TempDir(), "file")
	os.WriteFile(parent, nil, 0o600)
	if _, err := Open(filepath.Join(parent, "sessiond.db"), Options{}); err == nil || !strings.Contains(err.Error(), parent) {
		t.Fatalf("err = %v", err)
	}
}
