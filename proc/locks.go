package proc

import "sync"

// Flock is one exclusive flock(2) of the kernel's lock table: the locked
// file as the kernel names it, and the pid that took the lock. Dev is the
// device of the file's super block as the kernel prints it, which is not
// always the st_dev stat(2) gives the same file: a btrfs subvolume has a
// device of its own, and a file of an overlayfs whose layers are on other
// file systems is locked on its layer's. So Dev is never compared with a
// stat's device: LockTable.Holder takes candidates by inode and confirms
// them by the holder's own descriptor.
type Flock struct {
	Dev, Ino uint64
	PID      int
}

// LockTable is the kernel's table of exclusive flocks, read once by
// Host.LockTable and then asked who holds a file (Holder): meant for one
// pass, as it keeps what it read. Safe for concurrent use.
type LockTable struct {
	h     *Host
	byIno map[uint64][]Flock

	mu  sync.Mutex
	fds map[int]fdLinks // each candidate's descriptors, read once
}

// fdLinks are the descriptors of a process (Linux), or why they could
// not be read.
type fdLinks struct {
	links []fdLink
	err   error
}
