package proc

import "time"

// StartTimer converts a process identity's start to wall-clock time. Only
// for ordering evidence ("did this process start before the session's last
// write?"), never for identity: wall time drifts, start ticks do not.
type StartTimer interface {
	StartTime(id Identity) (time.Time, error)
}
