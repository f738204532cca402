//go:build !unix

package opencode

// fileIdentity is unknown here: the rowid cursors alone tell a replaced
// database.
func fileIdentity(path string) (dev, ino uint64, ok bool) { return 0, 0, false }
