package proc

import "net/netip"

// Listener is one listening TCP socket, as Host.Listeners reads it.
type Listener struct {
	// Addr is where it listens, a wildcard (0.0.0.0, ::) included.
	Addr netip.AddrPort
	// UID is the user that opened it.
	UID int
	// Inode is the socket's inode, as Descriptors.Sockets names it.
	Inode uint64
}
