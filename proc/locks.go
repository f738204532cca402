package proc

// FileKey names a file by its device and inode, as stat(2) gives them:
// the way /proc/locks names a locked file.
type FileKey struct {
	Dev, Ino uint64
}

// FlockHolders maps each file held with flock(LOCK_EX) to the pid that
// took the lock, as Host.FlockHolders reads them.
type FlockHolders map[FileKey]int
