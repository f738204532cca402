package opencode

import (
	"slices"

	"github.com/sessiond/sessiond/proc"
)

// dbHolders lists the processes (other than self) that hold the database,
// its -wal, its -shm or its -journal open (proc.Host.Holders). An error
// means they could not be told, and the caller must then assume the
// database is held: a repair that waits is better than one that races a
// live OpenCode.
func dbHolders(procRoot, dbPath string, self int) ([]int, error) {
	db := realPath(dbPath)
	pids, err := (&proc.Host{Root: procRoot}).Holders(db, db+"-wal", db+"-shm", db+"-journal")
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(pids, func(pid int) bool { return pid == self }), nil
}
