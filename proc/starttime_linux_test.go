package proc

import (
	"os/exec"
	"testing"
	"time"
)

// A process's start time is right to the tick (10 ms), not to the second
// of /proc/stat's btime: a tool started just after a hook must not read as
// started before it.
func TestStartTimeToTheTick(t *testing.T) {
	h := NewHost()
	for i := 0; i < 5; i++ {
		before := time.Now()
		cmd := exec.Command("sleep", "5")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		id, err := h.Identify(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if err != nil {
			t.Fatal(err)
		}
		st, err := h.StartTime(id)
		if err != nil {
			t.Fatal(err)
		}
		// One tick of truncation, one of clock reading.
		const slack = 20 * time.Millisecond
		if st.Before(before.Add(-slack)) || st.After(after.Add(slack)) {
			t.Fatalf("start time %s, process started between %s and %s", st.Format(time.StampMicro), before.Format(time.StampMicro), after.Format(time.StampMicro))
		}
	}
}
