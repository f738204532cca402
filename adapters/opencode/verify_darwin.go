//go:build darwin

package opencode

import (
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// sZomb is p_stat of a zombie (SZOMB in <sys/proc.h>).
const sZomb = 5

// verifyServer checks, just before a server found in an earlier pass is
// asked or written anything, that it is still this uid's. macOS has no
// table of listening sockets with their owners, so the server's process
// is checked instead: still the one found (same start time), alive, and
// of this uid. A live server keeps its port, and macOS refuses a bind on a
// port in use to another non-root uid, so what listens there is still it.
func verifyServer(_ string, s serverInfo, _ netip.AddrPort, uid int) error {
	pid := s.Owner.PID
	if pid <= 0 {
		return fmt.Errorf("check server %s: its process is not known", s.URL)
	}
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.pid", pid)
	if err != nil {
		return fmt.Errorf("check server %s: sysctl kern.proc.pid %d: %w", s.URL, pid, err)
	}
	if len(ks) == 0 || ks[0].Proc.P_stat == sZomb {
		return fmt.Errorf("check server %s: its process %d has exited", s.URL, pid)
	}
	k := &ks[0]
	tv := k.Proc.P_starttime
	if start := uint64(tv.Sec)*1_000_000 + uint64(tv.Usec); start != s.Owner.StartTicks {
		return fmt.Errorf("check server %s: pid %d is another process now (started %d, want %d)", s.URL, pid, start, s.Owner.StartTicks)
	}
	if got := int(k.Eproc.Ucred.Uid); got != uid {
		return fmt.Errorf("check server %s: its process %d runs as uid %d, not sessiond's uid %d", s.URL, pid, got, uid)
	}
	return nil
}
