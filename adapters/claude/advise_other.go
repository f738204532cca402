//go:build !linux

package claude

import "os"

// adviseRandom is a no-op where posix_fadvise is not offered (macOS reads
// ahead adaptively and has no per-file switch in x/sys).
func adviseRandom(*os.File) {}
