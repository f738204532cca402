package proc

import "testing"

// Exited is the one test of "this row has exited" every package uses: a
// zombie and a dead row have, every other state has not, and a missing
// row (nil) counts as exited.
func TestExited(t *testing.T) {
	if !(*Process)(nil).Exited() {
		t.Error("a nil row has not exited")
	}
	for _, st := range []byte{'R', 'S', 'D', 'T', 't', 'I', 'W', 'P', 'Z', 'X', '?', 0} {
		want := st == 'Z' || st == 'X'
		if got := (&Process{State: st}).Exited(); got != want {
			t.Errorf("Process{State: %q}.Exited() = %v", st, got)
		}
		if got := (&Stat{State: st}).Exited(); got != want {
			t.Errorf("Stat{State: %q}.Exited() = %v", st, got)
		}
	}
}
