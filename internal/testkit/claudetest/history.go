package claudetest

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/proc"
)

// This file holds the bulk generators behind the benchmarks (the adapter's
// Go benchmarks and cmd/sessiond-bench). They return errors instead of
// taking a testing.TB, so a command can use them too.

// writeSparseFile is WriteSparse for callers without a testing.TB.
func writeSparseFile(path string, size int64, head, tail []byte) error {
	if int64(len(head)+len(tail)+1) > size {
		return fmt.Errorf("sparse file of %d bytes cannot hold %d+%d bytes", size, len(head), len(tail))
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(head); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return fmt.Errorf("truncate %s: %w", path, err)
	}
	at := size - int64(len(tail)) - 1
	if _, err := f.WriteAt(append([]byte{'\n'}, tail...), at); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// WriteTranscriptFile is WriteTranscript for callers without a testing.TB.
func (r *Root) WriteTranscriptFile(t *Transcript) (string, error) {
	p := r.TranscriptPath(t.Cwd, t.SessionID)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	return p, os.WriteFile(p, t.Bytes(), 0o600)
}

// WriteRegistryFile is WriteRegistry for callers without a testing.TB.
func (r *Root) WriteRegistryFile(e Entry) (string, error) {
	b, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(r.SessionsDir(), 0o700); err != nil {
		return "", err
	}
	p := filepath.Join(r.SessionsDir(), strconv.Itoa(e.PID)+".json")
	return p, os.WriteFile(p, b, 0o600)
}

// LiveEntryFor is LiveEntry for callers without a testing.TB.
func LiveEntryFor(host *proc.Host, pid int, sessionID, cwd, status string) (Entry, error) {
	id, err := host.Identify(pid)
	if err != nil {
		return Entry{}, fmt.Errorf("identify pid %d: %w", pid, err)
	}
	return NewEntry(pid, strconv.FormatUint(id.StartTicks, 10), HostDomain(), sessionID, cwd, status, startedAt(id)), nil
}

// HistorySpec describes a config root's history of finished sessions: no
// registry entries, transcripts only, as a home directory accumulates them.
type HistorySpec struct {
	// Files transcripts spread round-robin over Projects project folders.
	Files    int
	Projects int
	// Size returns transcript i's size in bytes; 0 means a small session
	// of a few whole turns (2-40 KB). Sizes up to RealMax are written as
	// whole turns; bigger ones are sparse (see WriteSparse): real lines at
	// both ends and a hole between, which costs a listing the same as real
	// data since a listing reads only the ends, and costs no disk.
	Size func(i int, rng *rand.Rand) int64
	// RealMax bounds the transcripts written as whole turns (default 64 KB).
	RealMax int64
	// Seed makes the sizes reproducible.
	Seed uint64
	// Start is the time of the first transcript's first line (default 30
	// days ago); transcript i starts i minutes later (less when that would
	// reach the last hour: the gap shrinks so that every start lies
	// between Start and an hour ago), and its mtime is its start, so the
	// history is old and every session in it finished.
	Start time.Time
	// Cwd returns the launch directory of project folder p (default
	// /home/u/src/project-NNN).
	Cwd func(p int) string

	// Dense writes every transcript, whatever its size, as real lines
	// from end to end (no sparse file): turns of varied shapes and
	// lengths (prompts, thinking, Bash/Read/Edit/Grep/TodoWrite calls
	// with outputs of a few bytes to tens of KB and their matching
	// results, closing replies) copied from a pool rendered once with
	// fresh ids and timestamps. A size of 0 is then a small session of
	// 2-40 KB; a transcript holds at least one turn, so its size may
	// exceed the wanted one by up to one small turn (~3 KB). The mtime
	// is the last line's time.
	Dense bool
	// MidTool, when > 0, makes every MidTool-th transcript (those with
	// i%MidTool == MidTool-1) end mid tool call the way a kill -9 leaves
	// it: an assistant tool_use line, then last-prompt and atis-latch,
	// and no tool_result. Dense only.
	MidTool int
}

// History is what WriteHistory wrote.
type History struct {
	Paths  []string
	IDs    []string
	Bytes  int64 // the transcripts' total (apparent) size
	Sparse int   // how many are sparse
	// MidTool are the ids of the transcripts that end mid tool call.
	MidTool []string
}

// SkewedSize is the size mix of the adapter's cold-discovery benchmark for
// 10,000 transcripts: 60 % small (a few turns, 2-40 KB), 30 % medium
// (200 KB-5 MB), 9.9 % large (10-100 MB) and the first 10 huge
// (300-700 MB).
func SkewedSize(i int, rng *rand.Rand) int64 {
	x := rng.IntN(1000)
	switch {
	case x < 600:
		return 0
	case i < 10:
		return 300<<20 + rng.Int64N(400<<20)
	case x < 900:
		return 200<<10 + rng.Int64N(5<<20)
	default:
		return 10<<20 + rng.Int64N(90<<20)
	}
}

// HomeSizes returns the sizes of the "standard home" of the benchmarks:
// n transcripts of 10 KB-5 MB, log-uniformly spread and then scaled so
// that, with big transcripts of 100 MB each, they total about total bytes.
func HomeSizes(n, big int, total int64, seed uint64) []int64 {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const lo, hi = 10 << 10, 5 << 20
	small := n - big
	sizes := make([]float64, small)
	var sum float64
	for i := range sizes {
		sizes[i] = math.Exp(math.Log(lo) + rng.Float64()*(math.Log(hi)-math.Log(lo)))
		sum += sizes[i]
	}
	want := float64(total - int64(big)*100<<20)
	// Scale the sizes toward the wanted total; clamping to the range keeps
	// it approximate, and a few rounds make up for the clamping.
	for range 4 {
		if sum <= 0 || want <= 0 {
			break
		}
		f := want / sum
		sum = 0
		for i := range sizes {
			sizes[i] = math.Min(hi, math.Max(lo, sizes[i]*f))
			sum += sizes[i]
		}
	}
	out := make([]int64, 0, n)
	for range big {
		out = append(out, 100<<20)
	}
	for _, s := range sizes {
		out = append(out, int64(s))
	}
	return out
}

// WriteHistory writes a history of finished sessions under r.
func (r *Root) WriteHistory(spec HistorySpec) (History, error) {
	var h History
	if spec.Projects <= 0 {
		spec.Projects = 1
	}
	if spec.RealMax <= 0 {
		spec.RealMax = 64 << 10
	}
	if spec.Start.IsZero() {
		spec.Start = time.Now().Add(-30 * 24 * time.Hour)
	}
	if spec.Cwd == nil {
		spec.Cwd = func(p int) string { return fmt.Sprintf("/home/u/src/project-%03d", p) }
	}
	rng := rand.New(rand.NewPCG(spec.Seed, spec.Seed+1))
	if spec.Dense {
		return r.writeDense(spec, rng)
	}
	gap := spec.gap()
	for i := range spec.Files {
		cwd := spec.Cwd(i % spec.Projects)
		id := NewSessionID()
		start := spec.Start.Add(time.Duration(i) * gap)
		tr := NewTranscript(id, cwd, start)
		path := r.TranscriptPath(cwd, id)
		var size int64
		if spec.Size != nil {
			size = spec.Size(i, rng)
		}
		switch {
		case size == 0:
			for range 1 + rng.IntN(12) {
				tr.Turn("please run the tests", "go test ./...", "ok  \tpkg\t0.1s", "All tests pass.")
			}
			if _, err := r.WriteTranscriptFile(tr); err != nil {
				return h, err
			}
		case size <= spec.RealMax:
			for len(tr.lines) == 0 || int64(len(tr.Bytes())) < size {
				tr.Turn("please run the tests", "go test ./...", "ok  \tpkg\t0.1s", "All tests pass.")
			}
			if _, err := r.WriteTranscriptFile(tr); err != nil {
				return h, err
			}
		default:
			tr.QueueOperation("enqueue", "start").User("a long session").AtisLatch().APIRequestShape()
			head := tr.Bytes()
			tt := NewTranscript(id, cwd, tr.At.Add(time.Hour))
			for range 8 {
				tt.Turn("and again", "make build", "built", "Done.")
			}
			if err := writeSparseFile(path, size, head, tt.Bytes()); err != nil {
				return h, err
			}
			h.Sparse++
		}
		if err := os.Chtimes(path, start, start); err != nil {
			return h, err
		}
		fi, err := os.Stat(path)
		if err != nil {
			return h, err
		}
		h.Bytes += fi.Size()
		h.Paths = append(h.Paths, path)
		h.IDs = append(h.IDs, id)
	}
	return h, nil
}

// gap is the time between two transcripts' starts: a minute, or less so
// that the last starts an hour ago at the latest (100,000 minutes are 69
// days: a history that long from 30 days ago would reach into the future,
// and a transcript from the future is neither old nor finished).
func (spec HistorySpec) gap() time.Duration {
	gap := time.Minute
	if room := time.Until(spec.Start.Add(time.Hour)); spec.Files > 1 && room < 0 {
		if fit := -room / time.Duration(spec.Files); fit < gap {
			gap = fit
		}
	}
	return gap
}

// writeDense is WriteHistory with Dense set.
func (r *Root) writeDense(spec HistorySpec, rng *rand.Rand) (History, error) {
	var h History
	d := &denseWriter{pool: poolFor(spec.Seed), rng: rand.New(rand.NewPCG(spec.Seed^0x5eed, spec.Seed+3)), step: 150 * time.Millisecond}
	gap := spec.gap()
	for i := range spec.Files {
		cwd := spec.Cwd(i % spec.Projects)
		id := NewSessionID()
		start := spec.Start.Add(time.Duration(i) * gap)
		var size int64
		if spec.Size != nil {
			size = spec.Size(i, rng)
		}
		if size == 0 {
			size = 2<<10 + rng.Int64N(38<<10)
		}
		f := denseFile{path: r.TranscriptPath(cwd, id), sid: id, cwd: cwd, start: start, size: size,
			midTool: spec.MidTool > 0 && i%spec.MidTool == spec.MidTool-1}
		n, last, err := d.write(f)
		if err != nil {
			return h, err
		}
		if err := os.Chtimes(f.path, last, last); err != nil {
			return h, err
		}
		h.Bytes += n
		h.Paths = append(h.Paths, f.path)
		h.IDs = append(h.IDs, id)
		if f.midTool {
			h.MidTool = append(h.MidTool, id)
		}
	}
	return h, nil
}
