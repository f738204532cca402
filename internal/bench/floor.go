package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The floor rows put a cold start next to the least any lister must do on
// the same data: list every project folder, and open, stat, read the
// first floorHead and the last floorTail bytes of each transcript, and
// close it, with floorReaders reads in flight; no parsing, no store. A
// start that takes about this is bound by the disk and the kernel, not by
// sessiond's own work.
const (
	floorHead    = 4 << 10
	floorTail    = 8 << 10
	floorReaders = 8
)

// floorRead is one bare read of a Claude root: how long it took, the CPU
// this process spent on it (user and system), and how many files and
// bytes it read.
type floorRead struct {
	Took          time.Duration
	User, System  time.Duration
	Files         int
	Bytes         int64
	Errs          int
	FirstErr      string
	CacheHowFound string
}

// readFloor drops the page cache (when the run may) and does the bare
// read of every transcript under each root's projects/.
func (r *runner) readFloor(roots ...string) (floorRead, error) {
	var f floorRead
	f.CacheHowFound = r.dropCaches()
	var ru0 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru0); err != nil {
		return f, err
	}
	t0 := time.Now()
	paths := make(chan string, 256)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range floorReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, max(floorHead, floorTail))
			for p := range paths {
				n, err := bareRead(p, buf)
				mu.Lock()
				f.Files++
				f.Bytes += n
				if err != nil {
					if f.Errs == 0 {
						f.FirstErr = err.Error()
					}
					f.Errs++
				}
				mu.Unlock()
			}
		}()
	}
	var listErr error
	for _, root := range roots {
		dirs, err := projectDirs(root)
		if err != nil {
			listErr = err
			break
		}
		for _, dir := range dirs {
			ents, err := os.ReadDir(dir)
			if err != nil {
				listErr = err
				break
			}
			for _, e := range ents {
				if strings.HasSuffix(e.Name(), ".jsonl") {
					paths <- filepath.Join(dir, e.Name())
				}
			}
		}
	}
	close(paths)
	wg.Wait()
	f.Took = time.Since(t0)
	var ru1 syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru1); err != nil {
		return f, err
	}
	f.User = time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano())
	f.System = time.Duration(ru1.Stime.Nano() - ru0.Stime.Nano())
	if listErr != nil {
		return f, fmt.Errorf("list transcripts for the floor: %w", listErr)
	}
	return f, nil
}

// bareRead opens path, stats it, reads its head and tail windows and
// closes it; it returns the bytes read.
func bareRead(path string, buf []byte) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	n, err := fh.ReadAt(buf[:min(int64(floorHead), size)], 0)
	total := int64(n)
	if err != nil {
		return total, err
	}
	if size > floorHead {
		off := max(int64(floorHead), size-floorTail)
		n, err = fh.ReadAt(buf[:size-off], off)
		total += int64(n)
	}
	return total, err
}

// addFloor adds the floor row of scenario sc beside the start it bounds.
func (r *runner) addFloor(sc string, start time.Duration, roots ...string) error {
	f, err := r.readFloor(roots...)
	if err != nil {
		return err
	}
	if f.Errs > 0 {
		return fmt.Errorf("floor: %d of %d transcripts could not be read, first: %s", f.Errs, f.Files, f.FirstErr)
	}
	ratio := ""
	if f.Took > 0 && start > 0 {
		ratio = fmt.Sprintf("; the start above is %.1f× this", float64(start)/float64(f.Took))
	}
	r.add(sc, "floor: the same transcripts read bare", fmt.Sprintf("%s (CPU: user %s, system %s; %d files, %s)%s",
		dur(f.Took), dur(f.User), dur(f.System), f.Files, Bytes(float64(f.Bytes)), ratio), "", nil,
		fmt.Sprintf("in the bench's own process: list each project folder, then per transcript open, fstat, read the first %d KiB and the last %d KiB, close; %d reads in flight; no parsing and no store; %s",
			floorHead>>10, floorTail>>10, floorReaders, f.CacheHowFound))
	return nil
}
