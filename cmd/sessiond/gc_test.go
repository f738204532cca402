package main

import "testing"

// A first start lowers the GC target unless GOGC says otherwise.
func TestFirstStartGCUnlessGOGC(t *testing.T) {
	t.Setenv("GOGC", "")
	if got := firstStartGC(); got != firstStartGCPercent {
		t.Fatalf("GOGC unset: %d, want %d", got, firstStartGCPercent)
	}
	t.Setenv("GOGC", "77")
	if got := firstStartGC(); got != 0 {
		t.Fatalf("GOGC=77: %d, want 0 (the runtime's own)", got)
	}
}
