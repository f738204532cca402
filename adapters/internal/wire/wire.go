// Package wire is the small binary encoding adapters save their state in
// (see adapters.Checkpointer): uvarints, varints, length-prefixed strings
// and one-byte booleans. A Reader's first error sticks and later reads
// return zero values, so a decoder reads a whole entry and checks one error
// at the end; it never panics on garbage and never reads past the end.
// The meaning of each field is the adapter's own.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Writer appends encoded values to B.
type Writer struct{ B []byte }

// Byte appends one byte.
func (w *Writer) Byte(v byte) { w.B = append(w.B, v) }

// Uvarint appends v as a uvarint.
func (w *Writer) Uvarint(v uint64) { w.B = binary.AppendUvarint(w.B, v) }

// Varint appends v as a zig-zag varint.
func (w *Writer) Varint(v int64) { w.B = binary.AppendVarint(w.B, v) }

// Str appends s as its length (a uvarint) and its bytes.
func (w *Writer) Str(s string) {
	w.Uvarint(uint64(len(s)))
	w.B = append(w.B, s...)
}

// Bool appends 1 or 0.
func (w *Writer) Bool(v bool) {
	if v {
		w.B = append(w.B, 1)
	} else {
		w.B = append(w.B, 0)
	}
}

// Time appends the instant t (not its location) as a flag, then seconds
// and nanoseconds; the zero time is the flag alone.
func (w *Writer) Time(t time.Time) {
	if t.IsZero() {
		w.Byte(0)
		return
	}
	w.Byte(1)
	w.Varint(t.Unix())
	w.Uvarint(uint64(t.Nanosecond()))
}

// Reader reads what a Writer wrote.
type Reader struct {
	b   []byte
	err error
	// str, when set, is the whole of what the reader was made over, as a
	// string: Str hands out substrings of it (NewSharedReader).
	str string
}

// NewReader reads b. Each string read is a copy.
func NewReader(b []byte) Reader { return Reader{b: b} }

// NewSharedReader reads b, whose strings it hands out as substrings of one
// copy of b: one allocation per entry rather than one per string (a
// restart decoded 100,000 strings of 2,000 Gemini chats one by one).
// Every string read keeps that copy alive: for entries whose decoded
// state keeps most of its strings anyway.
func NewSharedReader(b []byte) Reader { return Reader{b: b, str: string(b)} }

// Err is the first error met, nil if none.
func (r *Reader) Err() error { return r.err }

// Fail records msg as the error unless there is one already.
func (r *Reader) Fail(msg string) {
	if r.err == nil {
		r.err = errors.New(msg)
	}
}

// setErr records err unless there is an error already.
func (r *Reader) setErr(err error) {
	if r.err == nil {
		r.err = err
	}
}

// remaining is the number of bytes not read yet.
func (r *Reader) remaining() int { return len(r.b) }

// Format reads an entry's first byte, the format it was written in, and
// fails unless it is want. An adapter bumps its format when its layout
// changes, or what the state it saves means (a parser fix that would
// conclude differently from the same input): an entry of another format is
// then not used, and its input is read again.
func (r *Reader) Format(want byte) {
	if r.err != nil {
		return
	}
	if len(r.b) == 0 {
		r.Fail("empty entry")
		return
	}
	if v := r.Byte(); v != want {
		r.err = fmt.Errorf("format %d, this build reads %d", v, want)
	}
}

// End fails when bytes are left: an entry is read whole or not at all.
func (r *Reader) End() {
	if r.err == nil && len(r.b) != 0 {
		r.Fail("trailing bytes")
	}
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.Fail("truncated")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

// Uvarint reads a uvarint.
func (r *Reader) Uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.Fail("bad uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Varint reads a zig-zag varint.
func (r *Reader) Varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.Fail("bad varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// Str reads a length-prefixed string; a length past the end fails.
func (r *Reader) Str() string {
	n := r.Uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.Fail("string past the end")
		return ""
	}
	var s string
	if r.str != "" {
		at := len(r.str) - len(r.b)
		s = r.str[at : at+int(n)]
	} else {
		s = string(r.b[:n])
	}
	r.b = r.b[n:]
	return s
}

// Bool reads a byte that must be 0 or 1.
func (r *Reader) Bool() bool {
	switch r.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.Fail("bad bool")
	return false
}

// Time reads what Writer.Time wrote, in UTC.
func (r *Reader) Time() time.Time {
	switch r.Byte() {
	case 0:
		return time.Time{}
	case 1:
	default:
		r.Fail("bad time flag")
		return time.Time{}
	}
	sec, nsec := r.Varint(), r.Uvarint()
	if r.err != nil {
		return time.Time{}
	}
	if nsec >= 1e9 {
		r.Fail("bad nanoseconds")
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}
