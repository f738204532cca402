package claude

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
)

// A steady pass stats exactly the transcripts the hot rule names, found
// from the project's index without a look at the cold ones: through
// history, a claude starting in a cwd and resuming an id, a registry
// entry, files growing, aging, vanishing and appearing.
func TestHotIndexFollowsTheRule(t *testing.T) {
	const coldAfter = 1500 * time.Millisecond
	var mu sync.Mutex
	checked, stated, total := 0, 0, 0
	hotCheck = func(p *projectState, h *hot, now time.Time, files []*fileState) {
		mu.Lock()
		defer mu.Unlock()
		checked++
		stated += len(files)
		total += len(p.files)
		in := map[*fileState]bool{}
		for _, f := range files {
			in[f] = true
		}
		for _, f := range p.files {
			if h.has(f, now) && !in[f] {
				t.Errorf("%s is hot and not stat'ed", f.path)
			}
		}
		for _, f := range files {
			if !h.has(f, now) {
				t.Errorf("%s is stat'ed and not hot", f.path)
			}
		}
	}
	t.Cleanup(func() { hotCheck = nil })

	r, _ := newRoot(t)
	var cwds []string
	for range 3 {
		d := filepath.Join(t.TempDir(), "proj")
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		cwds = append(cwds, d)
	}
	old := time.Now().Add(-time.Hour)
	var ids, paths []string
	for i := range 30 {
		id := claudetest.NewSessionID()
		tr := claudetest.NewTranscript(id, cwds[i%3], old)
		tr.Turn("work", "make", "ok", "Done.")
		path := r.WriteTranscript(t, tr)
		if i%2 == 0 { // half of them history, half written just now
			if err := os.Chtimes(path, old, old); err != nil {
				t.Fatal(err)
			}
		}
		ids, paths = append(ids, id), append(paths, path)
	}
	a := New(Config{Roots: []string{r.Dir}, DefaultRoot: r.Dir, NoLearnedRoots: true, FS: &testFS{},
		ColdAfter: coldAfter, Logger: zaptest.NewLogger(t)})
	pass := func() {
		t.Helper()
		discover(t, a, snapshot(t))
		checkShape(t, a)
	}
	pass()
	pass()
	pass()

	c := startAs(t, cwds[0], nil, "claude")
	waitArgv(t, c.pid, "claude")
	pass()
	res := startAs(t, t.TempDir(), nil, "claude", "--resume", ids[2])
	waitArgv(t, res.pid, "claude")
	pass()
	r.WriteRegistry(t, claudetest.NewEntry(999998, "1", claudetest.HostDomain(), ids[4], cwds[1], "busy", time.Now().Add(-time.Minute)))
	pass()

	more := claudetest.NewTranscript(ids[6], cwds[0], time.Now())
	more.Turn("more", "ls", "", "ok")
	appendTo(t, paths[6], more.Bytes())
	pass()
	time.Sleep(coldAfter) // the files written at the start age
	pass()
	pass()
	if err := os.Remove(paths[8]); err != nil {
		t.Fatal(err)
	}
	n := claudetest.NewTranscript(claudetest.NewSessionID(), cwds[1], time.Now())
	n.Turn("new", "ls", "", "ok")
	r.WriteTranscript(t, n)
	pass()
	pass()
	c.kill()
	res.kill()
	_ = syscallKillGroup(c.pid)
	_ = syscallKillGroup(res.pid)
	pass()
	pass()
	time.Sleep(coldAfter)
	pass()
	pass()
	mu.Lock()
	defer mu.Unlock()
	if checked < 20 {
		t.Fatalf("only %d project passes were checked", checked)
	}
	if stated*2 > total {
		t.Fatalf("steady passes stat'ed %d of %d files: the index saves nothing here", stated, total)
	}
	t.Logf("steady passes stat'ed %d of %d files over %d project passes", stated, total, checked)
}
