package proc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/internal/testkit/mounttest"
)

func TestParseLocks(t *testing.T) {
	// Lines as Linux 6.18 printed them while codex exec 0.169.0 ran.
	in := []byte(`1: FLOCK  ADVISORY  WRITE 12535 fe:00:10347424 0 EOF
2: POSIX  ADVISORY  READ 12535 fe:00:10347419 128 128
3: FLOCK  ADVISORY  READ 77 fe:00:99 0 EOF
4: OFDLCK ADVISORY  WRITE -1 00:2c:5 0 EOF
5: FLOCK  ADVISORY  WRITE 901 103:02:123456 0 EOF
5: -> FLOCK  ADVISORY  WRITE 902 103:02:123456 0 EOF
`)
	got, err := parseLocks(in)
	if err != nil {
		t.Fatal(err)
	}
	want := []Flock{
		{Dev: unix.Mkdev(0xfe, 0), Ino: 10347424, PID: 12535},
		{Dev: unix.Mkdev(0x103, 2), Ino: 123456, PID: 901},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := parseLocks([]byte("1: FLOCK ADVISORY WRITE x fe:00:1 0 EOF\n")); err == nil {
		t.Error("a bad pid parsed")
	}
	if _, err := parseLocks([]byte("1: FLOCK ADVISORY WRITE 1 fe00:1 0 EOF\n")); err == nil {
		t.Error("a bad file parsed")
	}
}

// kernelName is how the lock table names a device and inode.
func kernelName(dev, ino uint64) string {
	return fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
}

func statOf(t *testing.T, path string) (dev, ino uint64) {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Dev), st.Ino
}

