//go:build linux

package opencode

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
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
		dir := filepath.Join(procRoot, e.Name(), "fd")
		d, err := os.Open(dir)
		if err != nil {
			continue // exited meanwhile, or not ours to read
		}
		names, err := d.Readdirnames(-1)
		d.Close()
		if err != nil && !errors.Is(err, fs.ErrPermission) {
			continue
		}
		for _, n := range names {
			target, err := os.Readlink(filepath.Join(dir, n))
			if err != nil || len(target) == 0 || target[0] != '/' {
				continue
			}
			if dbKey(target) == key {
				out = append(out, pid)
				break
			}
		}
	}
	sort.Ints(out)
	return out, nil
}
