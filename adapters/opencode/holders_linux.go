//go:build linux

package opencode

import (
	"os"
	"sort"
	"strconv"
)

// dbHolders lists the processes (other than self) that hold the database,
// its -wal or its -shm open, from <procRoot>/*/fd. A process whose open
// files cannot be read (another user's) is left out: it cannot hold this
// user's database in any way that matters unless it is root, and root
// processes would otherwise block every repair. An error means the scan
// itself failed, and the caller must then assume the database is held.
func dbHolders(procRoot, dbPath string, self int) ([]int, error) {
	key := dbKey(realPath(dbPath))
	ents, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		files, _, err := scanFDs(procRoot, pid)
		if err != nil {
			continue // exited meanwhile, or not ours to read
		}
		for _, f := range files {
			if dbKey(f) == key {
				out = append(out, pid)
				break
			}
		}
	}
	sort.Ints(out)
	return out, nil
}
