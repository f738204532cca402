package opencode

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessiond/sessiond/proc"
)

// FuzzParseListeners: no /proc/net/tcp{,6} content makes the listener
// parser (proc.Host.Listeners) panic; every socket it returns has a valid
// address, and what sessiond would dial for it is a loopback address that
// loopbackAddr accepts, or nothing.
func FuzzParseListeners(f *testing.F) {
	head := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	f.Add([]byte(head+"   0: 0100007F:1000 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n"), uint64(4242))
	f.Add([]byte(head+"   1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1\n"), uint64(77))
	f.Add([]byte(head+"   2: 0100007F:1000 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 9 1\n"), uint64(9))
	f.Add([]byte(head+"   3: 0100007F:FFFFF 00000000:0000 0A 0 0 0 0 0 5\n"), uint64(5))
	f.Add([]byte(head+"   4: 0100007:1000 00000000:0000 0A 0 0 0 0 0 6\n"), uint64(6))
	f.Add([]byte("\x00\xff 0A\n\n"), uint64(0))
	root := f.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		f.Fatal(err)
	}
	host := &proc.Host{Root: root}
	f.Fuzz(func(t *testing.T, b []byte, ino uint64) {
		if err := os.WriteFile(filepath.Join(root, "net", "tcp"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		ls, _ := host.Listeners()
		for _, l := range ls {
			if !l.Addr.Addr().IsValid() {
				t.Fatalf("listener %+v: invalid address", l)
			}
			ip, ok := dialAddr(l.Addr.Addr())
			if !ok {
				continue
			}
			u := serverURL(netip.AddrPortFrom(ip, l.Addr.Port()))
			if _, err := loopbackAddr(u); err != nil {
				t.Fatalf("listener %+v: dialled at %s: %v", l, u, err)
			}
		}
	})
}
