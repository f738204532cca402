package claude

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
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
const checkpointFormat = 1

// Restore implements adapters.Checkpointer. Entries are held until the
// first pass lists their transcripts; those it does not find are dropped
// by the next Checkpoint.
func (a *Adapter) Restore(saved map[string][]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.restored = make(map[string]*fileState, len(saved))
	a.saved = make(map[string]uint64, len(saved))
	bad := 0
	var firstErr error
	for path, b := range saved {
		f, err := decodeFileState(path, b, a.cfg.WindowBytes, a.cfg.MaxLineBytes)
		if err != nil {
			bad++
			if firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", path, err)
			}
			// Still in saved: the next Checkpoint deletes it unless the
			// transcript is read again and replaces it.
			a.saved[path] = 0
			continue
		}
		a.restored[path] = f
		a.saved[path] = f.gen
	}
	a.log.Info("restored saved transcript state", zap.Int("transcripts", len(a.restored)), zap.Int("unusable", bad))
	if firstErr != nil {
		a.log.Info("some saved transcript state is not usable; those transcripts are read again", zap.Int("unusable", bad), zap.NamedError("first", firstErr))
	}
}

// takeRestored returns the saved state of the transcript at path, once.
func (a *Adapter) takeRestored(path string) *fileState {
	f := a.restored[path]
	if f != nil {
		delete(a.restored, path)
	}
	return f
}

// Checkpoint implements adapters.Checkpointer: the transcripts read since
// their last save, and the saved ones no longer known (deleted, or never
// found again after a restart).
func (a *Adapter) Checkpoint() adapters.Checkpoint {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.saved == nil {
		a.saved = map[string]uint64{}
	}
	// Nothing read, added or removed since the last committed checkpoint
	// (and no restored entry left to drop): nothing to save, and no need
	// to walk every transcript to find that out.
	shape := a.shapePrint()
	if a.cpShapeOK && shape == a.cpShape && a.restored == nil {
		return adapters.Checkpoint{Commit: func() {}}
	}
	cp := adapters.Checkpoint{Put: map[string][]byte{}}
	gens := map[string]uint64{}
	live := map[string]bool{}
	for _, r := range a.roots {
		for _, p := range r.projects {
			for _, f := range p.files {
				if !f.read {
					continue
				}
				live[f.path] = true
				if g, ok := a.saved[f.path]; ok && g == f.gen {
					continue
				}
				cp.Put[f.path] = encodeFileState(f, a.cfg.WindowBytes, a.cfg.MaxLineBytes)
				gens[f.path] = f.gen
			}
		}
	}
	// Restored entries not yet matched stay until a pass has run: a
	// Checkpoint before the first Discover must not drop them.
	for path := range a.saved {
		if !live[path] && a.restored[path] == nil {
			cp.Del = append(cp.Del, path)
		}
	}
	cp.Commit = func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.cpShape, a.cpShapeOK = shape, true
		for path, g := range gens {
			a.saved[path] = g
		}
		for _, path := range cp.Del {
			delete(a.saved, path)
		}
	}
	return cp
}

// encodeFileState writes f in checkpointFormat: uvarints and varints,
// strings as a length and bytes, times as a flag then seconds and
// nanoseconds.
func encodeFileState(f *fileState, window, maxLine int) []byte {
	w := cpWriter{b: make([]byte, 0, 256)}
	w.b = append(w.b, checkpointFormat)
	w.uvarint(uint64(window))
	w.uvarint(uint64(maxLine))
	var flags byte
	if f.hasID {
		flags |= 1
	}
	if f.skipPartial {
		flags |= 2
	}
	if f.sum.customTitle {
		flags |= 4
	}
	w.b = append(w.b, flags)
	w.uvarint(f.dev)
	w.uvarint(f.ino)
	w.varint(f.size)
	w.varint(f.offset)
	w.time(f.mtime)

	s := &f.sum
	w.str(s.SessionID)
	w.str(s.Cwd)
	w.str(s.Version)
	w.str(s.GitBranch)
	w.str(s.Title)
	w.time(s.First)
	w.time(s.Last)
	w.uvarint(uint64(len(s.Pending)))
	for _, tc := range s.Pending {
		w.str(tc.ID)
		w.str(tc.Name)
		w.str(tc.Input)
		w.time(tc.At)
	}
	w.uvarint(uint64(s.pendingDropped))
	if p := s.Prompt; p == nil {
		w.b = append(w.b, 0)
	} else {
		w.b = append(w.b, 1)
		w.str(p.Type)
		w.str(p.UUID)
		w.str(p.SessionID)
		w.str(p.Cwd)
		w.str(p.Version)
		w.str(p.GitBranch)
		w.time(p.Time)
		w.bool(p.Sidechain)
		w.uvarint(uint64(p.Kind))
		w.str(p.Prompt)
		w.str(p.StopReason)
		w.str(p.Title)
	}
	w.uvarint(uint64(s.state))
	w.time(s.stateAt)
	w.str(s.stateUUID)
	w.str(s.stopReason)

	for _, n := range []int64{f.bad.lines, f.bad.tooLong, f.bad.corrupt, f.bad.glued, f.bad.longHead} {
		w.varint(n)
	}
	return w.b
}

