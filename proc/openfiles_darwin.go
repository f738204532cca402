package proc

import (
	"errors"
	"fmt"
)

// errNoOpenFiles: without /proc there is no cheap, dependency-free way to
// list another process's open files; callers then leave "holds the file
// open" unchecked and say so.
var errNoOpenFiles = fmt.Errorf("open files are not readable on this platform: %w", errors.ErrUnsupported)

// OpenFiles cannot be read on macOS: it fails with errors.ErrUnsupported.
func (h *Host) OpenFiles(pid int) (Descriptors, error) {
	return Descriptors{}, errNoOpenFiles
}
