package claude

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/internal/testkit/claudetest"
	"github.com/sessiond/sessiond/session"
)

// A 1 GB transcript (sparse: valid lines at both ends) is listed by reading
// its first and last 64 KB only, counted through an instrumented reader.
// Later passes read only the appended bytes, and nothing when unchanged.
func TestHugeTranscriptListedFromItsEnds(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	start := time.Now().Add(-time.Hour)
	head := claudetest.NewTranscript(id, cwd, start)
	head.QueueOperation("enqueue", "start").User("analyse the logs").AtisLatch().APIRequestShape()
	tailTr := claudetest.NewTranscript(id, cwd, start.Add(50*time.Minute))
	for range 200 {
		tailTr.Turn("again", "grep -c ERROR app.log", "42", "42 errors.")
	}
	toolID := tailTr.CrashMidTool("and now the slow one", "python3 slow.py")
	path := r.TranscriptPath(cwd, id)
	const size = 1 << 30
	claudetest.WriteSparse(t, path, size, head.Bytes(), tailTr.Bytes())
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Fatalf("sparse file: %v %v", fi, err)
	}

	fsys := &testFS{}
	a := newTestAdapter(t, fsys, r.Dir)
	obs := discover(t, a, nil)
	read := fsys.read.Load()
	if read > 2*defaultWindowBytes+1 {
		t.Fatalf("listing a 1 GB file read %d bytes, want <= %d", read, 2*defaultWindowBytes+1)
	}
	if got := a.counters().BytesRead; got != read {
		t.Fatalf("adapter counted %d bytes, the instrumented reader %d", got, read)
	}
	o := mustFind(t, obs, id)
	if o.Cwd != cwd || o.Title != "analyse the logs" {
		t.Fatalf("head not read: cwd %q title %q", o.Cwd, o.Title)
	}
	if !o.LastActivity.Equal(tailTr.Last().Truncate(time.Millisecond)) {
		t.Fatalf("last activity %v, want %v", o.LastActivity, tailTr.Last())
	}
	if issue(o.InFlight, session.ProblemOrphanedToolCall, toolID) == nil || len(o.InFlight) != 1 {
		t.Fatalf("in flight = %+v", o.InFlight)
	}

	// Unchanged: stat only.
	discover(t, a, nil)
	if d := fsys.read.Load() - read; d != 0 {
		t.Fatalf("steady-state pass read %d bytes", d)
	}
	// The result arrives: only the appended bytes are read.
	more := claudetest.NewTranscript(id, cwd, time.Now())
	more.ToolResult(toolID, "done").AssistantText("Finished.")
	var appended int64
	for _, l := range more.Lines() {
		appended += int64(len(l) + 1)
	}
	claudetest.Append(t, path, more.Lines()...)
	before := fsys.read.Load()
	o = mustFind(t, discover(t, a, nil), id)
	if d := fsys.read.Load() - before; d != appended {
		t.Fatalf("incremental pass read %d bytes, appended %d", d, appended)
	}
	if len(o.InFlight) != 0 || !o.LastActivity.Equal(more.Last().Truncate(time.Millisecond)) {
		t.Fatalf("after append: %+v %v", o.InFlight, o.LastActivity)
	}
}

