//go:build !linux

package actions

import (
	"errors"
	"syscall"

	"github.com/sessiond/sessiond/proc"
)

// errNoGroups: listing a process group's members is implemented for Linux
// only. Elsewhere reap signals each attributed pid, never a group.
var errNoGroups = errors.New("listing process group members is not supported on this system")

func pgidOf(pid int) (int, uint64, error) { return 0, 0, errNoGroups }

func groupMembers(map[int]bool) (map[int][]member, error) { return nil, errNoGroups }

// groupGone without a member listing: kill(-pgid, 0) fails with ESRCH once
// no process is left in the group. An unreaped zombie still counts, so a
// group may read alive a little longer than it is. A live process whose
// pid is the group's number but whose start differs from the leader's
// means the number was freed and taken by a new group, as on Linux: the
// group meant is gone, and the new one is never signalled.
func groupGone(pgid int, leaderTicks uint64) (bool, error) {
	if st, err := proc.NewHost().Stat(pgid); err == nil && st.PGID == pgid && st.StartTicks != leaderTicks {
		return true, nil
	}
	err := syscall.Kill(-pgid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return false, nil
	case errors.Is(err, syscall.ESRCH):
		return true, nil
	}
	return false, err
}
