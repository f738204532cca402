package daemon

import (
	"math"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
	"time"

	"go.uber.org/zap"
)

// memoryTarget keeps the Go runtime's soft memory limit at a target for
// as long as the live heap leaves the collector ample room under it.
//
// Why: Go collects when the heap has grown by GOGC (100 %) over what the
// last collection left live, and keeps the pages it freed: a first pass
// leaves tens of MiB freed and kept, and idle passes' garbage grows the
// heap toward twice the live one. Under a limit the runtime collects
// before the heap passes it and gives freed pages back to stay under it.
//
// The limit costs CPU when it is close above the live heap: the collector
// runs every few seconds. Seven homes, 17,000 sessions, 60 MiB live under
// an 80 MiB limit: 95 MiB RSS idle but 2.0-2.6 % of a core, where without
// it 150 MiB and 0.9 % (the collector's own estimate, 0.6 %, leaves out
// the pages given back and faulted in again). An idle daemon's CPU
// matters more than its RSS, so the limit holds only while the live heap
// is under memoryTargetLift of it (room for the collector to run rarely),
// and while the collector takes under memoryTargetCost of a core; else
// it is lifted (a log line says so) and set again once the live heap is
// under the mark and memoryTargetRearm has passed, so a first start's
// passing peak does not leave it off for good. A user with 100,000
// sessions gets Go's usual pace.
type memoryTarget struct {
	target int64
	log    *zap.Logger

	mu      sync.Mutex
	started bool
	stopped bool
	armed   bool
	// lifted is how many times the limit was lifted (for tests), last
	// when; rearm how long after a lift it may be set again.
	lifted   int
	liftedAt time.Time
	rearm    time.Duration
	// retry collects once more while the limit is off, so an idle
	// daemon (whose heap may not grow enough to collect for an hour)
	// gets to look again; backoff doubles between tries, up to
	// memoryTargetMaxBackoff, so a live heap that stays large costs a
	// collection every half hour at most.
	retry   *time.Timer
	backoff time.Duration
	// since and gcAt are when the cost window began and the collector's
	// CPU then (runtime/metrics' estimate); gcCPU reads it (a test sets
	// its own).
	since time.Time
	gcAt  float64
	gcCPU func() float64
}

const (
	memoryTargetLift  = 0.60
	memoryTargetRearm = time.Minute

	memoryTargetMaxBackoff = 30 * time.Minute

	// memoryTargetCost is the most of a core the collector may take
	// under the limit, by its own estimate over memoryTargetWindow,
	// before the limit is lifted.
	memoryTargetCost   = 0.003
	memoryTargetWindow = time.Minute
)

func newMemoryTarget(target int64, log *zap.Logger) *memoryTarget {
	return &memoryTarget{target: target, log: log, rearm: memoryTargetRearm, backoff: memoryTargetRearm, gcCPU: gcCPUSeconds}
}

// start sets the limit and looks at the live heap after each collection
// from then on. It does nothing for a target of 0, after stop, or when
// started already.
func (m *memoryTarget) start() {
	if m == nil || m.target <= 0 {
		return
	}
	m.mu.Lock()
	if m.started || m.stopped {
		m.mu.Unlock()
		return
	}
	m.started = true
	m.mu.Unlock()
	m.check(liveHeap())
	afterEachGC(func() bool { return m.check(liveHeap()) })
}

// check sets or lifts the limit for a live heap of live bytes, and
// reports whether to go on looking.
func (m *memoryTarget) check(live uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return false
	}
	switch {
	case !m.armed && float64(live) <= memoryTargetLift*float64(m.target) && (m.lifted == 0 || time.Since(m.liftedAt) >= m.rearm):
		m.armed, m.backoff = true, m.rearm
		m.since, m.gcAt = time.Now(), m.gcCPU()
		debug.SetMemoryLimit(m.target)
		m.log.Debug("memory target set", zap.Int64("memory_limit_bytes", m.target), zap.Uint64("live_heap_bytes", live))
	case m.armed && float64(live) > memoryTargetLift*float64(m.target):
		m.lift("the live heap needs more room than it leaves", live, 0)
	case m.armed && time.Since(m.since) >= memoryTargetWindow:
		now, gc := time.Now(), m.gcCPU()
		cost := (gc - m.gcAt) / now.Sub(m.since).Seconds()
		if cost > memoryTargetCost {
			m.lift("the collector runs too often under it", live, cost)
			break
		}
		m.since, m.gcAt = now, gc
	}
	if !m.armed && m.retry == nil {
		delay := m.backoff
		if m.lifted > 0 {
			delay = max(delay, time.Until(m.liftedAt.Add(m.rearm)))
		}
		m.backoff = min(2*m.backoff, memoryTargetMaxBackoff)
		m.retry = time.AfterFunc(delay, func() {
			m.mu.Lock()
			m.retry = nil
			stopped := m.stopped
			m.mu.Unlock()
			if !stopped {
				runtime.GC() // the check runs after it
			}
		})
	}
	return true
}

// lift takes the limit off; mu is held.
func (m *memoryTarget) lift(why string, live uint64, cost float64) {
	m.armed = false
	m.lifted++
	m.liftedAt = time.Now()
	debug.SetMemoryLimit(math.MaxInt64)
	m.log.Info("memory target lifted: the collector runs at Go's usual pace", zap.String("why", why),
		zap.Int64("target_bytes", m.target), zap.Uint64("live_heap_bytes", live), zap.Float64("gc_cpu_share", cost))
}

// stop lifts the limit for good.
func (m *memoryTarget) stop() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.armed {
		debug.SetMemoryLimit(math.MaxInt64)
	}
	if m.retry != nil {
		m.retry.Stop()
		m.retry = nil
	}
	m.stopped, m.armed = true, false
}

// gcCPUSeconds is the collector's CPU so far (the runtime's estimate).
func gcCPUSeconds() float64 {
	v := runtimeMetric("/cpu/classes/gc/total:cpu-seconds")
	if v.Kind() != rtmetrics.KindFloat64 {
		return 0
	}
	return v.Float64()
}

// liveHeap is the live heap the last collection found (0 before any).
func liveHeap() uint64 {
	v := runtimeMetric("/gc/heap/live:bytes")
	if v.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return v.Uint64()
}

func runtimeMetric(name string) rtmetrics.Value {
	s := []rtmetrics.Sample{{Name: name}}
	rtmetrics.Read(s)
	return s[0].Value
}
