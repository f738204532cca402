package main

import (
	"runtime"
	"testing"
)

// A first start sets a memory limit unless GOGC or GOMEMLIMIT says
// otherwise.
func TestFirstStartMemoryLimitUnlessGOGC(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	if got := firstStartMemoryLimit(); got != firstStartMemoryLimitBytes {
		t.Fatalf("GOGC and GOMEMLIMIT unset: %d, want %d", got, firstStartMemoryLimitBytes)
	}
	t.Setenv("GOGC", "77")
	if got := firstStartMemoryLimit(); got != 0 {
		t.Fatalf("GOGC=77: %d, want 0 (the runtime's own)", got)
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "200MiB")
	if got := firstStartMemoryLimit(); got != 0 {
		t.Fatalf("GOMEMLIMIT=200MiB: %d, want 0 (the runtime's own)", got)
	}
}

// A first start adds Ps unless GOMAXPROCS says otherwise.
func TestFirstStartProcsUnlessGOMAXPROCS(t *testing.T) {
	t.Setenv("GOMAXPROCS", "")
	if got, want := firstStartProcs(), runtime.GOMAXPROCS(0)+firstStartExtraProcs; got != want {
		t.Fatalf("GOMAXPROCS unset: %d, want %d", got, want)
	}
	t.Setenv("GOMAXPROCS", "3")
	if got := firstStartProcs(); got != 0 {
		t.Fatalf("GOMAXPROCS=3: %d, want 0 (the runtime's own)", got)
	}
}
