package claude

import (
	"io"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"
)

// openRandom opens a transcript or registry entry for reading with pread
// and tells the kernel the reads will be random.
//
// It holds the bare descriptor rather than an *os.File: os.Open makes a
// regular file non-blocking, offers it to the netpoller (which refuses it)
// and makes it blocking again, five system calls of no use here that cost
// a 10,000-transcript first start ~30 ms of CPU on 2 cores, beside the
// kernel's own work for the reads. O_NONBLOCK does nothing to a regular
// file's reads; it only keeps a FIFO swapped in after the listing from
// blocking the open (its pread then fails with ESPIPE).
func openRandom(name string) (File, error) {
	var fd int
	var err error
	for {
		fd, err = unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	// FADV_RANDOM turns readahead off; a failure only costs readahead.
	_ = unix.Fadvise(fd, 0, 0, unix.FADV_RANDOM)
	return &fdFile{fd: fd, name: name}, nil
}

// fdFile is an open descriptor read with pread, as os.File.ReadAt reads.
type fdFile struct {
	fd   int
	name string
}

// ReadAt implements io.ReaderAt: it reads until p is full, the file ends
// (io.EOF) or a read fails.
func (f *fdFile) ReadAt(p []byte, off int64) (int, error) {
	if f.fd < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: os.ErrClosed}
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "readat", Path: f.name, Err: fs.ErrInvalid}
	}
	n := 0
	for n < len(p) {
		m, err := unix.Pread(f.fd, p[n:], off+int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return n, &fs.PathError{Op: "read", Path: f.name, Err: err}
		}
		if m == 0 {
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// Close closes the descriptor once.
func (f *fdFile) Close() error {
	if f.fd < 0 {
		return &fs.PathError{Op: "close", Path: f.name, Err: os.ErrClosed}
	}
	err := unix.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}
