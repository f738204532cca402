package codex

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

// owners names the writer of each rollout of r that has a lock file: the
// process holding thread-writer-locks/<id>.lock with flock(LOCK_EX), from
// the kernel's lock table, confirmed by its own descriptor of that file
// (proc.LockTable.Holder). Codex takes that lock for as long as it has
// the session loaded and the kernel drops it with the process, so it is
// the exact owner (the native binary, never the npm wrapper; for the TUI
// its app-server daemon). A lock file nobody holds is a writer that died:
// no owner. Where the lock table cannot be read (macOS), the process that
// has the lock file open stands in, marked inferred, and its id is in
// inexact: there the owners are not the whole truth. Where a process the
// table names for the lock file's inode could not be checked (its
// descriptors unreadable), the id is in inexact too, and in
// table.unchecked: nobody is named, and nobody is called dead either.
func (a *Adapter) owners(r *rootState, locks map[string]bool, table *lockTable) (out map[string][]adapters.Owner, inexact map[string]bool) {
	out, inexact = map[string][]adapters.Owner{}, map[string]bool{}
	dir := filepath.Join(r.path, "thread-writer-locks")
	ids := make([]string, 0, len(locks))
	for id := range locks {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		path := filepath.Join(dir, id+".lock")
		pid, evidence, inferred, err := a.lockHolder(path, table)
		if _, terr := table.get(); terr != nil {
			inexact[id] = true
		}
		if err != nil {
			inexact[id] = true
			table.unchecked[id] = true
			a.log.Debug("the writer lock's holder could not be checked", zap.String("lock", path), zap.Error(err))
		}
		if pid <= 0 {
			continue
		}
		ident, err := a.cfg.Host.Identify(pid)
		if err != nil {
			continue // gone since: the next pass sees the lock free
		}
		out[id] = append(out[id], adapters.Owner{Identity: ident, Evidence: evidence, Inferred: inferred})
	}
	return out, inexact
}

// markShared marks the owners that are Codex's app-server (`codex
// app-server ...`): the TUI's daemon serves the TUIs of every pane, and a
// TUI started first is its parent, so where it runs says nothing of where
// the session is shown.
func markShared(sessions []adapters.Observed, snap *proc.Snapshot) {
	if snap == nil {
		return
	}
	for i := range sessions {
		for j := range sessions[i].Owners {
			o := &sessions[i].Owners[j]
			if p := snap.Procs[o.Identity.PID]; p != nil && p.Identity == o.Identity && slices.Contains(p.Argv, "app-server") {
				o.Shared = true
			}
		}
	}
}

// lockHolder returns the pid holding the lock file at path, 0 when none
// does. An error means the holder could not be told (a process the lock
// table names could not be checked, the lock file could not be stat'ed):
// 0 is then no proof that the writer died. A lock file removed since the
// folder was listed is held by nobody.
func (a *Adapter) lockHolder(path string, table *lockTable) (pid int, evidence string, inferred bool, err error) {
	held, lockErr := table.get()
	if lockErr == nil {
		pid, err := held.Holder(path)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, "", false, nil
		}
		return pid, "holds the writer lock " + path, false, err
	}
	pids, err := a.cfg.Host.Holders(path)
	if err != nil || len(pids) == 0 {
		return 0, "", false, nil
	}
	return pids[0], fmt.Sprintf("has the writer lock %s open (the lock table is not readable: %v)", path, lockErr), true, nil
}

// lockTable reads the kernel's lock table at most once per pass, and only
// when a home has a lock file to look up: with no Codex writing and none
// killed, a pass reads no /proc/locks at all. Only the processes it names
// for a lock file's inode have their descriptors read (Holder).
type lockTable struct {
	host ProcHost
	read bool
	held *proc.LockTable
	err  error
	// unchecked are the sessions whose lock a process may hold that could
	// not be checked: their tools are not called orphans.
	unchecked map[string]bool
}

func newLockTable(host ProcHost) *lockTable {
	return &lockTable{host: host, unchecked: map[string]bool{}}
}

func (t *lockTable) get() (*proc.LockTable, error) {
	if !t.read {
		t.held, t.err = t.host.LockTable()
		t.read = true
	}
	return t.held, t.err
}
