package opencodetest

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sessiond/sessiond/proc"
)

// ProcTree writes a fixture /proc tree with what the OpenCode adapter reads
// beyond the snapshot: /proc/<pid>/fd links (open files and sockets) and
// /proc/<pid>/net/tcp listening sockets.
type ProcTree struct {
	Root string
}

// OpenFiles adds fd links of pid pointing at paths ("socket:[N]" for a
// socket), numbered after the existing ones.
func (t ProcTree) OpenFiles(pid int, targets ...string) error {
	dir := filepath.Join(t.Root, strconv.Itoa(pid), "fd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("proc fixture: %w", err)
	}
	ents, _ := os.ReadDir(dir)
	n := len(ents) + 3
	for _, target := range targets {
		if err := os.Symlink(target, filepath.Join(dir, strconv.Itoa(n))); err != nil {
			return fmt.Errorf("proc fixture: %w", err)
		}
		n++
	}
	return nil
}

// Listen makes pid hold a TCP socket of this uid listening on
// 127.0.0.1:port, with the given inode.
func (t ProcTree) Listen(pid, port int, inode uint64) error {
	return t.ListenOn(pid, netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port)), os.Getuid(), inode)
}

// ListenOn adds a listening TCP socket on addr, owned by uid, with the given
// inode, to the tree's net/tcp (IPv4) or net/tcp6 (IPv6): the table of the
// network namespace the reader lives in, as /proc/net/tcp is. When pid > 0
// the process holds the socket (an fd link); pid 0 is a socket of a process
// outside the fixture (another user's).
func (t ProcTree) ListenOn(pid int, addr netip.AddrPort, uid int, inode uint64) error {
	return t.listenIn(filepath.Join(t.Root, "net"), pid, addr, uid, inode)
}

// ListenInOwnNamespace is ListenOn, but the socket is listed only in
// /proc/<pid>/net: the process lives in another network namespace, whose
// loopback is not the reader's.
func (t ProcTree) ListenInOwnNamespace(pid int, addr netip.AddrPort, uid int, inode uint64) error {
	return t.listenIn(filepath.Join(t.Root, strconv.Itoa(pid), "net"), pid, addr, uid, inode)
}

// ClearListeners removes every listening socket of the tree's own network
// namespace (net/tcp and net/tcp6), as when the servers exit.
func (t ProcTree) ClearListeners() error {
	for _, name := range []string{"tcp", "tcp6"} {
		if err := os.Remove(filepath.Join(t.Root, "net", name)); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("proc fixture: %w", err)
		}
	}
	return nil
}

func (t ProcTree) listenIn(dir string, pid int, addr netip.AddrPort, uid int, inode uint64) error {
	if pid > 0 {
		if err := t.OpenFiles(pid, fmt.Sprintf("socket:[%d]", inode)); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("proc fixture: %w", err)
	}
	name := "tcp"
	if addr.Addr().Is6() {
		name = "tcp6"
	}
	path := filepath.Join(dir, name)
	body := ""
	if b, err := os.ReadFile(path); err == nil {
		body = string(b)
	} else {
		body = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	}
	remote := "00000000:0000"
	if addr.Addr().Is6() {
		remote = strings.Repeat("0", 32) + ":0000"
	}
	body += fmt.Sprintf("   0: %s:%04X %s 0A 00000000:00000000 00:00000000 00000000 %5d        0 %d 1 0000000000000000 100 0 0 10 0\n",
		hexAddr(addr.Addr()), addr.Port(), remote, uid, inode)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		return fmt.Errorf("proc fixture: %w", err)
	}
	return nil
}

// hexAddr encodes an address as /proc/net/tcp{,6} shows it: 32-bit words
// in host (little-endian) byte order.
func hexAddr(a netip.Addr) string {
	b := a.AsSlice()
	var sb strings.Builder
	for w := 0; w < len(b); w += 4 {
		fmt.Fprintf(&sb, "%02X%02X%02X%02X", b[w+3], b[w+2], b[w+1], b[w])
	}
	return sb.String()
}

// Proc returns a snapshot row for a fixture process of this uid.
func Proc(pid int, startTicks uint64, cwd string, argv ...string) *proc.Process {
	return &proc.Process{
		Identity: proc.Identity{BootID: "test-boot", PID: pid, StartTicks: startTicks},
		PPID:     1,
		State:    'S',
		UID:      os.Getuid(),
		Cwd:      cwd,
		Argv:     argv,
	}
}

// Snapshot returns a snapshot of the given rows.
func Snapshot(ps ...*proc.Process) *proc.Snapshot {
	s := &proc.Snapshot{Taken: time.Now(), BootID: "test-boot", Procs: map[int]*proc.Process{}}
	for _, p := range ps {
		s.Procs[p.Identity.PID] = p
	}
	return s
}

// StartTimes is a proc.StartTimer for fixture processes: start time by pid.
type StartTimes map[int]time.Time

// StartTime implements proc.StartTimer.
func (s StartTimes) StartTime(id proc.Identity) (time.Time, error) {
	t, ok := s[id.PID]
	if !ok {
		return time.Time{}, fmt.Errorf("no start time for pid %d", id.PID)
	}
	return t, nil
}
