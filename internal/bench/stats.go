package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentiles summarize a set of latencies.
type Percentiles struct {
	N                   int
	P50, P99, Max, Mean time.Duration
}

// percentile computes the nearest-rank median, 99th percentile and maximum.
func percentile(ds []time.Duration) Percentiles {
	if len(ds) == 0 {
		return Percentiles{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(s)))) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Percentiles{N: len(s), P50: rank(0.50), P99: rank(0.99), Max: s[len(s)-1], Mean: sum / time.Duration(len(s))}
}

func (p Percentiles) String() string {
	return fmt.Sprintf("p50 %s, p99 %s, max %s (n=%d)", dur(p.P50), dur(p.P99), dur(p.Max), p.N)
}

// dur prints a duration with three significant digits.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d < 100*time.Millisecond:
		return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%.2f s", d.Seconds())
	}
}

// Bytes prints a byte count in binary units (KiB, MiB, GiB).
func Bytes[T ~int | ~int64 | ~uint64 | ~float64](n T) string {
	f := float64(n)
	switch {
	case f < 1<<10:
		return fmt.Sprintf("%.0f B", f)
	case f < 1<<20:
		return fmt.Sprintf("%.1f KiB", f/(1<<10))
	case f < 1<<30:
		return fmt.Sprintf("%.1f MiB", f/(1<<20))
	default:
		return fmt.Sprintf("%.2f GiB", f/(1<<30))
	}
}
