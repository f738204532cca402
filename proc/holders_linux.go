package proc

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Holders lists the processes that hold any of paths open, by pid, from
// <root>/*/fd. Paths compare as the kernel names open files, so give them
// absolute with symlinks resolved; a file removed since it was opened
// still counts as held at its path. A process whose open files cannot be
// read (another user's) is left out: it cannot hold the caller's files in
// any way that matters unless it is root, and root processes would
// otherwise make every file look held. An error means the scan itself
// failed, and the caller must then assume the files are held.
func (h *Host) Holders(paths ...string) ([]int, error) {
	want := map[string]bool{}
	for _, p := range paths {
		want[filepath.Clean(p)] = true
	}
	ents, err := os.ReadDir(h.root())
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fds, err := h.OpenFiles(pid)
		if err != nil {
			continue // exited meanwhile, or not ours to read
		}
		for _, f := range fds.Files {
			if want[filepath.Clean(strings.TrimSuffix(f, " (deleted)"))] {
				out = append(out, pid)
				break
			}
		}
	}
	sort.Ints(out)
	return out, nil
}
