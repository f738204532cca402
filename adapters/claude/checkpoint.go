package claude

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude/transcript"
	"github.com/sessiond/sessiond/adapters/internal/kit"
	"github.com/sessiond/sessiond/adapters/internal/wire"
)

// What the adapter learned of each transcript (its identity, size and
// mtime, where the next read starts, the summary of its lines and its bad
// line counts) is saved through the tracker in the store, keyed by the
// transcript's path. After a restart a transcript whose (device, inode,
// size, mtime) still match is not read at all; one that grew is read from
// the saved offset, as within one run. That is what makes a restart cost a
// stat per transcript instead of a read.

// checkpointFormat is the first byte of every saved entry. Bump it when
// the layout below changes, and also when what a summary means changes (a
// parser fix that would conclude differently from the same lines): an
// entry of another format is ignored, so the next start reads every
// transcript again instead of trusting what an older build concluded.
const checkpointFormat = 3 // 2: a pending AskUserQuestion call's Input is its question; 3: the summary's drift

// Restore implements adapters.Checkpointer. Entries are held as saved
// until the first pass lists their transcripts, and decoded then, each by
// the goroutine that lists its project: a restart over 10,000 transcripts
// decoded them all here first, one core and 15 ms in a benchmark, before
// its pass could stat a file (33-54 ms inside a restarting daemon, beside
// the store's records loading). Those the pass does not find are dropped
// by the next Checkpoint; those that do not decode are read again.
func (a *Adapter) Restore(saved map[string][]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	// A copy: takeRestored deletes what it takes, and saved is the
	// caller's.
	a.restored.Reset(len(saved))
	a.book.Reset(len(saved))
	for path, b := range saved {
		a.restored.Hold(path, b)
		// A restored entry is generation 0, as a decoded fileState is:
		// Checkpoint writes it again only once the transcript is read
		// again (or, if it does not decode, replaced or deleted).
		a.book.Saved(path, 0)
	}
	a.restoreLog = restoreLog{entries: len(saved)}
}

// restoreLog counts what became of the restored entries during the first
// pass, for its log line.
type restoreLog struct {
	entries, used, unusable int
	firstErr                error
}

