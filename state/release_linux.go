package state

import "golang.org/x/sys/unix"

// releaseMapped asks the kernel to drop length bytes at addr, the store
// file's read-only shared mapping, from this process's resident set. The
// pages stay in the page cache; the next access maps them back.
func releaseMapped(addr, length uintptr) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, addr, length, unix.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}
