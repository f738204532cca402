//go:build unix

package claude

import (
	"io/fs"
	"syscall"
)

// fileID returns the (device, inode) of a file, so a replaced file (a new
// inode at the same path) is read again from its start.
func fileID(fi fs.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}
