package kit

import (
	"bufio"
	"io"
	"sync"
)

// ReaderSize is the buffer of a pooled line reader: a line that fits is
// read without a copy (bufio.Reader.ReadSlice).
const ReaderSize = 64 << 10

// readers are the adapters' line readers, kept between reads: a first
// pass reads every file of a home once, and a new 64 KiB reader per file
// was 128 MB allocated and zeroed over 2,000 Gemini chats (a quarter of
// that pass's allocations).
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, ReaderSize) }}

// Reader returns a line reader of ReaderSize over r. Give it back with
// PutReader once no slice read from it is in use: what a read keeps must
// be copied out, as it must already be, since each read reuses the buffer.
func Reader(r io.Reader) *bufio.Reader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return br
}

// PutReader gives br back to the pool; br must not be used after.
func PutReader(br *bufio.Reader) {
	br.Reset(nil) // let go of the file
	readers.Put(br)
}
