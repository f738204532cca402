package kit

import (
	"io/fs"
	"os"
	"runtime"
	"sync"
)

// Stats stats many paths ahead of a pass that stats each of them, on
// every core: a restart's first pass stats every input (a home of 2,000
// Copilot sessions: 6,000 stats, 30 ms on one core, most of it in the
// kernel's path lookups), and a stat waits for nothing but the CPU. Take
// hands each result out once, in the pass's own order; a path not
// stat'ed ahead, or taken already, is stat'ed then. The zero Stats stats
// every path when taken.
//
// A result is as old as the Prefetch: the pass reads a file as far as
// that stat said, as it reads as far as a stat just before, and the next
// pass sees what came after.
type Stats struct {
	m map[string]statResult
}

type statResult struct {
	fi  fs.FileInfo
	err error
}

// PrefetchMin is the fewest paths worth stat'ing on several cores.
const PrefetchMin = 256

// Prefetch stats paths on up to GOMAXPROCS goroutines, when there are at
// least PrefetchMin of them (else Take stats each).
func (s *Stats) Prefetch(paths []string) {
	if len(paths) < PrefetchMin {
		return
	}
	res := make([]statResult, len(paths))
	workers := min(runtime.GOMAXPROCS(0), 8)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(paths); i += workers {
				fi, err := os.Stat(paths[i])
				res[i] = statResult{fi, err}
			}
		})
	}
	wg.Wait()
	if s.m == nil {
		s.m = make(map[string]statResult, len(paths))
	}
	for i, p := range paths {
		s.m[p] = res[i]
	}
}

// Take returns path's stat: the one prefetched, once, else os.Stat's.
func (s *Stats) Take(path string) (fs.FileInfo, error) {
	if r, ok := s.m[path]; ok {
		delete(s.m, path)
		return r.fi, r.err
	}
	return os.Stat(path)
}

// Drop forgets what was not taken (a pass that ended early).
func (s *Stats) Drop() { clear(s.m) }
