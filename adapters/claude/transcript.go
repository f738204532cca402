package claude

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"
)

// transcriptName matches session transcripts: <uuid>.jsonl. Subagent files
// (agent-*.jsonl) and the <uuid>/subagents/ folders are not sessions.
var transcriptName = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.jsonl$`)

// IsTranscriptName reports whether a file name in a project folder is a
// session transcript.
func IsTranscriptName(name string) bool { return transcriptName.MatchString(name) }

// turnState is where the last turn of a transcript stands.
type turnState int

const (
	turnNone        turnState = iota
	turnPrompt                // a real prompt, no reply yet
	turnToolResult            // tool results sent, no assistant reply yet
	turnAssistant             // the assistant wrote last
	turnInterrupted           // the user interrupted the turn
)

// summary is what a transcript shows, kept per file and updated as the
// file grows. Only the last turn's state is kept: work left unfinished in
// an earlier turn was abandoned when the next prompt came.
type summary struct {
	SessionID string
	Cwd       string
	Version   string
	GitBranch string
	Title     string
	First     time.Time
	Last      time.Time
	// Pending are tool calls of the last turn that have no result yet,
	// the newest maxPending of them.
	Pending []ToolCall
	// pendingDropped counts older calls without results that did not fit.
	pendingDropped int
	// Prompt is the last turn's prompt while it has no reply.
	Prompt *Line

	customTitle bool
	state       turnState
	stateAt     time.Time
	stateUUID   string
	stopReason  string
}

// counts are a read's line counters.
type counts struct {
	lines, tooLong, corrupt, glued int64
	// longHead: the first line is longer than the head window, so the
	// listing could not read it (nor the session's metadata in it).
	longHead int64
}

func (c *counts) add(o counts) {
	c.lines += o.lines
	c.tooLong += o.tooLong
	c.corrupt += o.corrupt
	c.glued += o.glued
	c.longHead += o.longHead
}

// describe says what was wrong with a transcript's lines, "" if nothing.
func (c counts) describe(maxLine, window int) string {
	var parts []string
	plural := func(n int64, what string) string {
		if n == 1 {
			return "1 " + what
		}
		return fmt.Sprintf("%d %ss", n, what)
	}
	if c.corrupt > 0 {
		parts = append(parts, plural(c.corrupt, "corrupt line")+" skipped")
	}
	if c.glued > 0 {
		parts = append(parts, plural(c.glued, "glued line")+" split into records")
	}
	if c.tooLong > 0 {
		parts = append(parts, plural(c.tooLong, "line")+fmt.Sprintf(" longer than %d bytes skipped", maxLine))
	}
	if c.longHead > 0 {
		parts = append(parts, fmt.Sprintf("first line longer than the %d byte head window: not read", window))
	}
	if len(parts) == 0 {
		return ""
	}
	return "transcript: " + strings.Join(parts, ", ")
}

// headDone reports whether the head of a file has told everything the head
// is read for.
func (s *summary) headDone() bool {
	return s.SessionID != "" && s.Cwd != "" && s.Title != "" && !s.First.IsZero()
}

// meta takes a line's metadata. Applied in file order: the latest version
// and branch win, the first cwd and prompt stay.
func (s *summary) meta(l *Line) {
	if s.SessionID == "" {
		s.SessionID = l.SessionID
	}
	if s.Cwd == "" {
		s.Cwd = l.Cwd
	}
	if l.Version != "" {
		s.Version = l.Version
	}
	if l.GitBranch != "" {
		s.GitBranch = l.GitBranch
	}
	if !l.Time.IsZero() {
		if s.First.IsZero() || l.Time.Before(s.First) {
			s.First = l.Time
		}
		if l.Time.After(s.Last) {
			s.Last = l.Time
		}
	}
	if l.Title != "" {
		s.Title = l.Title
		s.customTitle = true
	}
	if l.Kind == KindPrompt && !l.Sidechain && s.Title == "" {
		s.Title = Shorten(l.Prompt, titleMax)
	}
}

// turn moves the last turn's state by one line, in file order.
func (s *summary) turn(l *Line) {
	if l.Sidechain {
		return
	}
	switch l.Kind {
	case KindPrompt:
		s.Pending, s.pendingDropped = nil, 0
		p := *l
		p.Prompt = Shorten(l.Prompt, inputMax)
		p.ToolUses, p.ToolResults = nil, nil
		s.Prompt = &p
		s.set(turnPrompt, l)
	case KindToolResult:
		for _, id := range l.ToolResults {
			s.resolve(id)
		}
		s.Prompt = nil
		s.set(turnToolResult, l)
	case KindInterrupt:
		s.Pending, s.pendingDropped = nil, 0
		s.Prompt = nil
		s.set(turnInterrupted, l)
	case KindAssistant:
		for _, tc := range l.ToolUses {
			s.resolve(tc.ID) // one call written twice counts once
			if len(s.Pending) == maxPending {
				// Keep the newest: drop the oldest, and count it.
				s.Pending = append(s.Pending[:0], s.Pending[1:]...)
				s.pendingDropped++
			}
			s.Pending = append(s.Pending, tc)
		}
		s.Prompt = nil
		s.stopReason = l.StopReason
		s.set(turnAssistant, l)
	}
}

// maxPending bounds the tool calls remembered per session.
const maxPending = 64

func (s *summary) set(st turnState, l *Line) {
	s.state = st
	s.stateAt = l.Time
	s.stateUUID = l.UUID
}

func (s *summary) resolve(id string) {
	for i, tc := range s.Pending {
		if tc.ID == id {
			s.Pending = append(s.Pending[:i:i], s.Pending[i+1:]...)
			return
		}
	}
}

// resetTurn forgets the turn state (before a tail is read again).
func (s *summary) resetTurn() {
	s.Pending, s.pendingDropped = nil, 0
	s.Prompt = nil
	s.state = turnNone
	s.stateAt = time.Time{}
	s.stateUUID = ""
	s.stopReason = ""
}

// parsedLines parses the lines of a window at most once each and counts
// what it saw.
type parsedLines struct {
	raw    [][]byte
	done   []bool
	parsed [][]Line
	c      counts
}

func newParsed(raw [][]byte) *parsedLines {
	return &parsedLines{raw: raw, done: make([]bool, len(raw)), parsed: make([][]Line, len(raw))}
}

func (p *parsedLines) get(i int) []Line {
	if !p.done[i] {
		p.done[i] = true
		p.parsed[i] = parseCounted(p.raw[i], &p.c)
	}
	return p.parsed[i]
}

// parseCounted parses one line, counting corrupt and glued lines.
func parseCounted(b []byte, c *counts) []Line {
	c.lines++
	ls, err := ParseLine(b)
	if err != nil {
		c.corrupt++
	}
	if len(ls) > 1 {
		c.glued++
	}
	return ls
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
func readHead(s *summary, p *parsedLines) int {
	for i := range p.raw {
		for _, l := range p.get(i) {
			s.meta(&l)
		}
		if s.headDone() {
			return i + 1
		}
	}
	return len(p.raw)
}

// readTail reads the last turn: it walks back from the end to the last real
// prompt (or the window's start), then applies those lines in order.
func readTail(s *summary, p *parsedLines, from int) {
	start := from
	for i := len(p.raw) - 1; i >= from; i-- {
		start = i
		if isTurnStart(p.get(i)) {
			break
		}
	}
	for i := start; i < len(p.raw); i++ {
		for _, l := range p.get(i) {
			s.meta(&l)
			s.turn(&l)
		}
	}
}

func isTurnStart(ls []Line) bool {
	for _, l := range ls {
		if l.Kind == KindPrompt && !l.Sidechain {
			return true
		}
	}
	return false
}

// readAtFull reads len(buf) bytes at off, or fewer at the end of the file.
func readAtFull(r io.ReaderAt, buf []byte, off int64) (int, error) {
	n, err := r.ReadAt(buf, off)
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

// listResult is the outcome of reading (part of) a transcript.
type listResult struct {
	offset      int64 // end of the last complete line consumed
	skipPartial bool  // offset is inside a line: skip to its end first
	c           counts
}

// list reads a transcript the first time (or after a restart): only the
// first and the last window bytes. A file up to two windows is read whole.
func list(r io.ReaderAt, size int64, window int, s *summary) (listResult, error) {
	var res listResult
	if size <= 2*int64(window) {
		bp := getBuf(int(size))
		defer putBuf(bp)
		buf := (*bp)[:size]
		n, err := readAtFull(r, buf, 0)
		if err != nil {
			return res, err
		}
		buf = buf[:n]
		lines, rest := splitLines(buf)
		p := newParsed(lines)
		readHead(s, p)
		readTail(s, p, 0)
		res.offset = int64(n - rest)
		res.c = p.c
		return res, nil
	}
	bp := getBuf(window)
	head := (*bp)[:window]
	n, err := readAtFull(r, head, 0)
	if err != nil {
		putBuf(bp)
		return res, err
	}
	hl, _ := splitLines(head[:n])
	if n == window && bytes.IndexByte(head[:n], '\n') < 0 {
		res.c.longHead++
	}
	hp := newParsed(hl)
	readHead(s, hp)
	putBuf(bp)
	res.c.add(hp.c)
	err = tail(r, size, window, s, &res)
	return res, err
}

// tail reads the last window of a file into the turn state (which the
// caller has reset) and sets the offset at the window's end.
func tail(r io.ReaderAt, size int64, window int, s *summary, res *listResult) error {
	start := size - int64(window) - 1 // one byte more: is the window at a line start?
	if start < 0 {
		start = 0
	}
	bp := getBuf(int(size - start))
	defer putBuf(bp)
	buf := (*bp)[:size-start]
	n, err := readAtFull(r, buf, start)
	if err != nil {
		return err
	}
	buf = buf[:n]
	if start > 0 {
		// The first bytes up to a newline end a line that began before the
		// window: not a whole line.
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			res.offset = start + int64(n)
			res.skipPartial = true
			return nil
		}
		buf = buf[i+1:]
		start += int64(i + 1)
	}
	lines, rest := splitLines(buf)
	p := newParsed(lines)
	readTail(s, p, 0)
	res.c.add(p.c)
	res.offset = start + int64(len(buf)-rest)
	return nil
}

// appendRead reads the bytes appended since offset, line by line, with
// lines longer than maxLine skipped and counted.
func appendRead(r io.ReaderAt, offset, size int64, skipPartial bool, maxLine int, s *summary) (listResult, error) {
	res := listResult{offset: offset, skipPartial: skipPartial}
	br := bufio.NewReaderSize(io.NewSectionReader(r, offset, size-offset), 64<<10)
	var buf []byte
	for {
		line, n, tooLong, complete, err := readLine(br, maxLine, buf[:0])
		buf = line
		switch {
		case complete && res.skipPartial:
			res.skipPartial = false
		case complete && tooLong:
			res.c.lines++
			res.c.tooLong++
		case complete:
			for _, l := range parseCounted(line, &res.c) {
				s.meta(&l)
				s.turn(&l)
			}
		case tooLong:
			// An unfinished line already past the cap: consume it now so it
			// is never re-read, and skip its end when it comes.
			if !res.skipPartial {
				res.c.lines++
				res.c.tooLong++
			}
			res.skipPartial = true
		default:
			// An unfinished line: leave it for the next read.
			n = 0
		}
		res.offset += int64(n)
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
	b := make([]byte, max(n, 2*DefaultWindowBytes+1))
	return &b
}

func putBuf(p *[]byte) {
	if cap(*p) <= 4*DefaultWindowBytes+1 {
		bufPool.Put(p)
	}
}
