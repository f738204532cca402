//go:build linux

package opencode

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

// fdSupported: Linux shows each process's open files in /proc/<pid>/fd.
const fdSupported = true

// scanFDs reads /proc/<pid>/fd: the files the process holds open and the
// inodes of its sockets.
func scanFDs(procRoot string, pid int) (files []string, sockets map[uint64]bool, err error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid), "fd")
	d, err := os.Open(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	sockets = map[uint64]bool{}
	for _, n := range names {
		target, err := os.Readlink(filepath.Join(dir, n))
		if err != nil {
			continue // closed meanwhile
		}
		if strings.HasPrefix(target, "socket:[") && strings.HasSuffix(target, "]") {
			if ino, err := strconv.ParseUint(target[len("socket:["):len(target)-1], 10, 64); err == nil {
				sockets[ino] = true
			}
			continue
		}
		if strings.HasPrefix(target, "/") {
			files = append(files, target)
		}
	}
	return files, sockets, nil
}

// listenersKnown: Linux lists every listening TCP socket, with the uid
// that opened it, in /proc/net/tcp{,6}, so a server's listener can be
// checked before anything is sent to it.
const listenersKnown = true

// readListeners reads the listening TCP sockets of sessiond's own network
// namespace: <proc root>/net/tcp and tcp6, which on a real /proc are
// /proc/self/net/... Only these can be reached at sessiond's loopback; a
// process in another namespace (a container) lists its sockets in its own
// /proc/<pid>/net, and its 127.0.0.1 is not this one. A missing table
// (IPv6 disabled) lists nothing.
func readListeners(procRoot string) ([]tcpListener, error) {
	var out []tcpListener
	for _, name := range []string{"tcp", "tcp6"} {
		path := filepath.Join(procRoot, "net", name)
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
func parseListeners(sc *bufio.Scanner) ([]tcpListener, error) {
	var out []tcpListener
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
			out = append(out, tcpListener{addr: addr, uid: uid, inode: ino})
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

// verifyServer checks, just before a server found in an earlier pass is
// asked or written anything, that what listens at its address now is
// still this uid's: the server may have exited and another user may
// listen on its port since.
func verifyServer(procRoot string, s Server, at netip.AddrPort, uid int) error {
	table, err := readListeners(procRoot)
	if err != nil {
		return fmt.Errorf("check server %s: %w", s.URL, err)
	}
	if err := checkListener(table, at, uid); err != nil {
		return fmt.Errorf("check server %s: %w", s.URL, err)
	}
	return nil
}