// Holder on a fixture proc root: candidates by inode on any device, the
// holder the one whose own descriptor is the file and carries the lock.
func TestHolderConfirmedByDescriptor(t *testing.T) {
	files := t.TempDir()
	lock, decoy := filepath.Join(files, "x.lock"), filepath.Join(files, "sub", "x.lock")
	for _, f := range []string{lock, decoy} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev, ino := statOf(t, lock)
	// The stat's device as the kernel would print it, and another one,
	// as it prints an overlay's upper layer or a btrfs's super block.
	statName := kernelName(dev, ino)
	other := unix.Mkdev(0, 0x29)
	if other == dev {
		other = unix.Mkdev(0, 0x2a)
	}
	kernName := kernelName(other, ino)
	line := func(pid int, file string) string {
		return fmt.Sprintf("1: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n", pid, file)
	}

	type fd struct {
		pid, n int
		target string
		lock   string // the fdinfo's lock line's file, "" for none
	}
	for _, tc := range []struct {
		name    string
		locks   string
		fds     []fd
		broken  []int // pids whose fd folder cannot be read
		want    int
		wantErr bool
	}{
		{name: "the kernel names another device than stat",
			locks: line(100, kernName),
			fds:   []fd{{100, 38, lock, kernName}},
			want:  100},
		{name: "two locks on the inode, the other on stat's device",
			locks: line(200, statName) + line(100, kernName),
			fds:   []fd{{200, 5, decoy, statName}, {100, 38, lock, kernName}},
			want:  100},
		{name: "a lock on the inode, of another file of the same name",
			locks: line(200, statName),
			fds:   []fd{{200, 5, decoy, statName}}},
		{name: "the holder has the file open, without the lock",
			// Its lock is on another file of that inode (another device).
			locks: line(100, kernName),
			fds:   []fd{{100, 38, lock, ""}, {100, 39, decoy, kernName}}},
		{name: "the fdinfo's lock is another",
			locks: line(100, kernName),
			fds:   []fd{{100, 38, lock, statName}}},
		{name: "the holder exited since the table was read",
			locks: line(300, kernName)},
		{name: "the holder's descriptors cannot be read",
			locks:  line(400, kernName),
			broken: []int{400}, wantErr: true},
		{name: "one candidate unreadable, the other the holder",
			locks:  line(400, statName) + line(100, kernName),
			fds:    []fd{{100, 38, lock, kernName}},
			broken: []int{400}, want: 100},
		{name: "no lock on the inode",
			locks: fmt.Sprintf("1: FLOCK  ADVISORY  WRITE 100 %s 0 EOF\n", kernelName(dev, ino+1)),
			fds:   []fd{{100, 38, lock, kernName}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.WriteFile(filepath.Join(root, "locks"), []byte(tc.locks), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, f := range tc.fds {
				pid := filepath.Join(root, fmt.Sprint(f.pid))
				for _, d := range []string{"fd", "fdinfo"} {
					if err := os.MkdirAll(filepath.Join(pid, d), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.Symlink(f.target, filepath.Join(pid, "fd", fmt.Sprint(f.n))); err != nil {
					t.Fatal(err)
				}
				_, tino := statOf(t, f.target)
				info := fmt.Sprintf("pos:\t0\nflags:\t02100002\nmnt_id:\t27\nino:\t%d\n", tino)
				if f.lock != "" {
					info += "lock:\t" + line(f.pid, f.lock)
				}
				if err := os.WriteFile(filepath.Join(pid, "fdinfo", fmt.Sprint(f.n)), []byte(info), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, pid := range tc.broken {
				// A file where the fd folder should be: not readable as one,
				// and not gone either (as root, a mode cannot stop a read).
				if err := os.MkdirAll(filepath.Join(root, fmt.Sprint(pid)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, fmt.Sprint(pid), "fd"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			table, err := (&Host{Root: root}).LockTable()
			if err != nil {
				t.Fatal(err)
			}
			got, err := table.Holder(lock)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("Holder = %d, %v; want %d (an error: %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}

	if table, err := (&Host{Root: t.TempDir()}).LockTable(); err == nil {
		t.Fatalf("a root without locks read as %v", table)
	}
}

// A Holder of a lock file that is not there fails with fs.ErrNotExist.
func TestHolderOfAMissingFile(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "locks"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	table, err := (&Host{Root: root}).LockTable()
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := table.Holder(filepath.Join(root, "none.lock")); pid != 0 || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Holder of a missing file = %d, %v", pid, err)
	}
}

// flock takes an exclusive flock on path (created) in this process.
func flock(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	return f
}

func holder(t *testing.T, path string) int {
	t.Helper()
	table, err := NewHost().LockTable()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := table.Holder(path)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestLockTableSeesOwnLock takes a real flock and finds this process its
// holder; released, nobody holds it.
func TestLockTableSeesOwnLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	f := flock(t, p)
	if got := holder(t, p); got != os.Getpid() {
		t.Fatalf("lock on %s held by %d, want this process %d", p, got, os.Getpid())
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if got := holder(t, p); got != 0 {
		t.Fatalf("released lock still held by %d", got)
	}
}

// One table asked about two files a process holds reads its descriptors
// once (the TUI's app-server holds a lock per thread loaded).
func TestHolderReadsDescriptorsOncePerTable(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.lock"), filepath.Join(dir, "b.lock")
	flock(t, a)
	flock(t, b)
	table, err := NewHost().LockTable()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{a, b} {
		if pid, err := table.Holder(p); pid != os.Getpid() || err != nil {
			t.Fatalf("Holder(%s) = %d, %v; want this process %d", p, pid, err, os.Getpid())
		}
	}
	if len(table.fds) != 1 {
		t.Fatalf("descriptors read for %d processes, want this one, once", len(table.fds))
	}
}

// A lock file removed and created anew at its path while a lock on the
// old one is held: the file at the path is held by nobody, though the
// table still lists the old file's lock and the holder still has it open
// ("x.lock (deleted)").
func TestHolderOfAReplacedLockFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	flock(t, p)
	_, oldIno := statOf(t, p)
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := holder(t, p); got != 0 {
		t.Fatalf("a new lock file at %s held by %d, want nobody (the old one, inode %d, is held)", p, got, oldIno)
	}
	locks, _ := os.ReadFile("/proc/locks")
	if !strings.Contains(string(locks), fmt.Sprintf(":%d ", oldIno)) {
		t.Errorf("the old file's lock (inode %d) is not in the table:\n%s", oldIno, locks)
	}
}

// A flock belongs to the open file: a child that inherited the
// descriptor holds it too, but the table names the process that took it,
// and that one is the holder. Once the taker closed its descriptor, the
// lock lives on in the child, and nobody is named.
func TestHolderOfAnInheritedLock(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.lock")
	f := flock(t, p)
	child := exec.Command("sleep", "60")
	child.ExtraFiles = []*os.File{f}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	if got := holder(t, p); got != os.Getpid() {
		t.Fatalf("holder %d, want the taker %d (not the child %d)", got, os.Getpid(), child.Process.Pid)
	}
	f.Close()
	other, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX|unix.LOCK_NB); !errors.Is(err, unix.EWOULDBLOCK) {
		t.Fatalf("the child's inherited lock is not held: flock = %v", err)
	}
	if got := holder(t, p); got != 0 {
		t.Fatalf("holder %d once the taker closed it, want nobody named", got)
	}
}

// holdElsewhere takes a flock on path in a child process (flock(1)
// holding it for sleep), for the lock table to name another pid.
func holdElsewhere(t *testing.T, path string) int {
	t.Helper()
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skipf("flock(1) not found (util-linux): %v", err)
	}
	cmd := exec.Command("flock", "--exclusive", path, "sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 500 {
		f, err := os.Open(path)
		if err == nil {
			err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return cmd.Process.Pid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("flock(1) never took %s", path)
	return 0
}

// onMount: a lock on a file of dir, held by another process, is found by
// Holder though the lock table's device is not stat's.
func onMount(t *testing.T, dir string) {
	p := filepath.Join(dir, "x.lock")
	pid := holdElsewhere(t, p)
	dev, ino := statOf(t, p)
	table, err := NewHost().LockTable()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range table.byIno[ino] {
		names = append(names, fmt.Sprintf("%s by %d", kernelName(l.Dev, l.Ino), l.PID))
	}
	t.Logf("stat: %s; the lock table: %v", kernelName(dev, ino), names)
	if got, err := table.Holder(p); got != pid || err != nil {
		t.Fatalf("Holder = %d, %v; want flock(1) %d", got, err, pid)
	}
}

func TestHolderOnOverlay(t *testing.T) {
	dir, err := mounttest.Overlay(t)
	if err != nil {
		t.Skipf("OVERLAYFS NOT TESTED: %v", err)
	}
	onMount(t, dir)
}

func TestHolderOnBtrfs(t *testing.T) {
	dir, err := mounttest.Btrfs(t)
	if err != nil {
		t.Skipf("BTRFS NOT TESTED: %v", err)
	}
	onMount(t, dir)
}

// BenchmarkLockHolder is a pass's look at one held writer lock: the lock
// table read, and the holder's descriptors (this process, with 100 more
// files open, about twice what codex exec holds) read to confirm it.
func BenchmarkLockHolder(b *testing.B) {
	dir := b.TempDir()
	for i := range 100 {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
	}
	p := filepath.Join(dir, "x.lock")
	f, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		b.Fatal(err)
	}
	h := NewHost()
	// The table alone is what a pass paid before the holder was confirmed.
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.LockTable(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("holder", func(b *testing.B) {
		for b.Loop() {
			table, err := h.LockTable()
			if err != nil {
				b.Fatal(err)
			}
			if pid, err := table.Holder(p); pid != os.Getpid() || err != nil {
				b.Fatalf("Holder = %d, %v", pid, err)
			}
		}
	})
}
