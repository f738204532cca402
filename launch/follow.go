package launch

import (
	"os"
	"regexp"
	"syscall"
	"time"
)

// What comes after a start: ending a process whose record could not be
// made, and reading from its log an id the agent shows only there.

// Kill ends a started process that must not run on: one whose record
// could not be made, which, untracked, would be an orphan nobody knows
// of. It kills the whole process group and collects the exit in the
// background.
func (l *Launcher) Kill(s *Started) {
	// Launched with setsid: its pid is its process group.
	_ = syscall.Kill(-s.Identity.PID, syscall.SIGKILL)
	go l.Wait(s)
}

// WaitForID polls the log at path for the first match of re's first
// group, and returns it. It gives up with "" once stop is closed or limit
// has passed. Only the log's first MiB is read: the agent shows its id as
// it starts.
func WaitForID(stop <-chan struct{}, path string, re *regexp.Regexp, limit time.Duration) string {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		if b, err := readHead(path, 1<<20); err == nil {
			if m := re.FindSubmatch(b); m != nil {
				return string(m[1])
			}
		}
		select {
		case <-stop:
			return ""
		case <-tick.C:
		}
	}
	return ""
}

// readHead returns up to the first n bytes of the file at path.
func readHead(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, _ := f.Read(b)
	return b[:k], nil
}
