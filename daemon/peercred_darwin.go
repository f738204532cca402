package daemon

import (
	"net"

	"golang.org/x/sys/unix"
)

// peerCred returns the uid and pid of the process at the other end of a
// Unix socket connection, from LOCAL_PEERCRED (what getpeereid uses) and
// LOCAL_PEERPID.
func peerCred(c *net.UnixConn) (uid, pid int, err error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return -1, 0, err
	}
	var cred *unix.Xucred
	var serr, perr error
	if err := raw.Control(func(fd uintptr) {
		cred, serr = unix.GetsockoptXucred(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		pid, perr = unix.GetsockoptInt(int(fd), unix.SOL_LOCAL, unix.LOCAL_PEERPID)
	}); err != nil {
		return -1, 0, err
	}
	if serr != nil {
		return -1, 0, serr
	}
	if perr != nil {
		pid = 0 // the uid check stands without it; hooks need it
	}
	return int(cred.Uid), pid, nil
}
