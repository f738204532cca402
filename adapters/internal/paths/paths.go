// Package paths holds the path comparisons the agent adapters share.
package paths

import "path/filepath"

// SameDir reports whether two paths name one directory, through symlinks
// (a HOME or a project reached by a link is still the same one). Paths
// that cannot be resolved are compared as written, cleaned.
func SameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, err1 := filepath.EvalSymlinks(a)
	rb, err2 := filepath.EvalSymlinks(b)
	return err1 == nil && err2 == nil && ra == rb
}
