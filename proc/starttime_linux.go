package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's start time. It is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// readBootTime is the wall-clock time of boot. On the real /proc it is
// the realtime clock less the boot-time clock, to the nanosecond: the
// btime line of /proc/stat is whole seconds, and a start time up to a
// second early misorders a tool's start against a hook received just
// before it. Under another root (tests) it is that root's btime line.
func (h *Host) readBootTime() (time.Time, error) {
	if h.startTimeRoot() == "/proc" {
		var boot unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &boot); err == nil {
			return time.Now().Add(-time.Duration(boot.Nano())), nil
		}
	}
	path := filepath.Join(h.startTimeRoot(), "stat")
	b, err := os.ReadFile(path)
	if err != nil {
		return time.Time{}, fmt.Errorf("read %s: %w", path, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("btime ")) {
			secs, err := strconv.ParseInt(string(bytes.TrimSpace(line[6:])), 10, 64)
			if err != nil {
				return time.Time{}, fmt.Errorf("parse btime in %s: %w", path, err)
			}
			return time.Unix(secs, 0), nil
		}
	}
	return time.Time{}, fmt.Errorf("no btime line in %s", path)
}

// StartTime returns when the process started, in wall-clock time (to the
// tick, 10 ms).
func (h *Host) StartTime(id Identity) (time.Time, error) {
	bt, err := h.BootTime()
	if err != nil {
		return time.Time{}, err
	}
	return bt.Add(time.Duration(id.StartTicks) * time.Second / clockTicks), nil
}

func (h *Host) startTimeRoot() string {
	if h.Root == "" {
		return "/proc"
	}
	return h.Root
}
