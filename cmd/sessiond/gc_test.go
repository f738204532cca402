package main

import (
	"runtime/debug"
	"testing"
)

// The daemon's GC target is defaultGCPercent unless GOGC says otherwise.
func TestGCPercentDefaultAndOverride(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })

	t.Setenv("GOGC", "")
	setGCPercent()
	if got := debug.SetGCPercent(77); got != defaultGCPercent {
		t.Fatalf("GOGC unset: GC percent %d, want %d", got, defaultGCPercent)
	}
	t.Setenv("GOGC", "77") // as the runtime read it at start
	setGCPercent()
	if got := debug.SetGCPercent(100); got != 77 {
		t.Fatalf("GOGC=77: GC percent %d, want 77", got)
	}
}
