//go:build unix

package codex

import (
	"io/fs"
	"syscall"
)

// fileID is the file's device and inode: how a rollout replaced at its
// path is told apart. (Not how the lock table names a file: its device is
// not always stat's, see proc.Flock.)
func fileID(fi fs.FileInfo) (dev, ino uint64) {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Dev), uint64(st.Ino)
	}
	return 0, 0
}
