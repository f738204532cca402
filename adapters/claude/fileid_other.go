//go:build !unix

package claude

import "io/fs"

// fileID is unknown here: a replaced file is noticed by size and mtime only.
func fileID(fi fs.FileInfo) (dev, ino uint64, ok bool) { return 0, 0, false }
