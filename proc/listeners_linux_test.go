package proc

import (
	"bufio"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseHexAddr(t *testing.T) {
	for in, want := range map[string]string{
		"0100007F:1F90":                         "127.0.0.1:8080",
		"00000000:1000":                         "0.0.0.0:4096",
		"00000000000000000000000001000000:1F90": "[::1]:8080",
		"00000000000000000000000000000000:0050": "[::]:80",
		"0000000000000000FFFF00000100007F:0050": "[::ffff:127.0.0.1]:80",
		"0A0200C0:0050":                         "192.0.2.10:80",
	} {
		if got, ok := parseHexAddr(in); !ok || got.String() != want {
			t.Errorf("parseHexAddr(%q) = %s, %v; want %s", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "zz:1", "0100007F", "0100007F:XYZ", "01:0050"} {
		if _, ok := parseHexAddr(bad); ok {
			t.Errorf("parseHexAddr(%q) accepted", bad)
		}
	}
}

// The uid and inode columns of /proc/net/tcp are read, and only LISTEN rows.
func TestParseListeners(t *testing.T) {
	in := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n" +
		"   0: 0100007F:1000 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n" +
		"   1: 0100007F:1000 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 9 1\n" +
		"   2: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1\n"
	got, err := parseListeners(bufio.NewScanner(strings.NewReader(in)))
	want := []Listener{
		{Addr: netip.MustParseAddrPort("127.0.0.1:4096"), UID: 1000, Inode: 4242},
		{Addr: netip.MustParseAddrPort("0.0.0.0:80"), UID: 0, Inode: 77},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("parseListeners = %+v, %v; want %+v", got, err, want)
	}
}

// Listeners reads the tables of the root's own namespace, tcp and tcp6,
// and a missing table lists nothing.
func TestListenersOfRoot(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := &Host{Root: root}
	if ls, err := h.Listeners(); err != nil || len(ls) != 0 {
		t.Fatalf("no tables: %v, %v; want none", ls, err)
	}
	head := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tcp6 := head + "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 77 1\n"
	if err := os.WriteFile(filepath.Join(root, "net", "tcp6"), []byte(tcp6), 0o644); err != nil {
		t.Fatal(err)
	}
	want := []Listener{{Addr: netip.MustParseAddrPort("[::1]:8080"), UID: 1000, Inode: 77}}
	if ls, err := h.Listeners(); err != nil || !slices.Equal(ls, want) {
		t.Fatalf("Listeners = %+v, %v; want %+v", ls, err, want)
	}
}
