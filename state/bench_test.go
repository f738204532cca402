package state

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/session"
)

func benchStore(b *testing.B, n int) (*Store, []string) {
	b.Helper()
	st := openT(b, dbPath(b), Options{Logger: zap.NewNop()})
	ids := make([]string, 0, n)
	for start := 0; start < n; start += 1000 {
		err := st.Batch(func(tx *Tx) error {
			for i := start; i < min(n, start+1000); i++ {
				r := rec("claude", fmt.Sprintf("3f2a9c1e-0000-4000-8000-%012d", i))
				r.Title = "fix the flaky test in tracker"
				if err := tx.Create(r, session.Event{Type: session.EventCreated, To: r.Status}); err != nil {
					return err
				}
				ids = append(ids, r.ID)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return st, ids
}

// BenchmarkUpdate is one status change with its event: one committed
// (fsynced) write transaction.
func BenchmarkUpdate(b *testing.B) {
	st, ids := benchStore(b, 1)
	b.ReportAllocs()
	for b.Loop() {
		_, err := st.Update(ids[0], func(r *session.Record) ([]session.Event, error) {
			from := r.Status
			r.Status = session.StatusStopped
			if from == session.StatusStopped {
				r.Status = session.StatusRunning
			}
			return []session.Event{{Type: session.EventStatus, From: from, To: r.Status}}, nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkGet(b *testing.B) {
	st, ids := benchStore(b, 1000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := st.Get(ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkList10k(b *testing.B) {
	st, _ := benchStore(b, 10000)
	b.ReportAllocs()
	for b.Loop() {
		recs, err := st.List()
		if err != nil || len(recs) != 10000 {
			b.Fatal(len(recs), err)
		}
	}
}

// BenchmarkLoad10k: the first ListShared of a freshly opened store of
// 10,000 records shaped like the standard home's (a stopped Claude session
// with its resume cursor, ~850 bytes of JSON), which is what a restart
// waits for before its first pass can decide anything.
//
//	go test -run='^$' -bench=BenchmarkLoad10k -benchmem ./state/
func BenchmarkLoad10k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "sessiond.db")
	st, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Date(2026, 10, 26, 15, 3, 23, 635e6, time.UTC)
	err = st.Batch(func(tx *Tx) error {
		for i := range 10000 {
			up := fmt.Sprintf("%08x-d346-4af2-ac71-8cb82c66a88f", i)
			cwd := fmt.Sprintf("/home/u/src/project-%03d", i%150)
			r := &session.Record{
				Agent: "claude", UpstreamID: up, Status: session.StatusStopped,
				StatusReason: "no owner process, and the data has been still for the grace period",
				Cwd:          cwd, Title: "please run the tests", Source: "/home/u/.claude/projects/" + cwd,
				Problems: []session.Problem{}, StoppedAt: &t0, LastActivityAt: &t0,
				Resume: &session.ResumeCursor{SchemaVersion: 1, Agent: "claude", UpstreamID: up, Cwd: cwd, Root: "/home/u/.claude"},
			}
			if err := tx.Create(r, session.Event{}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	st.Close()
	b.ReportAllocs()
	for b.Loop() {
		st, err := Open(path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		recs, err := st.ListShared()
		if err != nil || len(recs) != 10000 {
			b.Fatal(len(recs), err)
		}
		st.Close()
	}
}

// BenchmarkFirstCommit: one transaction creating 2,000 sessions in a new
// store, as a first start's startup pass commits them (ids and upstream
// ids in order, each with its created event): the standard home's whole
// commit.
//
//	go test -run='^$' -bench=BenchmarkFirstCommit -count=5 ./state/
func BenchmarkFirstCommit(b *testing.B) {
	const n = 2000
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s, err := Open(filepath.Join(b.TempDir(), "sessiond.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		recs := make([]*session.Record, n)
		for i := range recs {
			recs[i] = firstStartRecord(i, now)
		}
		b.StartTimer()
		err = s.Batch(func(tx *Tx) error {
			for _, r := range recs {
				if err := tx.CreateOwned(r, session.Event{Type: session.EventCreated, To: r.Status, Reason: r.StatusReason}); err != nil {
					return err
				}
			}
			return nil
		})
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
		b.StartTimer()
	}
}

// firstStartRecord is the i-th session a first start records over a
// history: stopped, with a title, a source, a resume cursor and times.
func firstStartRecord(i int, now time.Time) *session.Record {
	up := fmt.Sprintf("%08x-d346-4af2-ac71-8cb82c66a88f", i)
	cwd := fmt.Sprintf("/home/u/src/project-%03d", i%150)
	last := now.Add(-time.Duration(i) * time.Minute)
	return &session.Record{
		ID: fmt.Sprintf("%012x", 0x100000+i*97), Agent: "claude", UpstreamID: up,
		Status: session.StatusStopped, StatusReason: "no owner process, and the data has been still for the grace period",
		Cwd: cwd, Title: "explain how the tracker decides a status", Source: "/home/u/.claude/projects/-home-u-src-project",
		Problems: []session.Problem{}, StoppedAt: &last, LastActivityAt: &last, CreatedAt: now, UpdatedAt: now,
		Resume: &session.ResumeCursor{SchemaVersion: 1, Agent: "claude", UpstreamID: up, Cwd: cwd, Root: "/home/u/.claude"},
	}
}
