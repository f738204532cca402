package claude

import (
	"io"
	"io/fs"
	"os"
	"sync/atomic"
)

// FS is the file system the adapter reads. The default is the OS; tests
// inject failures and count bytes through it (a test running as root cannot
// make a directory unreadable with permissions).
type FS interface {
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat follows symbolic links; its FileInfo.Sys() should be a
	// *syscall.Stat_t so the adapter can key files on (device, inode).
	Stat(name string) (fs.FileInfo, error)
	Open(name string) (File, error)
}

// File is an open file. Everything the adapter reads goes through ReadAt.
type File interface {
	io.ReaderAt
	io.Closer
}

// osFS is the real file system.
type osFS struct{}

// ReadDir implements FS.
func (osFS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Stat implements FS.
func (osFS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Open implements FS. The kernel is told the reads will be random: a
// listing reads a few KiB at each end of a transcript, and the default
// readahead (128 KiB from the first read) would triple what a cold start
// reads from disk (openRandom, per OS).
func (osFS) Open(name string) (File, error) { return openRandom(name) }

// countingFile counts the bytes read through it.
type countingFile struct {
	File
	n *atomic.Int64
}

func (f countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.n.Add(int64(n))
	return n, err
}