// takeRestored returns the saved state of the transcript at path, once,
// or nil: none was saved, or it does not decode (another format or
// configuration, garbage).
func (a *Adapter) takeRestored(path string) *fileState {
	a.restoredMu.Lock() // projects are listed in parallel
	b, ok := a.restored.Take(path)
	a.restoredMu.Unlock()
	if !ok {
		return nil
	}
	f, err := decodeFileState(path, b, a.cfg.WindowBytes, a.cfg.MaxLineBytes)
	a.restoredMu.Lock()
	defer a.restoredMu.Unlock()
	if err != nil {
		a.restoreLog.unusable++
		if a.restoreLog.firstErr == nil {
			a.restoreLog.firstErr = fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	a.restoreLog.used++
	return f
}

// logRestored says, after the first pass, what the restored entries were
// worth; the pass holds mu.
func (a *Adapter) logRestored() {
	l := a.restoreLog
	// transcripts: the entries handed back; of them, used by the pass,
	// unusable (read again), or of transcripts it did not find.
	a.log.Info("restored saved transcript state", zap.Int("transcripts", l.entries), zap.Int("unusable", l.unusable),
		zap.Int("used", l.used), zap.Int("not_found", l.entries-l.used-l.unusable))
	if l.firstErr != nil {
		a.log.Info("some saved transcript state is not usable; those transcripts are read again", zap.Int("unusable", l.unusable), zap.NamedError("first", l.firstErr))
	}
}

// Checkpoint implements adapters.Checkpointer: the transcripts read since
// their last save, and the saved ones no longer known (deleted, or never
// found again after a restart). Restored entries not yet matched stay
// until a pass has run: a Checkpoint before the first Discover must not
// drop them.
func (a *Adapter) Checkpoint() adapters.Checkpoint {
	a.mu.Lock()
	defer a.mu.Unlock()
	// Nothing read, added or removed since the last committed checkpoint
	// (and no restored entry left to drop): nothing to save, and no need
	// to walk every transcript to find that out.
	shape := a.shapePrint()
	if a.cpShapeOK && shape == a.cpShape && !a.restored.Holding() {
		return adapters.Checkpoint{Commit: func() {}}
	}
	ch := a.book.Changes()
	for _, r := range a.roots {
		for _, p := range r.projects {
			for _, f := range p.files {
				if f.read && !ch.Unchanged(f.path, f.gen) {
					ch.Put(f.path, f.gen, encodeFileState(f, a.cfg.WindowBytes, a.cfg.MaxLineBytes))
				}
			}
		}
	}
	cp, commit := ch.End(a.restored.Holds)
	cp.Commit = func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.cpShape, a.cpShapeOK = shape, true
		commit()
	}
	return cp
}

// encodeFileState writes f in checkpointFormat (package wire's
// encoding; times keep the instant, not the location: summaries hold UTC
// times, and a file's mtime is compared with Equal).
func encodeFileState(f *fileState, window, maxLine int) []byte {
	w := wire.Writer{B: make([]byte, 0, 256)}
	w.Byte(checkpointFormat)
	w.Uvarint(uint64(window))
	w.Uvarint(uint64(maxLine))
	var flags byte
	if f.hasID {
		flags |= 1
	}
	if f.skipPartial {
		flags |= 2
	}
	if f.sum.CustomTitle {
		flags |= 4
	}
	w.Byte(flags)
	w.Uvarint(f.dev)
	w.Uvarint(f.ino)
	w.Varint(f.size)
	w.Varint(f.offset)
	w.Time(f.mtime)

	s := &f.sum
	w.Str(s.SessionID)
	w.Str(s.Cwd)
	w.Str(s.Version)
	w.Str(s.GitBranch)
	w.Str(s.Title)
	w.Time(s.First)
	w.Time(s.Last)
	w.Uvarint(uint64(len(s.Pending)))
	for _, tc := range s.Pending {
		w.Str(tc.ID)
		w.Str(tc.Name)
		w.Str(tc.Input)
		w.Time(tc.At)
	}
	w.Uvarint(uint64(s.PendingDropped))
	if p := s.Prompt; p == nil {
		w.Byte(0)
	} else {
		w.Byte(1)
		w.Str(p.Type)
		w.Str(p.UUID)
		w.Str(p.SessionID)
		w.Str(p.Cwd)
		w.Str(p.Version)
		w.Str(p.GitBranch)
		w.Time(p.Time)
		w.Bool(p.Sidechain)
		w.Uvarint(uint64(p.Kind))
		w.Str(p.Prompt)
		w.Str(p.StopReason)
		w.Str(p.Title)
	}
	w.Uvarint(uint64(s.State))
	w.Time(s.StateAt)
	w.Str(s.StateUUID)
	w.Str(s.StopReason)

	for _, n := range []int64{f.bad.Lines, f.bad.TooLong, f.bad.Corrupt, f.bad.Glued, f.bad.LongHead} {
		w.Varint(n)
	}
	s.HeadDrift.Append(&w)
	s.TurnDrift.Append(&w)
	return w.B
}

// errOtherConfig: the entry was made with another window or line limit, so
// its summary may differ from what this configuration would read.
var errOtherConfig = errors.New("saved with another window or line limit")

// decodeFileState reads an entry of encodeFileState. Any error means the
// entry is not used (the transcript is read again); it never panics on
// garbage.
func decodeFileState(path string, b []byte, window, maxLine int) (*fileState, error) {
	if !transcript.IsName(filepath.Base(path)) || !filepath.IsAbs(path) {
		return nil, errors.New("not a transcript path")
	}
	r := wire.NewReader(b)
	if r.Format(checkpointFormat); r.Err() != nil {
		return nil, r.Err()
	}
	if w, m := r.Uvarint(), r.Uvarint(); r.Err() == nil && (w != uint64(window) || m != uint64(maxLine)) {
		return nil, errOtherConfig
	}
	f := &fileState{path: path, id: strings.TrimSuffix(filepath.Base(path), ".jsonl"), read: true}
	flags := r.Byte()
	f.hasID, f.skipPartial, f.sum.CustomTitle = flags&1 != 0, flags&2 != 0, flags&4 != 0
	f.dev = r.Uvarint()
	f.ino = r.Uvarint()
	f.size = r.Varint()
	f.offset = r.Varint()
	f.mtime = r.Time().Local()

	s := &f.sum
	s.SessionID = r.Str()
	s.Cwd = r.Str()
	s.Version = r.Str()
	s.GitBranch = r.Str()
	s.Title = r.Str()
	s.First = r.Time()
	s.Last = r.Time()
	n := r.Uvarint()
	if n > transcript.MaxPending {
		r.Fail("more pending tool calls than are kept")
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		s.Pending = append(s.Pending, transcript.ToolCall{ID: r.Str(), Name: r.Str(), Input: r.Str(), At: r.Time()})
	}
	s.PendingDropped = int(r.Uvarint())
	switch r.Byte() {
	case 0:
	case 1:
		p := &transcript.Line{}
		p.Type = r.Str()
		p.UUID = r.Str()
		p.SessionID = r.Str()
		p.Cwd = r.Str()
		p.Version = r.Str()
		p.GitBranch = r.Str()
		p.Time = r.Time()
		p.Sidechain = r.Bool()
		p.Kind = transcript.Kind(r.Uvarint())
		p.Prompt = r.Str()
		p.StopReason = r.Str()
		p.Title = r.Str()
		if p.Kind > transcript.KindAssistant {
			r.Fail("unknown line kind")
		}
		s.Prompt = p
	default:
		r.Fail("bad prompt flag")
	}
	s.State = transcript.TurnState(r.Uvarint())
	if s.State > transcript.TurnInterrupted {
		r.Fail("unknown turn state")
	}
	s.StateAt = r.Time()
	s.StateUUID = r.Str()
	s.StopReason = r.Str()
	for _, p := range []*int64{&f.bad.Lines, &f.bad.TooLong, &f.bad.Corrupt, &f.bad.Glued, &f.bad.LongHead} {
		*p = r.Varint()
	}
	s.HeadDrift = kit.ReadSeen(&r)
	s.TurnDrift = kit.ReadSeen(&r)
	r.End()
	if r.Err() == nil && (f.size < 0 || f.offset < 0 || f.offset > f.size || s.PendingDropped < 0) {
		r.Fail("offsets out of range")
	}
	if r.Err() != nil {
		return nil, r.Err()
	}
	return f, nil
}
