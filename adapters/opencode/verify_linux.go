package opencode

import (
	"fmt"
	"net/netip"

	"github.com/sessiond/sessiond/proc"
)

// verifyServer checks, just before a server found in an earlier pass is
// asked or written anything, that what listens at its address now is
// still this uid's: the server may have exited and another user may
// listen on its port since.
func verifyServer(procRoot string, s serverInfo, at netip.AddrPort, uid int) error {
	table, err := (&proc.Host{Root: procRoot}).Listeners()
	if err != nil {
		return fmt.Errorf("check server %s: %w", s.URL, err)
	}
	if err := checkListener(table, at, uid); err != nil {
		return fmt.Errorf("check server %s: %w", s.URL, err)
	}
	return nil
}
