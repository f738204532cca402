package proc

import (
	"errors"
	"fmt"
)

// FlockHolders cannot be read on macOS (no /proc/locks): it fails with
// errors.ErrUnsupported, and callers fall back to open files.
func (h *Host) FlockHolders() (FlockHolders, error) {
	return nil, fmt.Errorf("the lock table is not readable on this platform: %w", errors.ErrUnsupported)
}
