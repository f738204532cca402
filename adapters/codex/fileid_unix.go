//go:build unix

package codex

import (
	"io/fs"
	"syscall"
)

// fileID is the file's device and inode: what the lock table names, and
// how a rollout replaced at its path is told apart.
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
