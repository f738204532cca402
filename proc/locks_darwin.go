package proc

import (
	"errors"
	"fmt"
)

// LockTable cannot be read on macOS (no /proc/locks): it fails with
// errors.ErrUnsupported, and callers fall back to open files.
func (h *Host) LockTable() (*LockTable, error) {
	return nil, fmt.Errorf("the lock table is not readable on this platform: %w", errors.ErrUnsupported)
}

// Holder fails on macOS, where no lock table is read.
func (t *LockTable) Holder(path string) (int, error) {
	return 0, fmt.Errorf("who holds the flock on %s: %w", path, errors.ErrUnsupported)
}

// fdLink is Linux's: a descriptor and its link target.
type fdLink struct{}
