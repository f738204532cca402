package codex

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/codextest"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// The rollouts of codextest were written by the real codex exec 0.169.0
// (its testdata/README.md says how).
type fixture struct {
	file, id string
	busy     bool
	pending  []string // tool names of calls without output
	aborted  string
}

var fixtures = []fixture{
	{file: "done.jsonl", id: "01a2100e-6a76-7f61-8169-3d1e21ad66f1"},
	{file: "killed.jsonl", id: "01a2100e-73e8-7692-b08b-41c0e0969ddc", busy: true, pending: []string{"exec_command"}},
	{file: "sigint.jsonl", id: "01a2100e-87f0-7283-9ab9-72e2009951ed", aborted: "interrupted"},
	{file: "sigterm.jsonl", id: "01a2100e-9f9f-7202-b46e-9bdedd0ac584", busy: true, pending: []string{"exec_command"}},
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	return codextest.Fixture(name)
}

// TestRealRollouts reads each real rollout as a first listing does: the
// session_meta from the head, the turn state from the tail.
func TestRealRollouts(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx.file, func(t *testing.T) {
			b := readFixture(t, fx.file)
			r := bytes.NewReader(b)
			m, _, err := readHead(r, int64(len(b)))
			if err != nil {
				t.Fatal(err)
			}
			if m.ID != fx.id || m.Cwd != "/tmp/cx/work" || m.CLIVersion != "0.169.0" || m.Originator != "codex_exec" ||
				m.Source != "exec" || m.Title != "run it" || m.Started.IsZero() {
				t.Errorf("meta %+v", m)
			}
			var res readResult
			if err := readTail(r, int64(len(b)), defaultTail, &res); err != nil {
				t.Fatal(err)
			}
			tu := res.turn
			var names []string
			for _, c := range tu.Pending {
				names = append(names, c.Name)
				if !strings.HasPrefix(c.ID, "call_") || !strings.Contains(c.Args, "sleep") {
					t.Errorf("pending call %+v", c)
				}
			}
			if !tu.Known || tu.Busy != fx.busy || !reflect.DeepEqual(names, fx.pending) || tu.Aborted != fx.aborted || res.bad != 0 {
				t.Errorf("turn %+v bad %d; want busy %v pending %v aborted %q", tu, res.bad, fx.busy, fx.pending, fx.aborted)
			}
			if res.offset != int64(len(b)) {
				t.Errorf("offset %d, want the file's end %d", res.offset, len(b))
			}
		})
	}
}

// The TUI's first prompt is ~40 KB into its rollout: the head read goes
// on for it (a chunk at a time, bounded), and the title is the prompt.
func TestTUIRolloutTitle(t *testing.T) {
	b := readFixture(t, "tui.jsonl")
	m, head, err := readHead(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if m.Title != "Say hello" || m.Originator != "codex-tui" || m.ID != "01a21047-a4db-7da3-a4b6-af38d46bcf07" {
		t.Errorf("meta %+v", m)
	}
	if i := bytes.Index(b, []byte(`"text":"Say hello"`)); i < headChunk || len(head) > titleHead {
		t.Errorf("the prompt is at %d (want past the first chunk, %d); read %d bytes (bound %d)", i, headChunk, len(head), titleHead)
	}
	// A head with no prompt in reach stops at the bound.
	pad := bytes.Repeat([]byte(`{"type":"world_state","payload":{}}`+"\n"), 4000)
	big := append(append(append([]byte{}, b[:bytes.IndexByte(b, '\n')+1]...), pad...), b[bytes.IndexByte(b, '\n')+1:]...)
	m, head, err = readHead(bytes.NewReader(big), int64(len(big)))
	if err != nil || m.Title != "" || len(head) != titleHead {
		t.Errorf("a prompt out of reach: title %q, read %d bytes (want the bound %d), err %v", m.Title, len(head), titleHead, err)
	}
}

// TestAppendedReadsAsWhole: a rollout read in two parts, at any line
// boundary (its first part a first listing, the rest appended), says what
// one read of the whole says; and a tail window that must grow past a
// long run of lines without a turn boundary still finds it.
func TestAppendedReadsAsWhole(t *testing.T) {
	for _, fx := range fixtures {
		b := readFixture(t, fx.file)
		var whole readResult
		if err := readTail(bytes.NewReader(b), int64(len(b)), defaultTail, &whole); err != nil {
			t.Fatal(err)
		}
		for cut := bytes.IndexByte(b, '\n') + 1; cut < len(b); {
			var res readResult
			if err := readTail(bytes.NewReader(b[:cut]), int64(cut), defaultTail, &res); err != nil {
				t.Fatal(err)
			}
			if err := readAppended(bytes.NewReader(b), res.offset, int64(len(b)), &res); err != nil {
				t.Fatal(err)
			}
			if res.turn.Busy != whole.turn.Busy || len(res.turn.Pending) != len(whole.turn.Pending) || res.turn.Aborted != whole.turn.Aborted || res.offset != whole.offset {
				t.Errorf("%s cut at %d: %+v, whole %+v", fx.file, cut, res.turn, whole.turn)
			}
			next := bytes.IndexByte(b[cut:], '\n')
			if next < 0 {
				break
			}
			cut += next + 1
		}
	}
	// A turn whose tool output is 300 KB of lines: the boundary is far
	// from the end.
	b := readFixture(t, "killed.jsonl")
	filler := bytes.Repeat([]byte(`{"timestamp":"2026-11-25T00:15:20.000Z","ordinal":99,"type":"event_msg","payload":{"type":"token_count","info":"`+strings.Repeat("x", 1000)+`"}}`+"\n"), 300)
	b = append(b, filler...)
	var res readResult
	if err := readTail(bytes.NewReader(b), int64(len(b)), defaultTail, &res); err != nil {
		t.Fatal(err)
	}
	if !res.turn.Known || !res.turn.Busy || len(res.turn.Pending) != 1 {
		t.Errorf("after 300 KB of lines: %+v", res.turn)
	}
}

// home is a Codex home in a temp dir holding the given fixtures.
func home(t *testing.T, files ...string) string {
	t.Helper()
	root := t.TempDir()
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		for _, fx := range fixtures {
			if fx.file == name {
				writeRollout(t, day, fx.id, readFixture(t, name))
			}
		}
	}
	return root
}

