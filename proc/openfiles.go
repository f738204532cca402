package proc

// Descriptors are what a process holds open, as Host.OpenFiles reads them.
type Descriptors struct {
	// Files are the absolute paths of its open files as the kernel names
	// them: symlinks resolved, and " (deleted)" appended to a file removed
	// since it was opened.
	Files []string
	// Sockets are the inodes of its sockets, which Listener.Inode names:
	// the way to tell which listening ports a process holds.
	Sockets map[uint64]bool
}
