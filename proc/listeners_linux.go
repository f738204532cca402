package proc

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ListenersKnown: Linux lists every listening TCP socket, with the uid
// that opened it, in /proc/net/tcp{,6}, so who listens at an address can
// be checked before anything is sent to it.
const ListenersKnown = true

// Listeners reads the listening TCP sockets of the caller's own network
// namespace: <root>/net/tcp and tcp6, which on a real /proc are
// /proc/self/net/... Only these can be reached at the caller's loopback; a
// process in another namespace (a container) lists its sockets in its own
// /proc/<pid>/net, and its 127.0.0.1 is not this one. A missing table
// (IPv6 disabled) lists nothing.
func (h *Host) Listeners() ([]Listener, error) {
	var out []Listener
	for _, name := range []string{"tcp", "tcp6"} {
		path := filepath.Join(h.root(), "net", name)
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read listening sockets: %w", err)
		}
		ls, err := parseListeners(bufio.NewScanner(f))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read listening sockets from %s: %w", path, err)
		}
		out = append(out, ls...)
	}
	return out, nil
}

// parseListeners parses /proc/net/tcp{,6} lines, "sl local rem st tx:rx
// tr:when retrnsmt uid timeout inode ...", keeping the LISTEN (0A) rows.
func parseListeners(sc *bufio.Scanner) ([]Listener, error) {
	var out []Listener
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue // header
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[3] != "0A" { // 0A = LISTEN
			continue
		}
		uid, err := strconv.Atoi(f[7])
		if err != nil {
			continue
		}
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			continue
		}
		if addr, ok := parseHexAddr(f[1]); ok {
			out = append(out, Listener{Addr: addr, UID: uid, Inode: ino})
		}
	}
	return out, sc.Err()
}

// parseHexAddr decodes "0100007F:1F90" (IPv4) or the 32-digit IPv6 form:
// the address is in 32-bit words of host (little-endian) byte order.
func parseHexAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, false
	}
	for w := 0; w < len(raw); w += 4 {
		raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip, uint16(port)), true
}
