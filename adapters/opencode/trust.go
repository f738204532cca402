package opencode

import (
	"fmt"
	"net/netip"
	"net/url"
	"strings"

	"github.com/sessiond/sessiond/proc"
)

// Which OpenCode servers sessiond talks to.
//
// A server is asked with OPENCODE_SERVER_PASSWORD, and what it answers
// names the owners of sessions and drives repairs, so a listener that is
// not this user's must never be asked: it would collect the password and
// could claim sessions. Three rules follow.
//
//   - Only opencode processes of sessiond's own uid are probed.
//   - Only loopback addresses are dialled. OpenCode's --hostname is where
//     it listens (Bun binds it), not an address to dial: a wildcard
//     (0.0.0.0, ::) listens on loopback too and is dialled there; a
//     specific non-loopback address or a host name is not dialled at all
//     (a name could resolve anywhere); "localhost" is dialled as 127.0.0.1
//     and ::1 without asking a resolver, which may be told otherwise.
//   - Where the kernel lists listening sockets with their owners (Linux,
//     /proc/net/tcp{,6}), every socket that could accept the connection
//     must be this uid's, in sessiond's own network namespace. The argv
//     names a port, not who holds it: `opencode run --port N` opens none,
//     so N may be anyone's.
//
// A server found in one pass is checked again (verifyServer) before a
// repair, an abort or an existence check sends it anything.

var (
	loopback4 = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	loopback6 = netip.IPv6Loopback()
)

// dialAddr maps an address a server listens on to the one sessiond dials:
// a wildcard becomes loopback of its family, a loopback address stays, any
// other address has no loopback equivalent (false).
func dialAddr(listen netip.Addr) (netip.Addr, bool) {
	a := listen.Unmap()
	switch {
	case a.IsUnspecified() && a.Is4():
		return loopback4, true
	case a.IsUnspecified():
		return loopback6, true
	case a.IsLoopback():
		return a.WithZone(""), true
	}
	return netip.Addr{}, false
}

// hostnameAddrs maps OpenCode's --hostname to the loopback addresses a
// server listening there is reached at; none when it listens off loopback.
// No --hostname is OpenCode's default, 127.0.0.1.
func hostnameAddrs(hostname string) []netip.Addr {
	h := strings.TrimSuffix(strings.TrimPrefix(hostname, "["), "]")
	switch strings.ToLower(strings.TrimSuffix(h, ".")) {
	case "", "*":
		return []netip.Addr{loopback4}
	case "localhost":
		// RFC 6761: localhost is loopback. Bun binds whichever of the two
		// the resolver gives first; a listener check finds which.
		return []netip.Addr{loopback4, loopback6}
	}
	ip, err := netip.ParseAddr(h)
	if err != nil {
		return nil // a host name: it could resolve anywhere
	}
	if d, ok := dialAddr(ip); ok {
		return []netip.Addr{d}
	}
	return nil
}

// accepts reports whether a socket listening on l could accept a
// connection to dst: the same address, or a wildcard of its port. A "::"
// socket counts for IPv4 as well (it does unless IPV6_V6ONLY is set); when
// in doubt a socket counts, which only makes the check stricter.
func accepts(l, dst netip.AddrPort) bool {
	if l.Port() != dst.Port() {
		return false
	}
	la, da := l.Addr().Unmap().WithZone(""), dst.Addr().Unmap().WithZone("")
	switch {
	case la == da:
		return true
	case la.IsUnspecified() && la.Is6():
		return true
	case la.IsUnspecified() && la.Is4() && da.Is4():
		return true
	}
	return false
}

// checkListener checks that something listens at dst in sessiond's network
// namespace and that every socket that could take the connection is uid's:
// where two could (a wildcard and a specific address), the kernel picks,
// and both must be trusted.
func checkListener(table []proc.Listener, dst netip.AddrPort, uid int) error {
	found := false
	for _, l := range table {
		if !accepts(l.Addr, dst) {
			continue
		}
		if l.UID != uid {
			return fmt.Errorf("%s is served by a socket of uid %d (listening on %s, inode %d), not of sessiond's uid %d", dst, l.UID, l.Addr, l.Inode, uid)
		}
		found = true
	}
	if !found {
		return fmt.Errorf("nothing listens on %s in sessiond's network namespace", dst)
	}
	return nil
}

// loopbackAddr parses a server's base URL and refuses any that is not
// http:// to a loopback IP address with a port: the one check every
// request passes, so no path can send the password off the host.
func loopbackAddr(base string) (netip.AddrPort, error) {
	u, err := url.Parse(base)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("server URL %q: %w", base, err)
	}
	if u.Scheme != "http" {
		return netip.AddrPort{}, fmt.Errorf("server URL %q: scheme %q, want http", base, u.Scheme)
	}
	ap, err := netip.ParseAddrPort(u.Host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("server URL %q: not an IP address and port (host names are never dialled): %w", base, err)
	}
	if !ap.Addr().Unmap().IsLoopback() {
		return netip.AddrPort{}, fmt.Errorf("server URL %q: %s is not a loopback address", base, ap.Addr())
	}
	return ap, nil
}

// serverURL is the base URL of a server reached at ap.
func serverURL(ap netip.AddrPort) string { return "http://" + ap.String() }

// checkServer is verifyServer for a server found in an earlier pass, with
// its URL checked first.
func (a *Adapter) checkServer(s serverInfo) error {
	ap, err := loopbackAddr(s.URL)
	if err != nil {
		return err
	}
	return verifyServer(a.cfg.ProcRoot, s, ap, a.uid)
}
