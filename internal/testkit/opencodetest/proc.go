package opencodetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sessiond/sessiond/proc"
)

// ProcTree writes a fixture /proc tree with what the OpenCode adapter reads
// beyond the snapshot: /proc/<pid>/fd links (open files and sockets) and
// /proc/<pid>/net/tcp listening sockets.
type ProcTree struct {
	Root string
}

// OpenFiles adds fd links of pid pointing at paths ("socket:[N]" for a
// socket), numbered after the existing ones.
func (t ProcTree) OpenFiles(pid int, targets ...string) error {
	dir := filepath.Join(t.Root, strconv.Itoa(pid), "fd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("proc fixture: %w", err)
	}
	ents, _ := os.ReadDir(dir)
	n := len(ents) + 3
	for _, target := range targets {
		if err := os.Symlink(target, filepath.Join(dir, strconv.Itoa(n))); err != nil {
			return fmt.Errorf("proc fixture: %w", err)
		}
		n++
	}
	return nil
}

// Listen makes pid hold a TCP socket listening on 127.0.0.1:port, with the
// given inode, in /proc/<pid>/net/tcp.
func (t ProcTree) Listen(pid, port int, inode uint64) error {
	if err := t.OpenFiles(pid, fmt.Sprintf("socket:[%d]", inode)); err != nil {
		return err
	}
	dir := filepath.Join(t.Root, strconv.Itoa(pid), "net")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("proc fixture: %w", err)
	}
	path := filepath.Join(dir, "tcp")
	body := ""
	if b, err := os.ReadFile(path); err == nil {
		body = string(b)
	} else {
		body = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	}
	body += fmt.Sprintf("   0: 0100007F:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 100 0 0 10 0\n", port, inode)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return fmt.Errorf("proc fixture: %w", err)
	}
	return nil
}

// Proc returns a snapshot row for a fixture process.
func Proc(pid int, startTicks uint64, cwd string, argv ...string) *proc.Process {
	return &proc.Process{
		Identity: proc.Identity{BootID: "test-boot", PID: pid, StartTicks: startTicks},
		PPID:     1,
		State:    'S',
		Cwd:      cwd,
		Argv:     argv,
	}
}

// Snapshot returns a snapshot of the given rows.
func Snapshot(ps ...*proc.Process) *proc.Snapshot {
	s := &proc.Snapshot{Taken: time.Now(), BootID: "test-boot", Procs: map[int]*proc.Process{}}
	for _, p := range ps {
		s.Procs[p.Identity.PID] = p
	}
	return s
}

// StartTimes is a proc.StartTimer for fixture processes: start time by pid.
type StartTimes map[int]time.Time

// StartTime implements proc.StartTimer.
func (s StartTimes) StartTime(id proc.Identity) (time.Time, error) {
	t, ok := s[id.PID]
	if !ok {
		return time.Time{}, fmt.Errorf("no start time for pid %d", id.PID)
	}
	return t, nil
}
