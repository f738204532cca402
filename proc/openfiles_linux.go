package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// OpenFiles reads <root>/<pid>/fd: the files the process holds open and
// the inodes of its sockets. An error means the list could not be read:
// the process exited, or it is another user's.
func (h *Host) OpenFiles(pid int) (Descriptors, error) {
	dir := filepath.Join(h.root(), strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return Descriptors{}, fmt.Errorf("list %s: %w", dir, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return Descriptors{}, fmt.Errorf("list %s: %w", dir, err)
	}
	fds := Descriptors{Sockets: map[uint64]bool{}}
	for _, n := range names {
		target, err := os.Readlink(filepath.Join(dir, n))
		if err != nil {
			continue // closed meanwhile
		}
		if strings.HasPrefix(target, "socket:[") && strings.HasSuffix(target, "]") {
			if ino, err := strconv.ParseUint(target[len("socket:["):len(target)-1], 10, 64); err == nil {
				fds.Sockets[ino] = true
			}
			continue
		}
		if strings.HasPrefix(target, "/") {
			fds.Files = append(fds.Files, target)
		}
	}
	return fds, nil
}
