//go:build linux

package actions

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/proc"
)

// procRoot is where the process table is read; a variable so a test can
// point it at a fixture tree.
var procRoot = "/proc"

// statFields reads /proc/<pid>/stat through proc.ParseStat: the process
// group, the start ticks (the identity's) and whether it has exited.
func statFields(dir string) (pgid int, startTicks uint64, exited bool, err error) {
	path := filepath.Join(dir, "stat")
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false, fmt.Errorf("read %s: %w", path, err)
	}
	st, err := proc.ParseStat(b)
	if err != nil {
		return 0, 0, false, fmt.Errorf("%s: %w", path, err)
	}
	return st.PGID, st.StartTicks, st.Exited(), nil
}

// pgidOf returns the process group of pid and its start ticks, so the
// caller can check the pid is still the process it means.
func pgidOf(pid int) (pgid int, startTicks uint64, err error) {
	pgid, startTicks, _, err = statFields(filepath.Join(procRoot, strconv.Itoa(pid)))
	return pgid, startTicks, err
}

// groupMembers lists, in one pass over the process table, the live
// processes of each process group in pgids. A zombie is not listed: it is
// dead, and a signal cannot hurt it. A process that exits during the pass
// is skipped; an error means the table could not be read, so the caller
// cannot know a group's members and must not treat it as whole.
func groupMembers(pgids map[int]bool) (map[int][]member, error) {
	d, err := os.Open(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list process groups: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("list process groups: read %s: %w", procRoot, err)
	}
	out := map[int][]member{}
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 0 {
			continue
		}
		pgid, ticks, exited, err := statFields(filepath.Join(procRoot, name))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
				continue // exited while we looked
			}
			return nil, fmt.Errorf("list process groups: %w", err)
		}
		if pgids[pgid] && !exited {
			out[pgid] = append(out[pgid], member{PID: pid, StartTicks: ticks})
		}
	}
	return out, nil
}

// groupGone reports whether no live process is left in the group that
// the process with leaderTicks created. A live process whose pid is the
// group's number but whose start differs means the number was freed and
// taken by a new group: the one we meant is gone, and the new one is
// never signalled.
func groupGone(pgid int, leaderTicks uint64) (bool, error) {
	m, err := groupMembers(map[int]bool{pgid: true})
	if err != nil {
		return false, err
	}
	for _, p := range m[pgid] {
		if p.PID == pgid && p.StartTicks != leaderTicks {
			return true, nil
		}
	}
	return len(m[pgid]) == 0, nil
}
