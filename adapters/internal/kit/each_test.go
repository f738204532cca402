package kit

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// Each calls fn once for every index, few or many.
func TestEachCallsEveryIndexOnce(t *testing.T) {
	for _, n := range []int{0, 1, ParallelMin - 1, ParallelMin, 1000} {
		seen := make([]atomic.Int32, n)
		Each(n, func(i int) { seen[i].Add(1) })
		for i := range seen {
			if c := seen[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d called %d times", n, i, c)
			}
		}
	}
}

// ReadEach hands each input's outcome to done, in the inputs' order,
// after every read.
func TestReadEachDoneInOrder(t *testing.T) {
	due := make([]int, 200)
	for i := range due {
		due[i] = i
	}
	var reads atomic.Int32
	next := 0
	ReadEach(due, func(in int) (bool, error) {
		reads.Add(1)
		if in%3 == 0 {
			return false, fmt.Errorf("input %d", in)
		}
		return in%2 == 0, nil
	}, func(in int, changed bool, err error) {
		if reads.Load() != int32(len(due)) {
			t.Fatal("done ran before every read")
		}
		if in != next {
			t.Fatalf("done for %d, want %d next", in, next)
		}
		next++
		if wantErr := in%3 == 0; (err != nil) != wantErr || (!wantErr && changed != (in%2 == 0)) {
			t.Fatalf("input %d: changed %v, err %v", in, changed, err)
		}
	})
	if next != len(due) {
		t.Fatalf("done ran %d times, want %d", next, len(due))
	}
}
