package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FlockHolders reads <root>/locks and returns the files held with an
// exclusive flock(2), each with the pid that took the lock. Codex names
// its rollout's writer this way (thread-writer-locks/<id>.lock): the lock
// is the kernel's, so it goes with its holder's death, and a lock file
// left behind by a killed writer is held by nobody. The table lists every
// lock on the machine, the pid as seen from this PID namespace; a waiter
// ("->") holds nothing and is left out.
func (h *Host) FlockHolders() (FlockHolders, error) {
	b, err := os.ReadFile(filepath.Join(h.root(), "locks"))
	if err != nil {
		return nil, err
	}
	return parseLocks(b)
}

// parseLocks parses /proc/locks lines such as
//
//	1: FLOCK  ADVISORY  WRITE 12535 fe:00:10347424 0 EOF
//
// whose device is MAJOR:MINOR in hex (as the kernel prints it) followed
// by the inode in decimal.
func parseLocks(b []byte) (FlockHolders, error) {
	out := FlockHolders{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[1] == "->" {
			continue
		}
		if f[1] != "FLOCK" || f[3] != "WRITE" {
			continue
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil {
			return nil, fmt.Errorf("locks line %d: pid %q: %w", n, f[4], err)
		}
		key, err := parseLockedFile(f[5])
		if err != nil {
			return nil, fmt.Errorf("locks line %d: %w", n, err)
		}
		if pid > 0 {
			out[key] = pid
		}
	}
	return out, sc.Err()
}

func parseLockedFile(s string) (FileKey, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return FileKey{}, fmt.Errorf("file %q: want MAJOR:MINOR:INODE", s)
	}
	major, err1 := strconv.ParseUint(parts[0], 16, 32)
	minor, err2 := strconv.ParseUint(parts[1], 16, 32)
	ino, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return FileKey{}, fmt.Errorf("file %q: want MAJOR:MINOR:INODE", s)
	}
	return FileKey{Dev: unix.Mkdev(uint32(major), uint32(minor)), Ino: ino}, nil
}
