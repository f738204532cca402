//go:build unix

package opencode

import (
	"os"
	"syscall"
)

// fileIdentity returns the (device, inode) of the file at path, so a
// database replaced by another file (a restored backup) is read whole
// rather than trusted to continue where the old one's cursors stopped.
func fileIdentity(path string) (dev, ino uint64, ok bool) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}