// A transcript rewritten shorter (compaction) or replaced by a new file
// (new inode, same size) is read again from its start.
func TestShrunkAndReplacedTranscript(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
	for range 20 {
		tr.Turn("long history", "ls", strings.Repeat("x", 500), "ok")
	}
	path := r.WriteTranscript(t, tr)
	a := newTestAdapter(t, &testFS{}, r.Dir)
	o := mustFind(t, discover(t, a, nil), id)
	if o.Title != "long history" || len(o.InFlight) != 0 {
		t.Fatalf("first read: %+v", o)
	}

	// Shrunk: compaction rewrote it shorter, ending mid tool call.
	short := claudetest.NewTranscript(id, cwd, time.Now().Add(-30*time.Minute))
	short.CustomTitle("compacted")
	call := short.CrashMidTool("after compaction", "make")
	if err := os.WriteFile(path, short.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	o = mustFind(t, discover(t, a, nil), id)
	if o.Title != "compacted" || issue(o.InFlight, session.ProblemOrphanedToolCall, call) == nil {
		t.Fatalf("after shrink: title %q in flight %+v", o.Title, o.InFlight)
	}
	if !o.LastActivity.Equal(short.Last().Truncate(time.Millisecond)) {
		t.Fatalf("after shrink: last %v want %v", o.LastActivity, short.Last())
	}

	// Replaced: a new file renamed over it, same size, other content.
	repl := claudetest.NewTranscript(id, cwd, time.Now().Add(-20*time.Minute))
	repl.CustomTitle("replaced!")
	call2 := repl.CrashMidTool("after compaction", "make")
	b := repl.Bytes()
	if len(b) != len(short.Bytes()) {
		t.Fatalf("test data: sizes differ %d vs %d", len(b), len(short.Bytes()))
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	o = mustFind(t, discover(t, a, nil), id)
	if o.Title != "replaced!" || issue(o.InFlight, session.ProblemOrphanedToolCall, call2) == nil || issue(o.InFlight, session.ProblemOrphanedToolCall, call) != nil {
		t.Fatalf("after replace: title %q in flight %+v", o.Title, o.InFlight)
	}
	if st := a.counters(); st.FilesRestarted != 2 {
		t.Fatalf("restarts = %d, want 2", st.FilesRestarted)
	}
}

// Corrupt lines (two records glued on one line, garbage) and a 20 MB line
// are skipped and counted; the glued records are recovered.
func TestCorruptAndOverlongLines(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
	tr.Turn("first", "ls", "", "ok")
	path := r.WriteTranscript(t, tr)

	a := New(Config{Roots: []string{r.Dir}, DefaultRoot: r.Dir, NoLearnedRoots: true, FS: &testFS{}, MaxAppendBytes: 64 << 20})
	discover(t, a, nil)

	// Append: a glued line (a torn record, then a whole tool call), a
	// garbage line, a 20 MB line, and a prompt after them.
	more := claudetest.NewTranscript(id, cwd, time.Now())
	torn := more.UserLine("this record is torn by a crash")
	call := claudetest.ToolID()
	more.AssistantToolUse(call, "Bash", map[string]any{"command": "make test"})
	glued := claudetest.Glue(torn, more.Lines()[1], len(torn)/2)
	x, y := more.UserLine("two records"), more.UserLine("on one line")
	whole := claudetest.GlueWhole(x, y)
	long := more.LongUserLine(20 << 20)
	last := more.UserLine("after the long line")
	claudetest.Append(t, path, glued, []byte("\x00\x01garbage{"), whole, long, last)

	o := mustFind(t, discover(t, a, nil), id)
	st := a.counters()
	// The default cap is 8 MiB: the 20 MB line is skipped. The torn line
	// and the garbage are corrupt; two whole records on one line are glued.
	if st.LinesTooLong != 1 || st.LinesCorrupt != 2 || st.LinesGlued != 1 {
		t.Fatalf("counts: too long %d, corrupt %d, glued %d", st.LinesTooLong, st.LinesCorrupt, st.LinesGlued)
	}
	if issue(o.InFlight, session.ProblemIncompleteMessage, "") == nil {
		t.Fatalf("the prompt after the long line was not read: %+v", o.InFlight)
	}
	if o.Activity == "" {
		t.Fatal("no activity")
	}

	// A cold listing of the same file never reads the 20 MB line.
	fsys := &testFS{}
	b := newTestAdapter(t, fsys, r.Dir)
	discover(t, b, nil)
	if got := fsys.read.Load(); got > 2*defaultWindowBytes+1 {
		t.Fatalf("cold listing read %d bytes", got)
	}
}

// A file that grew by more than MaxAppendBytes is re-read from its tail
// window, keeping what its head told.
func TestRetailAfterHugeGrowth(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
	tr.Turn("the beginning", "ls", "", "ok")
	path := r.WriteTranscript(t, tr)
	fsys := &testFS{}
	a := New(Config{Roots: []string{r.Dir}, DefaultRoot: r.Dir, NoLearnedRoots: true, FS: fsys, MaxAppendBytes: 1 << 20})
	discover(t, a, nil)
	more := claudetest.NewTranscript(id, cwd, time.Now())
	big := more.LongUserLine(3 << 20)
	call := more.CrashMidTool("later", "make")
	claudetest.Append(t, path, append([][]byte{big}, more.Lines()[1:]...)...)
	before := fsys.read.Load()
	o := mustFind(t, discover(t, a, nil), id)
	if d := fsys.read.Load() - before; d > defaultWindowBytes+1 {
		t.Fatalf("read %d bytes after huge growth", d)
	}
	if o.Title != "the beginning" || issue(o.InFlight, session.ProblemOrphanedToolCall, call) == nil {
		t.Fatalf("title %q in flight %+v", o.Title, o.InFlight)
	}
	if a.counters().FilesRetailed != 1 {
		t.Fatalf("stats %+v", a.counters())
	}
}

// A line still being written (no newline yet) is not consumed until it is
// complete, and its bytes are not re-read while the file does not change.
func TestPartialLastLine(t *testing.T) {
	r, cwd := newRoot(t)
	id := claudetest.NewSessionID()
	tr := claudetest.NewTranscript(id, cwd, time.Now().Add(-time.Hour))
	tr.User("hello")
	path := r.WriteTranscript(t, tr)
	fsys := &testFS{}
	a := newTestAdapter(t, fsys, r.Dir)
	discover(t, a, nil)

	more := claudetest.NewTranscript(id, cwd, time.Now())
	more.AssistantText("a reply")
	line := more.Lines()[0]
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(line[:len(line)/2]); err != nil {
		t.Fatal(err)
	}
	o := mustFind(t, discover(t, a, nil), id)
	if issue(o.InFlight, session.ProblemIncompleteMessage, "") == nil {
		t.Fatal("half a reply was taken as a reply")
	}
	before := fsys.read.Load()
	discover(t, a, nil)
	if fsys.read.Load() != before {
		t.Fatal("unchanged partial line re-read")
	}
	if _, err := f.Write(append(line[len(line)/2:], '\n')); err != nil {
		t.Fatal(err)
	}
	o = mustFind(t, discover(t, a, nil), id)
	if len(o.InFlight) != 0 {
		t.Fatalf("completed reply not read: %+v", o.InFlight)
	}
}

// A transcript untouched for ColdAfter that no live process may write is
// stat'ed only at full rescans; a registry entry naming it keeps it hot.
func TestColdTranscriptsCheckedAtFullRescan(t *testing.T) {
	r, cwd := newRoot(t)
	cold, named := claudetest.NewSessionID(), claudetest.NewSessionID()
	old := time.Now().Add(-time.Hour)
	paths := map[string]string{}
	for _, id := range []string{cold, named} {
		tr := claudetest.NewTranscript(id, cwd, old)
		tr.Turn("old", "ls", "", "ok")
		paths[id] = r.WriteTranscript(t, tr)
		if err := os.Chtimes(paths[id], old, old); err != nil {
			t.Fatal(err)
		}
	}
	owner := start(t, cwd, nil, "sleep", "120")
	r.WriteRegistry(t, claudetest.LiveEntry(t, owner.pid, named, cwd, "busy"))
	a := newTestAdapter(t, &testFS{}, r.Dir)
	discover(t, a, snapshot(t))

	for _, id := range []string{cold, named} {
		more := claudetest.NewTranscript(id, cwd, time.Now())
		more.User("resumed")
		claudetest.Append(t, paths[id], more.Lines()...)
	}
	obs := discover(t, a, snapshot(t))
	if o := mustFind(t, obs, named); issue(o.InFlight, session.ProblemIncompleteMessage, "") == nil {
		t.Fatalf("hot transcript not re-read: %+v", o.InFlight)
	}
	if o := mustFind(t, obs, cold); len(o.InFlight) != 0 {
		t.Fatalf("cold transcript re-read before the full rescan: %+v", o.InFlight)
	}
	a.RequestRescan()
	if o := mustFind(t, discover(t, a, snapshot(t)), cold); issue(o.InFlight, session.ProblemIncompleteMessage, "") == nil {
		t.Fatalf("full rescan missed the change: %+v", o.InFlight)
	}
}
