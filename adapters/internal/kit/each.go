package kit

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// ParallelMin is the fewest inputs a pass reads on several cores.
const ParallelMin = 64

// Each calls fn(i) for each i in [0, n): on up to GOMAXPROCS goroutines
// when n is at least ParallelMin, each taking the next i as it is done
// (inputs differ in size a thousandfold), else in order on this one.
//
// A full pass reads every input it has: a first start folds each file
// whole, a restart stats each (2,000 Copilot sessions: 6,000 stats, ~30
// ms of one core in the kernel's path lookups). Neither waits for
// anything but the CPU, and one adapter's pass used one core. fn must
// touch only what is i's own; the bookkeeping shared by the inputs (the
// read counter, the drift tally) is done after, in order.
func Each(n int, fn func(i int)) {
	workers := 1
	if n >= ParallelMin {
		workers = min(runtime.GOMAXPROCS(0), 8)
	}
	if workers <= 1 {
		for i := range n {
			fn(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// ReadEach is a pass's reads of its due inputs: read on every core
// (Each), each call touching its input alone and saying whether it
// changed it, then done for each input in order with what read said,
// for the bookkeeping the inputs share (the read counter, the drift
// tally, an input gone).
func ReadEach[T any](due []T, read func(T) (bool, error), done func(in T, changed bool, err error)) {
	changed := make([]bool, len(due))
	failed := make([]error, len(due))
	Each(len(due), func(i int) { changed[i], failed[i] = read(due[i]) })
	for i, in := range due {
		done(in, changed[i], failed[i])
	}
}
