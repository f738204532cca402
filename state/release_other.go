//go:build !linux

package state

// releaseMapped does nothing here: the resident set it trims is a Linux
// figure, and on macOS the kernel reclaims clean file pages on its own.
func releaseMapped(addr, length uintptr) error { return nil }
