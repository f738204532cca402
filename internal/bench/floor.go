package bench

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	// floorBuf is each reader's buffer (reads of whole files go through
	// it in pieces of this size).
	floorBuf = 256 << 10
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

// count adds one file read: n bytes, and err if it failed.
func (f *floorRead) count(n int64, err error) {
	f.Files++
	f.Bytes += n
	if err != nil {
		if f.Errs == 0 {
			f.FirstErr = err.Error()
		}
		f.Errs++
	}
}

// readFloor drops the page cache (when the run may) and does the bare
// read of every transcript under each root's projects/, and meanwhile of
// each of wholes from start to end, in order, on one more reader (an
// OpenCode database: what SQLite reads of it is at most the file).
func (r *runner) readFloor(roots []string, wholes ...string) (floorRead, error) {
	return r.readFloorWith(func(emit func(string)) error {
		for _, root := range roots {
			dirs, err := projectDirs(root)
			if err != nil {
				return err
			}
			for _, dir := range dirs {
				ents, err := os.ReadDir(dir)
				if err != nil {
					return err
				}
				for _, e := range ents {
					if strings.HasSuffix(e.Name(), ".jsonl") {
						emit(filepath.Join(dir, e.Name()))
					}
				}
			}
		}
		return nil
	}, bareRead, wholes)
}

// readFloorWith drops the page cache (when the run may) and reads each
// file list emits with read, floorReaders at a time, and meanwhile each
// of wholes whole on one more reader; list runs in the timed part (the
// listing is part of any lister's work).
func (r *runner) readFloorWith(list func(emit func(string)) error, read func(string, []byte) (int64, error), wholes []string) (floorRead, error) {
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
	if len(wholes) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, p := range wholes {
				n, err := readWhole(p)
				mu.Lock()
				f.count(n, err)
				mu.Unlock()
			}
		}()
	}
	for range floorReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, floorBuf)
			for p := range paths {
				n, err := read(p, buf)
				mu.Lock()
				f.count(n, err)
				mu.Unlock()
			}
		}()
	}
	listErr := list(func(p string) { paths <- p })
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

// readWhole reads the file at path from start to end in 1 MiB reads and
// returns the bytes read.
func readWhole(path string) (int64, error) {
	fh, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer fh.Close()
	buf := make([]byte, 1<<20)
	var total int64
	for {
		n, err := fh.Read(buf)
		total += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
	}
}

// addFloor adds the floor rows of scenario sc beside the start it bounds:
// the bare read of the transcripts under roots (and of wholes, read
// whole), and the cold exec of the sessiond binary. A start pays both, one
// after the other: the floor is their sum.
func (r *runner) addFloor(sc string, start time.Duration, roots []string, wholes ...string) error {
	f, err := r.readFloor(roots, wholes...)
	if err != nil {
		return err
	}
	if f.Errs > 0 {
		return fmt.Errorf("floor: %d of %d files could not be read, first: %s", f.Errs, f.Files, f.FirstErr)
	}
	what, how := "floor: the same transcripts read bare", ""
	if len(wholes) > 0 {
		what = "floor, Claude + OpenCode: the same transcripts and database read bare"
		how = fmt.Sprintf(", and meanwhile on one more reader the OpenCode database whole, in 1 MiB reads (%d file)", len(wholes))
	}
	_, err = r.addFloorRows(sc, what, fmt.Sprintf("list each project folder, then per transcript open, fstat, read the first %d KiB and the last %d KiB, close; %d reads in flight%s",
		floorHead>>10, floorTail>>10, floorReaders, how), start, f)
	return err
}

// addFloorRows adds the row of a floor read f (what it read: how), with
// its sum with the cold exec of sessiond (measured once per scenario, and
// a row for it then), and the start's ratio to that sum. It returns the
// sum.
func (r *runner) addFloorRows(sc, what, how string, start time.Duration, f floorRead) (time.Duration, error) {
	execTook, measured := r.execFloors[sc]
	var execCache string
	var err error
	if !measured {
		if execTook, execCache, err = r.execFloor(); err != nil {
			return 0, err
		}
		if r.execFloors == nil {
			r.execFloors = map[string]time.Duration{}
		}
		r.execFloors[sc] = execTook
	}
	ratio := ""
	if total := f.Took + execTook; total > 0 && start > 0 {
		ratio = fmt.Sprintf("; with the exec %s, and the start above is %.1f× that", dur(total), float64(start)/float64(total))
	}
	r.add(sc, what, fmt.Sprintf("%s (CPU: user %s, system %s; %d files, %s)%s",
		dur(f.Took), dur(f.User), dur(f.System), f.Files, Bytes(float64(f.Bytes)), ratio), "", nil,
		fmt.Sprintf("in the bench's own process: %s; no parsing and no store; %s", how, f.CacheHowFound))
	if !measured {
		r.add(sc, "floor: exec of the sessiond binary", dur(execTook), "", nil,
			"wall time of `sessiond --version`, median of 3: the binary paged in and its packages initialized, before any start reads a file; before each, "+execCache)
	}
	return f.Took + execTook, nil
}

// execFloor is the median wall time of 3 runs of `sessiond --version`,
// each after the page cache was dropped (when the run may), and how the
// cache was found.
func (r *runner) execFloor() (time.Duration, string, error) {
	var runs []time.Duration
	var cache string
	for range 3 {
		cache = r.dropCaches()
		t0 := time.Now()
		if out, err := exec.Command(r.opt.Bins.Sessiond, "--version").CombinedOutput(); err != nil {
			return 0, "", fmt.Errorf("floor: %s --version: %v: %s", r.opt.Bins.Sessiond, err, out)
		}
		runs = append(runs, time.Since(t0))
	}
	slices.Sort(runs)
	return runs[1], cache, nil
}
