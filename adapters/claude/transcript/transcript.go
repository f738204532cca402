// Package transcript reads Claude Code's session transcripts,
// <root>/projects/<dir>/<uuid>.jsonl, into a Summary: the session's
// metadata and where its last turn stands, brought up to date by each read.
//
// The reads are the I/O (this file): List reads a transcript the first
// time, its head for the metadata and its tail back to the last turn's
// start, in growing chunks within a window; ReadAppended reads what was
// appended since the last read ended (Result.Offset); Tail reads a tail
// again after a growth too large to read. Lines are parsed by a one-pass
// scanner (line.go, linescan.go); corrupt, glued and overlong lines are
// skipped and counted (Counts), never fatal. The summary (summary.go) is
// the pure part: the lines, applied in file order, move it.
package transcript

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/sessiond/sessiond/adapters/internal/kit"
)

// DefaultWindow is the head and tail window a listing reads unless told
// otherwise (the claude adapter's default Config.WindowBytes); read
// buffers are pooled at its size.
const DefaultWindow = 64 << 10

// IsName reports whether a file name in a project folder is a
// session transcript, <uuid>.jsonl; subagent files (agent-*.jsonl) and the
// <uuid>/subagents/ folders are not sessions. It is checked by hand, since
// every listing asks it of every file (a regexp was 6 % of a restart); the
// tests hold it to that regexp (transcriptName).
func IsName(name string) bool {
	const uuidLen = 36
	if len(name) != uuidLen+len(".jsonl") || name[uuidLen:] != ".jsonl" {
		return false
	}
	for i := range uuidLen {
		c := name[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}

// Counts are a read's line counters.
type Counts struct {
	Lines, TooLong, Corrupt, Glued int64
	// LongHead: the first line is longer than the head window, so the
	// listing could not read it (nor the session's metadata in it).
	LongHead int64
}

func (c *Counts) Add(o Counts) {
	c.Lines += o.Lines
	c.TooLong += o.TooLong
	c.Corrupt += o.Corrupt
	c.Glued += o.Glued
	c.LongHead += o.LongHead
}

// Describe says what was wrong with a transcript's lines, "" if nothing.
func (c Counts) Describe(maxLine, window int) string {
	var parts []string
	plural := func(n int64, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	if c.Corrupt > 0 {
		parts = append(parts, plural(c.Corrupt, "corrupt line")+" skipped")
	}
	if c.Glued > 0 {
		parts = append(parts, plural(c.Glued, "glued line")+" split into records")
	}
	if c.TooLong > 0 {
		parts = append(parts, plural(c.TooLong, "line")+fmt.Sprintf(" longer than %d bytes skipped", maxLine))
	}
	if c.LongHead > 0 {
		parts = append(parts, fmt.Sprintf("first line longer than the %d byte head window: not read", window))
	}
	if len(parts) == 0 {
		return ""
	}
	return "transcript: " + strings.Join(parts, ", ")
}

// parsedLines parses the lines of a window at most once each and counts
// what it saw.
type parsedLines struct {
	raw    [][]byte
	done   []bool
	parsed [][]Line
	c      Counts
}

func newParsed(raw [][]byte) *parsedLines {
	return &parsedLines{raw: raw, done: make([]bool, len(raw)), parsed: make([][]Line, len(raw))}
}

func (p *parsedLines) get(i int) []Line {
	if !p.done[i] {
		p.done[i] = true
		p.parsed[i] = parseCounted(nil, p.raw[i], &p.c)
	}
	return p.parsed[i]
}

// parseCounted parses one line, appending its records to dst, and counts
// corrupt and glued lines.
func parseCounted(dst []Line, b []byte, c *Counts) []Line {
	c.Lines++
	n := len(dst)
	dst, err := parseLineAppend(dst, b)
	if err != nil {
		c.Corrupt++
	}
	if len(dst)-n > 1 {
		c.Glued++
	}
	return dst
}

// lineArena holds the records one read of a transcript parses, in one
// array that the next read uses again (arenas are pooled): a record was
// an allocation of its own, half of what a first start over 10,000
// transcripts allocated while reading them, and so half of what made the
// collector run. Nothing may keep a record, or a slice of them, past
// putArena: the summary copies what it keeps.
type lineArena struct {
	buf []Line
	// The tail's scratch, used again as buf is: the lines it holds back
	// (newest first) and the newlines it found.
	back [][]Line
	nl   []int64
}

// arenaMax is the most records an arena may hold and still be pooled
// (a transcript whose turn runs to thousands of lines would otherwise
// pin its array).
const arenaMax = 256

var arenas = sync.Pool{New: func() any { return new(lineArena) }}

func getArena() *lineArena { return arenas.Get().(*lineArena) }

func putArena(a *lineArena) {
	if cap(a.buf) > arenaMax {
		return
	}
	clear(a.buf) // the records' strings are the transcript's: let them go
	clear(a.back)
	a.buf, a.back, a.nl = a.buf[:0], a.back[:0], a.nl[:0]
	arenas.Put(a)
}

// parse parses line b (see parseCounted) into the arena and returns its
// records. They stay valid while more lines are parsed: an array that
// fills is left to the slices already handed out, and a larger one begun.
func (a *lineArena) parse(b []byte, c *Counts) []Line {
	if a == nil {
		return parseCounted(nil, b, c)
	}
	start := len(a.buf)
	a.buf = parseCounted(a.buf, b, c)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// splitLines returns the complete lines of buf and the length of the
// unterminated rest.
func splitLines(buf []byte) (lines [][]byte, rest int) {
	for len(buf) > 0 {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			return lines, len(buf)
		}
		if i > 0 {
			lines = append(lines, buf[:i])
		}
		buf = buf[i+1:]
	}
	return lines, 0
}

// readHead applies the metadata of the first lines until the head has told
// everything (session id, cwd, first time, title) or the lines run out. It
// returns how many lines it looked at.
func readHead(s *Summary, p *parsedLines) int {
	for i := range p.raw {
		s.applyHead(p.get(i))
		if s.headDone() {
			return i + 1
		}
	}
	return len(p.raw)
}

// readTail reads the last turn: it walks back from the end to the last real
// prompt (or the window's start), then applies those lines in order.
func readTail(s *Summary, p *parsedLines, from int) {
	start := from
	for i := len(p.raw) - 1; i >= from; i-- {
		start = i
		if isTurnStart(p.get(i)) {
			break
		}
	}
	for i := start; i < len(p.raw); i++ {
		s.apply(p.get(i))
	}
}

// ReadAtFull reads len(buf) bytes at off, or fewer at the end of the file.
func ReadAtFull(r io.ReaderAt, buf []byte, off int64) (int, error) {
	n, err := r.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// Result is the outcome of reading (part of) a transcript.
type Result struct {
	Offset      int64 // end of the last complete line consumed
	SkipPartial bool  // offset is inside a line: skip to its end first
	Counts      Counts
}

// headChunk and tailChunk are the first reads of a transcript's head and
// tail; each further read doubles what was read, up to the window. Most
// heads tell everything in their first lines and most tails reach the last
// prompt within a turn, so a listing rarely reads the whole windows.
// (Variables so that tests can make them tiny.)
var (
	headChunk int64 = 4 << 10
	tailChunk int64 = 8 << 10
)

// List reads a transcript the first time (or after a restart): its first
// lines until the head has told everything, and its last lines back to the
// last turn's start, each read in growing chunks and at most the first and
// the last window bytes. A file up to two windows is treated as one window.
// The result is what listWhole gives; if the file changes under the reads
// (a read comes back short), List does what listWhole does.
func List(r io.ReaderAt, size int64, window int, s *Summary) (Result, error) {
	saved := *s
	res, ok, err := listChunked(r, size, window, s)
	if err != nil || ok {
		return res, err
	}
	*s = saved
	return listWhole(r, size, window, s)
}

// Tail reads the last window of a file into the turn state (which the
// caller has reset), from the end back to the last turn's start only, and
// sets the offset at the window's end. The result is what tailWhole gives;
// if the file changes under the reads, Tail does what tailWhole does.
func Tail(r io.ReaderAt, size int64, window int, s *Summary, res *Result) error {
	ok, err := tailChunked(r, size, window, s, res)
	if err != nil || ok {
		return err
	}
	return tailWhole(r, size, window, s, res)
}

// tailChunked is Tail without the fallback: ok is false if the file
// changed under the reads (s and res are then untouched).
func tailChunked(r io.ReaderAt, size int64, window int, s *Summary, res *Result) (bool, error) {
	bp := getBuf(min(window+1, int(size)))
	defer putBuf(bp)
	a := getArena()
	defer putArena(a)
	base := max(size-int64(window)-1, 0)
	v := view{r: r, buf: (*bp)[:size-base], base: base, lines: a}
	return readTailChunked(&v, size, base, nil, s, res)
}

// view holds file bytes [base, base+len(buf)) as they are read in, and
// the records parsed from them.
type view struct {
	r    io.ReaderAt
	buf  []byte
	base int64
	// have: bytes [base, have) were read by the head (a small file's head
	// and tail share one view).
	have  int64
	lines *lineArena
}

// load reads file bytes [from, to); false if the file ended first.
func (v *view) load(from, to int64) (bool, error) {
	from = max(from, v.have)
	if from >= to {
		return true, nil
	}
	n, err := ReadAtFull(v.r, v.buf[from-v.base:to-v.base], from)
	if err != nil {
		return false, err
	}
	return int64(n) == to-from, nil
}

func (v *view) bytes(from, to int64) []byte { return v.buf[from-v.base : to-v.base] }

// headLine is a line the head parsed, by its start in the file.
type headLine struct {
	start int64
	ls    []Line
}

// listChunked is List without the fallback: ok is false if the file
// changed under the reads (s is then partly updated).
func listChunked(r io.ReaderAt, size int64, window int, s *Summary) (res Result, ok bool, err error) {
	if size <= 2*int64(window) {
		// One window: head and tail share the bytes, and a line both
		// look at is parsed (and counted) once.
		bp := getBuf(int(size))
		defer putBuf(bp)
		a := getArena()
		defer putArena(a)
		v := view{r: r, buf: (*bp)[:size], lines: a}
		h, ok, err := readHeadChunked(&v, size, s, &res.Counts)
		if err != nil || !ok {
			return res, false, err
		}
		v.have = h.hi
		ok, err = readTailChunked(&v, size, 0, h.lines, s, &res)
		return res, ok, err
	}
	bp := getBuf(window)
	a := getArena()
	v := view{r: r, buf: (*bp)[:window], lines: a}
	h, ok, err := readHeadChunked(&v, int64(window), s, &res.Counts)
	putArena(a) // h.lines are not used past here
	putBuf(bp)
	if err != nil || !ok {
		return res, false, err
	}
	if h.hi == int64(window) && !h.newline {
		res.Counts.LongHead++
	}
	ok, err = tailChunked(r, size, window, s, &res)
	return res, ok, err
}

// headRead is what readHeadChunked saw.
type headRead struct {
	hi      int64      // bytes [0, hi) were read
	newline bool       // they hold a newline
	lines   []headLine // the lines parsed, in file order
}

// readHeadChunked applies the metadata of the first complete lines within
// limit bytes, as readHead does, reading them in growing chunks only until
// the head has told everything. ok is false if the file ended before limit.
func readHeadChunked(v *view, limit int64, s *Summary, c *Counts) (h headRead, ok bool, err error) {
	pos := int64(0) // start of the next line
	for {
		to := min(limit, max(headChunk, 2*h.hi))
		full, err := v.load(h.hi, to)
		if err != nil || !full {
			return h, false, err
		}
		h.hi = to
		for {
			j := bytes.IndexByte(v.bytes(pos, h.hi), '\n')
			if j < 0 {
				break
			}
			h.newline = true
			end := pos + int64(j)
			if end > pos {
				ls := v.lines.parse(v.bytes(pos, end), c)
				h.lines = append(h.lines, headLine{pos, ls})
				s.applyHead(ls)
				if s.headDone() {
					return h, true, nil
				}
			}
			pos = end + 1
		}
		if h.hi == limit {
			return h, true, nil
		}
	}
}

// readTailChunked reads the last turn of file bytes [ws, size) as
// tailWhole reads its window: the lines that begin after a newline at or
// past ws (or at 0), from the end back to the last real prompt (or the
// window's first line), applied in order; res.offset is the end of the last
// complete line. It reads backwards in growing chunks, only as far as it
// needs. head holds lines already parsed at the file's start (a small
// file's head, v.have bytes), reused rather than parsed again. ok is false
// if the file ended before size (s is then untouched).
func readTailChunked(v *view, size, ws int64, head []headLine, s *Summary, res *Result) (ok bool, err error) {
	var c Counts
	var lines [][]Line // newest first
	var nl []int64     // the newlines in [lo, size), newest first
	lo := size         // bytes [lo, size) are read
	i := 0             // nl[i] ends the next line back
	if a := v.lines; a != nil {
		lines, nl = a.back[:0], a.nl[:0]
		defer func() { a.back, a.nl = lines, nl }()
	}
	for {
		newLo := nextTailLo(lo, size, ws)
		full, err := v.load(newLo, lo)
		if err != nil || !full {
			return false, err
		}
		nl = appendNewlinesBackwards(nl, v, newLo, lo)
		lo = newLo
		done := false
		for i < len(nl) {
			end := nl[i]
			var start int64
			if i+1 < len(nl) {
				start = nl[i+1] + 1
			} else if lo != 0 {
				// The line may begin before lo: read more, unless the
				// window is all read (then it began before the window).
				break
			}
			if end > start {
				ls, ok := headParsed(head, v.have, start)
				if !ok {
					ls = v.lines.parse(v.bytes(start, end), &c)
				}
				lines = append(lines, ls)
				if isTurnStart(ls) {
					done = true
					break
				}
			}
			i++
			if start == 0 {
				done = true
				break
			}
		}
		if done || lo == ws {
			break
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		s.apply(lines[i])
	}
	res.Counts.Add(c)
	switch {
	case len(nl) > 0:
		res.Offset = nl[0] + 1
	case ws > 0:
		// No newline in the window: it is all inside one line.
		res.Offset = size
		res.SkipPartial = true
	default:
		res.Offset = 0
	}
	return true, nil
}

// nextTailLo is where the tail's next read begins: the reads grow from
// tailChunk, doubling what was read, down to ws at most.
func nextTailLo(lo, size, ws int64) int64 {
	return max(ws, size-max(tailChunk, 2*(size-lo)))
}

// appendNewlinesBackwards appends the newlines of file bytes [from, to) to
// nl, the last first.
func appendNewlinesBackwards(nl []int64, v *view, from, to int64) []int64 {
	n := len(nl)
	for p := from; p < to; {
		j := bytes.IndexByte(v.bytes(p, to), '\n')
		if j < 0 {
			break
		}
		nl = append(nl, p+int64(j))
		p += int64(j) + 1
	}
	slices.Reverse(nl[n:])
	return nl
}

// headParsed is the line the head parsed at start, if it did.
func headParsed(head []headLine, have, start int64) ([]Line, bool) {
	if start >= have {
		return nil, false
	}
	k := sort.Search(len(head), func(k int) bool { return head[k].start >= start })
	if k < len(head) && head[k].start == start {
		return head[k].ls, true
	}
	return nil, false
}

// listWhole reads a transcript the first time (or after a restart): the
// whole first and last window bytes. A file up to two windows is read
// whole. It is what List does when the file changes under a chunked read,
// and the reference List is held to.
func listWhole(r io.ReaderAt, size int64, window int, s *Summary) (Result, error) {
	var res Result
	if size <= 2*int64(window) {
		bp := getBuf(int(size))
		defer putBuf(bp)
		buf := (*bp)[:size]
		n, err := ReadAtFull(r, buf, 0)
		if err != nil {
			return res, err
		}
		buf = buf[:n]
		lines, rest := splitLines(buf)
		p := newParsed(lines)
		readHead(s, p)
		readTail(s, p, 0)
		res.Offset = int64(n - rest)
		res.Counts = p.c
		return res, nil
	}
	bp := getBuf(window)
	head := (*bp)[:window]
	n, err := ReadAtFull(r, head, 0)
	if err != nil {
		putBuf(bp)
		return res, err
	}
	hl, _ := splitLines(head[:n])
	if n == window && bytes.IndexByte(head[:n], '\n') < 0 {
		res.Counts.LongHead++
	}
	hp := newParsed(hl)
	readHead(s, hp)
	putBuf(bp)
	res.Counts.Add(hp.c)
	err = tailWhole(r, size, window, s, &res)
	return res, err
}

// tailWhole reads the whole last window of a file into the turn state
// (which the caller has reset) and sets the offset at the window's end.
// It is what Tail does when the file changes under a chunked read, and the
// reference Tail is held to.
func tailWhole(r io.ReaderAt, size int64, window int, s *Summary, res *Result) error {
	start := size - int64(window) - 1 // one byte more: is the window at a line start?
	if start < 0 {
		start = 0
	}
	bp := getBuf(int(size - start))
	defer putBuf(bp)
	buf := (*bp)[:size-start]
	n, err := ReadAtFull(r, buf, start)
	if err != nil {
		return err
	}
	buf = buf[:n]
	if start > 0 {
		// The first bytes up to a newline end a line that began before the
		// window: not a whole line.
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			res.Offset = start + int64(n)
			res.SkipPartial = true
			return nil
		}
		buf = buf[i+1:]
		start += int64(i + 1)
	}
	lines, rest := splitLines(buf)
	p := newParsed(lines)
	readTail(s, p, 0)
	res.Counts.Add(p.c)
	res.Offset = start + int64(len(buf)-rest)
	return nil
}

// ReadAppended reads the bytes appended since offset, line by line, with
// lines longer than maxLine skipped and counted.
func ReadAppended(r io.ReaderAt, offset, size int64, skipPartial bool, maxLine int, s *Summary) (Result, error) {
	res := Result{Offset: offset, SkipPartial: skipPartial}
	// A busy session's transcript is read again at every pass it grew,
	// a few KiB at a time: the line reader is a pooled one.
	br := kit.Reader(io.NewSectionReader(r, offset, size-offset))
	defer kit.PutReader(br)
	var buf []byte
	var parsed []Line // one line's records, used up before the next
	for {
		line, n, tooLong, complete, err := readLine(br, maxLine, buf[:0])
		buf = line
		switch {
		case complete && res.SkipPartial:
			res.SkipPartial = false
		case complete && tooLong:
			res.Counts.Lines++
			res.Counts.TooLong++
		case complete:
			parsed = parseCounted(parsed[:0], line, &res.Counts)
			s.apply(parsed)
		case tooLong:
			// An unfinished line already past the cap: consume it now so it
			// is never re-read, and skip its end when it comes.
			if !res.SkipPartial {
				res.Counts.Lines++
				res.Counts.TooLong++
			}
			res.SkipPartial = true
		default:
			// An unfinished line: leave it for the next read.
			n = 0
		}
		res.Offset += int64(n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return res, nil
			}
			return res, err
		}
		if !complete {
			return res, nil
		}
	}
}

// readLine reads one line. n is the bytes consumed; the line is returned
// without its newline unless it is longer than maxLine (then tooLong and
// the content is dropped). complete is false at the end of the input
// before a newline.
func readLine(r *bufio.Reader, maxLine int, buf []byte) (line []byte, n int, tooLong, complete bool, err error) {
	for {
		frag, err := r.ReadSlice('\n')
		n += len(frag)
		if !tooLong {
			if len(buf)+len(frag) > maxLine+1 {
				tooLong = true
				buf = buf[:0]
			} else {
				buf = append(buf, frag...)
			}
		}
		switch {
		case err == nil:
			if len(buf) > 0 {
				buf = buf[:len(buf)-1]
			}
			return buf, n, tooLong, true, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return buf, n, tooLong, false, err
		}
	}
}

// bufPool holds read buffers for listings, so a cold pass over thousands
// of files does not allocate 128 KB per file. Parsed lines copy what they
// keep, so a buffer is free again once its file is parsed.
var bufPool sync.Pool

func getBuf(n int) *[]byte {
	if p, ok := bufPool.Get().(*[]byte); ok && cap(*p) >= n {
		return p
	}
	b := make([]byte, max(n, 2*DefaultWindow+1))
	return &b
}

func putBuf(p *[]byte) {
	if cap(*p) <= 4*DefaultWindow+1 {
		bufPool.Put(p)
	}
}