func writeRollout(t *testing.T, day, id string, b []byte) string {
	t.Helper()
	p := filepath.Join(day, "rollout-2026-11-25T00-15-09-"+id+".jsonl")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func discover(t *testing.T, a *Adapter) map[string]adapters.Observed {
	t.Helper()
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	out, _ := discoverSnap(t, a, snap)
	return out
}

// discoverSnap is a pass over snap (nil: no process table, nothing runs),
// its sessions by id, and the observation.
func discoverSnap(t *testing.T, a *Adapter, snap *proc.Snapshot) (map[string]adapters.Observed, adapters.Observation) {
	t.Helper()
	obs, err := a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]adapters.Observed{}
	for _, o := range obs.All() {
		out[o.UpstreamID] = o
	}
	return out, obs
}

// TestDiscoverAndGrow lists every fixture, then follows a rollout that
// grows from its first turn's start to its end.
func TestDiscoverAndGrow(t *testing.T) {
	root := home(t, "done.jsonl", "sigint.jsonl")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	got := discover(t, a)
	if len(got) != 2 {
		t.Fatalf("sessions %v", got)
	}
	d := got[fixtures[0].id]
	if d.Activity != session.ActivityIdle || d.Cwd != "/tmp/cx/work" || d.Title != "run it" || d.Root != root || len(d.InFlight) != 0 || len(d.Owners) != 0 {
		t.Errorf("done: %+v", d)
	}

	b := readFixture(t, "killed.jsonl")
	cut := bytes.Index(b, []byte(`"type":"function_call"`))
	cut = bytes.LastIndexByte(b[:cut], '\n') + 1
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	p := writeRollout(t, day, fixtures[1].id, b[:cut])
	k := discover(t, a)[fixtures[1].id]
	if k.Activity != session.ActivityBusy || len(k.InFlight) != 1 || k.InFlight[0].Kind != session.ProblemIncompleteMessage {
		t.Errorf("killed, before the call: %+v", k)
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b[cut:])
	f.Close()
	k = discover(t, a)[fixtures[1].id]
	if k.Activity != session.ActivityBusy || len(k.InFlight) != 1 || k.InFlight[0].Kind != session.ProblemOrphanedToolCall ||
		!strings.Contains(k.InFlight[0].Detail, "exec_command") {
		t.Errorf("killed, after the call: %+v", k)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, ok := discover(t, a)[fixtures[1].id]; ok {
		t.Error("a removed rollout is still listed")
	}
}

// TestHelperHoldsLock is not a test: run with SESSIOND_CODEX_HOLD=<path>,
// it takes the writer lock on path as Codex does and sleeps.
func TestHelperHoldsLock(t *testing.T) {
	path := os.Getenv("SESSIOND_CODEX_HOLD")
	if path == "" {
		t.Skip("helper process only")
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		os.Exit(3)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		os.Exit(4)
	}
	os.WriteFile(path+".ready", nil, 0o644)
	time.Sleep(time.Minute)
	runtime.KeepAlive(f) // the lock lives as long as the open file
	os.Exit(0)
}

// holdLock starts a process that holds the writer lock file at path as
// Codex does, and returns once it does; the test's end kills it.
func holdLock(t *testing.T, path string) *exec.Cmd {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(os.Args[0], "-test.run=^TestHelperHoldsLock$")
	holder.Env = append(os.Environ(), "SESSIOND_CODEX_HOLD="+path)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })
	testenv.Eventually(t, 10*time.Second, "the helper holds the lock", func() bool {
		_, err := os.Stat(path + ".ready")
		return err == nil
	})
	return holder
}

