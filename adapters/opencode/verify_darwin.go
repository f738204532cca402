//go:build darwin

package opencode

import (
	"fmt"
	"net/netip"

	"github.com/sessiond/sessiond/proc"
)

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
	h := proc.NewHost()
	if r := h.Probe(s.Owner); r.Liveness != proc.Alive {
		return fmt.Errorf("check server %s: its process %d is not the one found (%s: %s)", s.URL, pid, r.Liveness, r.Reason)
	}
	got, err := h.UID(pid)
	if err != nil {
		return fmt.Errorf("check server %s: %w", s.URL, err)
	}
	if got != uid {
		return fmt.Errorf("check server %s: its process %d runs as uid %d, not sessiond's uid %d", s.URL, pid, got, uid)
	}
	return nil
}
