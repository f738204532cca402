package daemon

import (
	"math"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"

	"go.uber.org/zap"
)

// memoryTarget keeps the Go runtime's soft memory limit at a target for
// as long as the live heap leaves the collector room under it.
//
// Why: Go collects when the heap has grown by GOGC (100 %) over what the
// last collection left live, and keeps the pages it freed. A daemon over
// 17,000 sessions has ~60 MiB live; its first pass left ~57 MiB freed and
// kept, and its idle passes' garbage grows the heap toward twice the live
// one: 151 MiB RSS, idle, for 60 MiB of sessions. Under a limit the
// runtime collects before the heap passes it and gives freed pages back
// to stay under it.
//
// A live heap near the limit would make the collector run back to back
// (the runtime lets it take half the CPU), so the limit is lifted once the
// live heap passes memoryTargetLift of it, and set again once it falls
// under memoryTargetArm (set at first while under memoryTargetLift): a user with 100,000 sessions gets Go's usual
// pace, not a busy daemon.
type memoryTarget struct {
	target int64
	log    *zap.Logger

	mu      sync.Mutex
	started bool
	stopped bool
	armed   bool
	// lifted is how many times the limit was lifted (for tests).
	lifted int
}

const (
	memoryTargetLift = 0.80
	memoryTargetArm  = 0.60
)

func newMemoryTarget(target int64, log *zap.Logger) *memoryTarget {
	return &memoryTarget{target: target, log: log}
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
	live := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	afterEachGC(func() bool {
		rtmetrics.Read(live)
		if live[0].Value.Kind() != rtmetrics.KindUint64 {
			return false
		}
		return m.check(live[0].Value.Uint64())
	})
}

// check sets or lifts the limit for a live heap of live bytes, and
// reports whether to go on looking.
func (m *memoryTarget) check(live uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return false
	}
	// Set at first while the live heap is under the lift point; once
	// lifted, again only well under it, not at every collection's edge.
	armBelow := memoryTargetLift
	if m.lifted > 0 {
		armBelow = memoryTargetArm
	}
	switch {
	case !m.armed && float64(live) <= armBelow*float64(m.target):
		m.armed = true
		debug.SetMemoryLimit(m.target)
		m.log.Debug("memory target set", zap.Int64("memory_limit_bytes", m.target), zap.Uint64("live_heap_bytes", live))
	case m.armed && float64(live) > memoryTargetLift*float64(m.target):
		m.armed = false
		m.lifted++
		debug.SetMemoryLimit(math.MaxInt64)
		m.log.Info("memory target lifted: the live heap needs more room than it leaves; the collector runs at Go's usual pace",
			zap.Int64("target_bytes", m.target), zap.Uint64("live_heap_bytes", live))
	}
	return true
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
	m.stopped, m.armed = true, false
}

// liveHeap is the live heap the last collection found (0 before any).
func liveHeap() uint64 {
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