// TestWriterLockNamesTheOwner: the process holding the lock file is the
// owner, by its exact identity; killed, its lock file stays and names no
// one. A process that carries the session's CODEX_THREAD_ID but is not
// the owner's (the test started it) is then named as a suspect, never
// reapable (while the owner lived it was not named at all); orphans.go's
// tests have the owner's own tools.
func TestWriterLockNamesTheOwner(t *testing.T) {
	root := home(t, "killed.jsonl")
	id := fixtures[1].id
	locks := filepath.Join(root, "thread-writer-locks")
	if err := os.MkdirAll(locks, 0o755); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(locks, id+".lock")
	tool := exec.Command("sleep", "60")
	tool.Env = append(os.Environ(), "CODEX_THREAD_ID="+id)
	if err := tool.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { tool.Process.Kill(); tool.Wait() }()
	holder := holdLock(t, lock)

	a := New(Config{Roots: []string{root}, NoLearnedRoots: true, ReleaseGrace: -1})
	o := discover(t, a)[id]
	want, err := proc.NewHost().Identify(holder.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Owners) != 1 || o.Owners[0].Identity != want || o.Owners[0].Inferred || !strings.Contains(o.Owners[0].Evidence, "writer lock") || o.OwnersExact == "" {
		t.Fatalf("owners %+v (exact %q), want exactly %v", o.Owners, o.OwnersExact, want)
	}
	if len(o.Problems) != 0 {
		t.Errorf("a tool of a live owner named an orphan: %+v", o.Problems)
	}

	holder.Process.Kill()
	holder.Wait()
	o = discover(t, a)[id]
	if len(o.Owners) != 0 || o.OwnersExact == "" {
		t.Fatalf("a dead holder still owns: %+v (exact %q)", o.Owners, o.OwnersExact)
	}
	if len(o.Problems) != 1 || o.Problems[0].Kind != session.ProblemOrphanProcesses || o.Problems[0].Key != strconv.Itoa(tool.Process.Pid) ||
		o.Problems[0].Process != nil || !strings.Contains(o.Problems[0].Detail, "suspect") {
		t.Errorf("orphans %+v, want the sleep %d as a suspect only", o.Problems, tool.Process.Pid)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Errorf("the lock file should stay: %v", err)
	}
}

// A writer lock seen held by nobody names the owners exactly only once no
// pass has seen it held for the release grace: a lock dropped and taken
// again between two passes is no release, and a pass that sees it held
// starts the grace over.
func TestReleaseNeedsTheGrace(t *testing.T) {
	root := home(t, "killed.jsonl")
	id := fixtures[1].id
	lock := filepath.Join(root, "thread-writer-locks", id+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	const grace = time.Hour
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true, ReleaseGrace: grace})
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	at := func(now time.Time) adapters.Observed {
		t.Helper()
		sc, errs, ok := a.scanRoot(a.roots[root], true, now, newLockTable(a.cfg.Host))
		obs := a.observe(sc.r, sc.owners, sc.inexact, now)
		if !ok || len(errs) != 0 || len(obs) != 1 {
			t.Fatalf("scan: %d sessions, %v, ok %v", len(obs), errs, ok)
		}
		markShared(obs, snap)
		return obs[0]
	}
	t0 := time.Now()
	holder := holdLock(t, lock)
	if o := at(t0); o.OwnersExact == "" || len(o.Owners) != 1 {
		t.Fatalf("held: owners %+v (exact %q), want the holder, exactly", o.Owners, o.OwnersExact)
	}
	holder.Process.Kill()
	holder.Wait()
	if o := at(t0.Add(time.Second)); o.OwnersExact != "" || len(o.Owners) != 0 {
		t.Fatalf("free for 0 s: owners %+v (exact %q), want none, not exactly", o.Owners, o.OwnersExact)
	}
	if o := at(t0.Add(time.Second + grace/2)); o.OwnersExact != "" {
		t.Fatalf("free for half the grace: exact %q", o.OwnersExact)
	}
	if err := os.Remove(lock + ".ready"); err != nil {
		t.Fatal(err)
	}
	holder = holdLock(t, lock) // taken again: the grace starts over
	if o := at(t0.Add(time.Second + grace*3/4)); o.OwnersExact == "" || len(o.Owners) != 1 {
		t.Fatalf("held again: owners %+v (exact %q)", o.Owners, o.OwnersExact)
	}
	holder.Process.Kill()
	holder.Wait()
	t1 := t0.Add(2 * grace)
	if o := at(t1); o.OwnersExact != "" {
		t.Fatalf("free again for 0 s: exact %q", o.OwnersExact)
	}
	if o := at(t1.Add(grace)); o.OwnersExact == "" || len(o.Owners) != 0 {
		t.Fatalf("free for the grace: owners %+v (exact %q), want none, exactly", o.Owners, o.OwnersExact)
	}
}

