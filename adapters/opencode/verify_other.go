//go:build !linux && !darwin

package opencode

import (
	"fmt"
	"net/netip"
	"runtime"
)

// verifyServer: on this platform sessiond knows no way to tell who listens
// at a server's address, so no server found earlier is trusted for a
// repair, an abort or an existence check.
func verifyServer(_ string, s serverInfo, _ netip.AddrPort, _ int) error {
	return fmt.Errorf("check server %s: who listens there cannot be checked on %s", s.URL, runtime.GOOS)
}
