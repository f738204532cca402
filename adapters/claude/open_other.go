//go:build !linux

package claude

import "os"

// openRandom opens a transcript or registry entry for reading with pread.
// macOS reads ahead adaptively and x/sys offers no per-file switch, so
// there is nothing to advise.
func openRandom(name string) (File, error) {
	return os.Open(name)
}
