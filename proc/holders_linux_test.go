package proc

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// OpenFiles names files by their link targets and sockets by inode;
// Holders finds the processes holding any of the paths, a removed file
// included, and passes over a process whose fds cannot be read.
func TestOpenFilesAndHolders(t *testing.T) {
	root := t.TempDir()
	link := func(pid, fd, target string) {
		t.Helper()
		dir := filepath.Join(root, pid, "fd")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(dir, fd)); err != nil {
			t.Fatal(err)
		}
	}
	link("10", "3", "/data/opencode.db")
	link("10", "4", "socket:[4242]")
	link("10", "5", "pipe:[7]")
	link("20", "3", "/data/opencode.db-wal (deleted)")
	link("30", "3", "/data/other.db")
	if err := os.MkdirAll(filepath.Join(root, "40"), 0o755); err != nil { // no fd dir: not readable
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil { // not a pid
		t.Fatal(err)
	}
	h := &Host{Root: root}

	fds, err := h.OpenFiles(10)
	if err != nil || !slices.Equal(fds.Files, []string{"/data/opencode.db"}) || len(fds.Sockets) != 1 || !fds.Sockets[4242] {
		t.Fatalf("OpenFiles(10) = %+v, %v", fds, err)
	}
	if _, err := h.OpenFiles(40); err == nil {
		t.Fatal("OpenFiles of a process without a readable fd dir: no error")
	}
	got, err := h.Holders("/data/opencode.db", "/data/opencode.db-wal", "/data/opencode.db-shm")
	if err != nil || !slices.Equal(got, []int{10, 20}) {
		t.Fatalf("Holders = %v, %v; want [10 20]", got, err)
	}
	if got, err := h.Holders("/data/none.db"); err != nil || len(got) != 0 {
		t.Fatalf("Holders of an unheld file = %v, %v; want none", got, err)
	}
	if _, err := (&Host{Root: filepath.Join(root, "missing")}).Holders("/data/opencode.db"); err == nil {
		t.Fatal("Holders on an unreadable root: no error")
	}
}
