//go:build linux

package opencode

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
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

// listeners returns the "host:port" addresses of the listening TCP sockets
// among the given socket inodes, read from the process's own network
// namespace view (/proc/<pid>/net/tcp and tcp6, else /proc/net/tcp{,6}).
func listeners(procRoot string, pid int, sockets map[uint64]bool) []string {
	if len(sockets) == 0 {
		return nil
	}
	var out []string
	for _, name := range []string{"tcp", "tcp6"} {
		path := filepath.Join(procRoot, strconv.Itoa(pid), "net", name)
		f, err := os.Open(path)
		if err != nil {
			f, err = os.Open(filepath.Join(procRoot, "net", name))
			if err != nil {
				continue
			}
		}
		out = append(out, parseListeners(bufio.NewScanner(f), sockets)...)
		f.Close()
	}
	return out
}

// parseListeners parses /proc/net/tcp{,6} lines: "sl local rem st ... inode".
func parseListeners(sc *bufio.Scanner, sockets map[uint64]bool) []string {
	var out []string
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
		ino, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil || !sockets[ino] {
			continue
		}
		if addr, ok := parseHexAddr(f[1]); ok {
			out = append(out, addr)
		}
	}
	return out
}

// parseHexAddr decodes "0100007F:1F90" (IPv4) or the 32-digit IPv6 form:
// the address is in 32-bit words of host (little-endian) byte order.
func parseHexAddr(s string) (string, bool) {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return "", false
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return "", false
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return "", false
	}
	ip := make(net.IP, len(raw))
	for w := 0; w < len(raw); w += 4 {
		ip[w], ip[w+1], ip[w+2], ip[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
	}
	return net.JoinHostPort(dialHost(ip.String()), strconv.FormatUint(port, 10)), true
}
