package proc

import (
	"errors"
	"fmt"
)

// ListenersKnown: macOS has no dependency-free table of listening sockets
// and their owners; Listeners fails, and who listens at an address must be
// checked another way (through the process that should).
const ListenersKnown = false

// Listeners cannot be read on macOS: it fails with errors.ErrUnsupported.
func (h *Host) Listeners() ([]Listener, error) {
	return nil, fmt.Errorf("listening sockets are not readable on this platform: %w", errors.ErrUnsupported)
}