// errOtherConfig: the entry was made with another window or line limit, so
// its summary may differ from what this configuration would read.
var errOtherConfig = errors.New("saved with another window or line limit")

// decodeFileState reads an entry of encodeFileState. Any error means the
// entry is not used (the transcript is read again); it never panics on
// garbage.
func decodeFileState(path string, b []byte, window, maxLine int) (*fileState, error) {
	if !IsTranscriptName(filepath.Base(path)) || !filepath.IsAbs(path) {
		return nil, errors.New("not a transcript path")
	}
	r := cpReader{b: b}
	if v := r.byte(); r.err == nil && v != checkpointFormat {
		return nil, fmt.Errorf("format %d, this build reads %d", v, checkpointFormat)
	}
	if w, m := r.uvarint(), r.uvarint(); r.err == nil && (w != uint64(window) || m != uint64(maxLine)) {
		return nil, errOtherConfig
	}
	f := &fileState{path: path, id: strings.TrimSuffix(filepath.Base(path), ".jsonl"), read: true}
	flags := r.byte()
	f.hasID, f.skipPartial, f.sum.customTitle = flags&1 != 0, flags&2 != 0, flags&4 != 0
	f.dev = r.uvarint()
	f.ino = r.uvarint()
	f.size = r.varint()
	f.offset = r.varint()
	f.mtime = r.time().Local()

	s := &f.sum
	s.SessionID = r.str()
	s.Cwd = r.str()
	s.Version = r.str()
	s.GitBranch = r.str()
	s.Title = r.str()
	s.First = r.time()
	s.Last = r.time()
	n := r.uvarint()
	if n > maxPending {
		r.fail("more pending tool calls than are kept")
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		s.Pending = append(s.Pending, ToolCall{ID: r.str(), Name: r.str(), Input: r.str(), At: r.time()})
	}
	s.pendingDropped = int(r.uvarint())
	switch r.byte() {
	case 0:
	case 1:
		p := &Line{}
		p.Type = r.str()
		p.UUID = r.str()
		p.SessionID = r.str()
		p.Cwd = r.str()
		p.Version = r.str()
		p.GitBranch = r.str()
		p.Time = r.time()
		p.Sidechain = r.bool()
		p.Kind = LineKind(r.uvarint())
		p.Prompt = r.str()
		p.StopReason = r.str()
		p.Title = r.str()
		if p.Kind > KindAssistant {
			r.fail("unknown line kind")
		}
		s.Prompt = p
	default:
		r.fail("bad prompt flag")
	}
	s.state = turnState(r.uvarint())
	if s.state > turnInterrupted {
		r.fail("unknown turn state")
	}
	s.stateAt = r.time()
	s.stateUUID = r.str()
	s.stopReason = r.str()
	for _, p := range []*int64{&f.bad.lines, &f.bad.tooLong, &f.bad.corrupt, &f.bad.glued, &f.bad.longHead} {
		*p = r.varint()
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail("trailing bytes")
	}
	if r.err == nil && (f.size < 0 || f.offset < 0 || f.offset > f.size || s.pendingDropped < 0) {
		r.fail("offsets out of range")
	}
	if r.err != nil {
		return nil, r.err
	}
	return f, nil
}

type cpWriter struct{ b []byte }

func (w *cpWriter) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *cpWriter) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *cpWriter) str(s string)     { w.uvarint(uint64(len(s))); w.b = append(w.b, s...) }
func (w *cpWriter) bool(v bool) {
	if v {
		w.b = append(w.b, 1)
	} else {
		w.b = append(w.b, 0)
	}
}

// time keeps the instant, not the location: summaries hold UTC times, and
// a file's mtime is compared with Equal.
func (w *cpWriter) time(t time.Time) {
	if t.IsZero() {
		w.b = append(w.b, 0)
		return
	}
	w.b = append(w.b, 1)
	w.varint(t.Unix())
	w.uvarint(uint64(t.Nanosecond()))
}

// cpReader reads what cpWriter wrote. The first error sticks; later reads
// return zero values.
type cpReader struct {
	b   []byte
	err error
}

func (r *cpReader) fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
}

func (r *cpReader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *cpReader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *cpReader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *cpReader) str() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.fail("string past the end")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *cpReader) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail("bad bool")
	return false
}

func (r *cpReader) time() time.Time {
	switch r.byte() {
	case 0:
		return time.Time{}
	case 1:
	default:
		r.fail("bad time flag")
		return time.Time{}
	}
	sec, nsec := r.varint(), r.uvarint()
	if r.err != nil {
		return time.Time{}
	}
	if nsec >= 1e9 {
		r.fail("bad nanoseconds")
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}
