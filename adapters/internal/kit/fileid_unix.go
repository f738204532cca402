//go:build unix

package kit

import (
	"io/fs"
	"syscall"
)

// FileID returns the (device, inode) of a file, so a file replaced at its
// path (a new inode) is told from the one read before. ok is false where
// the platform does not say; then size and mtime alone tell a change.
func FileID(fi fs.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}
