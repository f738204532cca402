package claude

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOpenRandomReadsAsOSFile holds the bare-descriptor file to what
// os.File.ReadAt does at every edge the adapter meets: a full read, a read
// the end cuts short (io.EOF with the bytes), a read past the end, a read
// after Close, and a second Close.
func TestOpenRandomReadsAsOSFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.jsonl")
	data := []byte("0123456789abcdef")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	want, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	got, err := openRandom(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n   int
		off int64
	}{{4, 0}, {16, 0}, {8, 12}, {4, 16}, {4, 40}, {0, 3}} {
		wb, gb := make([]byte, c.n), make([]byte, c.n)
		wn, werr := want.ReadAt(wb, c.off)
		gn, gerr := got.ReadAt(gb, c.off)
		if gn != wn || string(gb[:gn]) != string(wb[:wn]) || !errors.Is(gerr, werr) && gerr != werr {
			t.Errorf("ReadAt(%d bytes at %d) = %d %q %v; os.File: %d %q %v", c.n, c.off, gn, gb[:gn], gerr, wn, wb[:wn], werr)
		}
	}
	if _, err := got.ReadAt(make([]byte, 1), -1); err == nil {
		t.Error("ReadAt at a negative offset: no error")
	}
	if err := got.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := got.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("ReadAt after Close: %v, want os.ErrClosed", err)
	}
	if err := got.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("second Close: %v, want os.ErrClosed", err)
	}
}

// TestOpenRandomErrors: a missing file is fs.ErrNotExist with its path, as
// os.Open says it; a FIFO put where a transcript was listed neither blocks
// the open nor reads as a transcript.
func TestOpenRandomErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := openRandom(filepath.Join(dir, "gone.jsonl"))
	var pe *fs.PathError
	if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || pe.Path != filepath.Join(dir, "gone.jsonl") {
		t.Errorf("missing file: %v, want a *fs.PathError for its path wrapping fs.ErrNotExist", err)
	}
	fifo := filepath.Join(dir, "fifo.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan error, 1)
	go func() {
		f, err := openRandom(fifo)
		if err == nil {
			_, err = f.ReadAt(make([]byte, 8), 0)
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a FIFO read as a file")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("opening a FIFO with no writer blocked")
	}
}

// BenchmarkOpenRead: what a first start does per transcript before it
// parses anything (open, advise, read 4 KiB of head and 8 KiB of tail,
// close), with os.Open as the adapter opened files before and with the
// bare descriptor it opens now. Warm page cache: the system calls' cost,
// not the disk's.
//
//	go test -run='^$' -bench=BenchmarkOpenRead -count=5 ./adapters/claude/
func BenchmarkOpenRead(b *testing.B) {
	dir := b.TempDir()
	const files = 500
	data := make([]byte, 16<<10)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	paths := make([]string, files)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%04d.jsonl", i))
		if err := os.WriteFile(paths[i], data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	osOpen := func(name string) (File, error) {
		f, err := os.Open(name)
		if err == nil {
			_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
		}
		return f, err
	}
	for _, c := range []struct {
		name string
		open func(string) (File, error)
	}{{"os.Open", osOpen}, {"fd", openRandom}} {
		b.Run(c.name, func(b *testing.B) {
			head, tail := make([]byte, 4<<10), make([]byte, 8<<10)
			for b.Loop() {
				for _, p := range paths {
					f, err := c.open(p)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := f.ReadAt(head, 0); err != nil {
						b.Fatal(err)
					}
					if _, err := f.ReadAt(tail, int64(len(data)-len(tail))); err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/file")
		})
	}
}
