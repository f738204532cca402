package tracker

import (
	"context"
	"maps"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
)

// savingAdapter is a fakeAdapter that is also a Checkpointer: it "learns"
// the entries in learn, and records what Restore handed it.
type savingAdapter struct {
	fakeAdapter
	cmu      sync.Mutex
	learn    map[string][]byte
	saved    map[string]bool
	restored []map[string][]byte
	commits  int
}

func (s *savingAdapter) Restore(saved map[string][]byte) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.restored = append(s.restored, saved)
	s.saved = map[string]bool{}
	for k := range saved {
		s.saved[k] = true
	}
}

func (s *savingAdapter) Checkpoint() adapters.Checkpoint {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	cp := adapters.Checkpoint{Put: map[string][]byte{}}
	for k, v := range s.learn {
		if !s.saved[k] {
			cp.Put[k] = v
		}
	}
	for k := range s.saved {
		if s.learn[k] == nil {
			cp.Del = append(cp.Del, k)
		}
	}
	cp.Commit = func() {
		s.cmu.Lock()
		defer s.cmu.Unlock()
		s.commits++
		for k := range cp.Put {
			s.saved[k] = true
		}
		for _, k := range cp.Del {
			delete(s.saved, k)
		}
	}
	return cp
}

func (s *savingAdapter) setLearned(m map[string][]byte) {
	s.cmu.Lock()
	s.learn = maps.Clone(m)
	s.cmu.Unlock()
}

// The first pass hands the adapter what the store saved; Run saves what it
// learned at its start and when it stops; a restarted tracker hands it back.
func TestCheckpointSavedAndRestored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sessiond.db")
	st := openStore(t, path)
	ad := &savingAdapter{fakeAdapter: fakeAdapter{name: "claude"}}
	ad.setLearned(map[string][]byte{"/a.jsonl": []byte("A"), "/b.jsonl": []byte("B")})
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: proc.NewHost(), Logger: zaptest.NewLogger(t), Interval: time.Hour})
	if _, err := tr.Reconcile(context.Background(), "startup"); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Reconcile(context.Background(), "tick"); err != nil {
		t.Fatal(err)
	}
	if len(ad.restored) != 1 || len(ad.restored[0]) != 0 {
		t.Fatalf("Restore calls %v, want one, empty", ad.restored)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tr.Run(ctx); close(done) }()
	testenv.Eventually(t, 10*time.Second, "the checkpoint at Run's start", func() bool {
		got, _ := st.AdapterState("claude")
		return len(got) == 2
	})
	// Learned meanwhile: saved when Run stops, even before CheckpointEvery.
	ad.setLearned(map[string][]byte{"/a.jsonl": []byte("A"), "/c.jsonl": []byte("C")})
	cancel()
	<-done
	got, err := st.AdapterState("claude")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got["/a.jsonl"]) != "A" || string(got["/c.jsonl"]) != "C" {
		t.Fatalf("saved at stop: %q", got)
	}
	if s := tr.Stats(); s.Checkpoints < 2 || s.CheckpointErrors != 0 {
		t.Fatalf("stats: %d checkpoints, %d errors", s.Checkpoints, s.CheckpointErrors)
	}
	st.Close()

	st = openStore(t, path)
	again := &savingAdapter{fakeAdapter: fakeAdapter{name: "claude"}}
	tr = New(Config{Store: st, Adapters: []adapters.Adapter{again}, Host: proc.NewHost(), Logger: zaptest.NewLogger(t)})
	if _, err := tr.Reconcile(context.Background(), "startup"); err != nil {
		t.Fatal(err)
	}
	if len(again.restored) != 1 || string(again.restored[0]["/c.jsonl"]) != "C" || len(again.restored[0]) != 2 {
		t.Fatalf("restored %q", again.restored)
	}
}

// A save that fails is not committed: the adapter offers it again.
func TestCheckpointFailureNotCommitted(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "sessiond.db"))
	ad := &savingAdapter{fakeAdapter: fakeAdapter{name: "claude"}}
	ad.setLearned(map[string][]byte{"/a.jsonl": []byte("A")})
	tr := New(Config{Store: st, Adapters: []adapters.Adapter{ad}, Host: proc.NewHost(), Logger: zaptest.NewLogger(t)})
	if _, err := tr.Reconcile(context.Background(), "startup"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := tr.checkpoint(); err == nil {
		t.Fatal("a checkpoint into a closed store succeeded")
	}
	if ad.commits != 0 {
		t.Fatal("a failed save was committed")
	}
	if cp := ad.Checkpoint(); len(cp.Put) != 1 {
		t.Fatalf("the failed save is not offered again: %v", cp.Put)
	}
	if s := tr.Stats(); s.CheckpointErrors != 1 {
		t.Fatalf("checkpoint errors %d, want 1", s.CheckpointErrors)
	}
}
