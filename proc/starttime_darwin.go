package proc

import "time"

// StartTime returns when the process started: on macOS StartTicks already
// is microseconds since the epoch.
func (h *Host) StartTime(id Identity) (time.Time, error) {
	return time.UnixMicro(int64(id.StartTicks)), nil
}