// countingHost counts reads of the lock table.
type countingHost struct {
	ProcHost
	tables int
}

func (h *countingHost) LockTable() (*proc.LockTable, error) {
	h.tables++
	return h.ProcHost.LockTable()
}

// A pass reads the lock table only when a home has a lock file, and then
// once, however many homes have one.
func TestLockTableReadOnlyWhenNeeded(t *testing.T) {
	a1, a2 := home(t, "done.jsonl"), home(t, "sigint.jsonl")
	h := &countingHost{ProcHost: proc.NewHost()}
	a := New(Config{Roots: []string{a1, a2}, NoLearnedRoots: true, Host: h})
	discover(t, a)
	if h.tables != 0 {
		t.Fatalf("%d lock table reads with no lock file", h.tables)
	}
	for _, r := range []string{a1, a2} {
		dir := filepath.Join(r, "thread-writer-locks")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fixtures[0].id+".lock"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	discover(t, a)
	if h.tables != 1 {
		t.Fatalf("%d lock table reads for two homes with lock files, want 1", h.tables)
	}
}

// noLockTable is a host whose kernel lock table cannot be read (macOS).
type noLockTable struct{ ProcHost }

func (noLockTable) LockTable() (*proc.LockTable, error) { return nil, errors.ErrUnsupported }

// Owners are exact only where the lock's holder is known: with no lock
// table, a session with a lock file names an inferred owner, not all of
// them; one with no lock file has none, which is exact (a writer always
// holds its lock file). An unlistable lock folder makes none exact.
func TestOwnersExactOnlyWhereKnown(t *testing.T) {
	root := home(t, "killed.jsonl", "done.jsonl")
	locked := fixtures[1].id
	holder := holdLock(t, filepath.Join(root, "thread-writer-locks", locked+".lock"))
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true, Host: noLockTable{proc.NewHost()}, ReleaseGrace: -1})
	obs := discover(t, a)
	if o := obs[locked]; o.OwnersExact != "" || len(o.Owners) != 1 || !o.Owners[0].Inferred || o.Owners[0].Identity.PID != holder.Process.Pid {
		t.Errorf("no lock table, lock file open by %d: %+v (exact %q)", holder.Process.Pid, o.Owners, o.OwnersExact)
	}
	if o := obs[fixtures[0].id]; o.OwnersExact == "" || len(o.Owners) != 0 {
		t.Errorf("no lock file: %+v (exact %q), want none, exactly", o.Owners, o.OwnersExact)
	}

	locks := filepath.Join(root, "thread-writer-locks")
	if err := os.Rename(locks, locks+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(locks, []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := b.Discover(context.Background(), snap)
	for _, o := range got.All() {
		if o.OwnersExact != "" {
			t.Errorf("%s: exact owners %q with an unreadable lock folder", o.UpstreamID, o.OwnersExact)
		}
	}
}

// TestTitleOfARolloutFirstSeenEarly: the TUI writes its session_meta and
// instructions before the first prompt; a rollout first read then gets
// its title when the prompt is appended, and one first read with its
// session_meta line unfinished gets its meta once the line is whole.
func TestTitleOfARolloutFirstSeenEarly(t *testing.T) {
	b := readFixture(t, "tui.jsonl")
	at := bytes.Index(b, []byte(`"text":"Say hello"`))
	cut := bytes.LastIndexByte(b[:at], '\n') + 1
	root := t.TempDir()
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	const id = "01a21047-a4db-7da3-a4b6-af38d46bcf07"
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	grow := func(p string, to int) {
		t.Helper()
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := f.Stat()
		if _, err := f.WriteAt(b[st.Size():to], st.Size()); err != nil {
			t.Fatal(err)
		}
		f.Close()
		// A new mtime for each step, as a second write brings.
		later := time.Now().Add(time.Duration(to) * time.Microsecond)
		os.Chtimes(p, later, later)
	}
	p := filepath.Join(day, "rollout-2026-11-25T00-15-09-"+id+".jsonl")

	// The session_meta line half written: no session yet, or one without
	// its meta; then whole, with the instructions but not the prompt.
	grow(p, bytes.IndexByte(b, '\n')/2)
	discover(t, a)
	grow(p, cut)
	if s := discover(t, a)[id]; s.Cwd == "" || s.Title != "" {
		t.Fatalf("before the prompt: %+v", s)
	}
	grow(p, len(b))
	if s := discover(t, a)[id]; s.Title != "Say hello" {
		t.Errorf("after the prompt was appended: title %q, want %q", s.Title, "Say hello")
	}
}

// TestIdlePassIsTheLastOne holds the idle fast path (kit.Quiet.Again) to
// what building the observations gives: after each kind of change the
// pass sees what a fresh adapter sees, and the pass after it, with
// nothing changed, hands out the same set and builds nothing.
func TestIdlePassIsTheLastOne(t *testing.T) {
	root := home(t, "done.jsonl", "sigint.jsonl")
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	locks := filepath.Join(root, "thread-writer-locks")
	cfg := Config{Roots: []string{root}, NoLearnedRoots: true, ReleaseGrace: -1}
	a := New(cfg)
	var grown string
	for _, step := range []struct {
		what   string
		change func()
	}{
		{"the first pass", func() {}},
		{"a new rollout", func() { grown = writeRollout(t, day, fixtures[1].id, readFixture(t, fixtures[1].file)) }},
		{"a rollout grown", func() {
			f, err := os.OpenFile(grown, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.WriteString(`{"timestamp":"2026-11-25T00:20:00.000Z","type":"event_msg","payload":{"type":"user_message","message":"more"}}` + "\n")
			f.Close()
		}},
		{"a lock file, held by nobody", func() {
			os.MkdirAll(locks, 0o755)
			os.WriteFile(filepath.Join(locks, fixtures[0].id+".lock"), nil, 0o644)
		}},
		{"the lock file gone", func() { os.Remove(filepath.Join(locks, fixtures[0].id+".lock")) }},
		{"the lock folder unreadable", func() {
			// A file where the folder was: its listing fails (a mode
			// of 0 would not stop root).
			os.RemoveAll(locks)
			os.WriteFile(locks, nil, 0o644)
		}},
		{"the lock folder readable again", func() {
			os.Remove(locks)
			os.MkdirAll(locks, 0o755)
		}},
		{"a rollout gone", func() { os.Remove(grown) }},
		{"the home gone", func() { os.RemoveAll(root) }},
	} {
		step.change()
		inc, obs := discoverSnap(t, a, nil)
		if fresh, _ := discoverSnap(t, New(cfg), nil); !reflect.DeepEqual(inc, fresh) {
			t.Fatalf("%s: the pass saw\n%+v\na fresh adapter\n%+v", step.what, inc, fresh)
		}
		_, again := discoverSnap(t, a, nil)
		if again.Quiet != obs.Quiet || len(again.Sessions) != 0 {
			t.Fatalf("%s, then nothing: a new set (%v) or a list of %d", step.what, again.Quiet != obs.Quiet, len(again.Sessions))
		}
	}
}

// TestIdlePassWaitsForTheRelease: a pass that found a release still in
// its grace builds the next one too, so the owners become exact when the
// grace ends, not when something else changes.
func TestIdlePassWaitsForTheRelease(t *testing.T) {
	root := home(t, "done.jsonl")
	const grace = 300 * time.Millisecond
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true, ReleaseGrace: grace})
	first, obs := discoverSnap(t, a, nil)
	if o := first[fixtures[0].id]; o.OwnersExact != "" {
		t.Fatalf("exact before the grace: %q", o.OwnersExact)
	}
	time.Sleep(grace + 50*time.Millisecond)
	later, again := discoverSnap(t, a, nil)
	if o := later[fixtures[0].id]; o.OwnersExact == "" {
		t.Fatal("not exact after the grace: the pass handed out the set built before it")
	}
	if again.Quiet == obs.Quiet {
		t.Fatal("the same set after the grace")
	}
	_, third := discoverSnap(t, a, nil)
	if third.Quiet != again.Quiet || len(third.Sessions) != 0 {
		t.Fatal("the pass after the grace built again")
	}
}
