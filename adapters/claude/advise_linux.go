package claude

import (
	"os"

	"golang.org/x/sys/unix"
)

// adviseRandom turns off readahead for f. A failure only costs readahead.
func adviseRandom(f *os.File) {
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_RANDOM)
}
