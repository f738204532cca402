package codex

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/mounttest"
	"github.com/sessiond/sessiond/proc"
)

// homeIn makes root a Codex home holding the given fixtures, as home does
// in a temp dir.
func homeIn(t *testing.T, root string, files ...string) string {
	t.Helper()
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		for _, fx := range fixtures {
			if fx.file == name {
				writeRollout(t, day, fx.id, readFixture(t, name))
			}
		}
	}
	return root
}

// startSleeper starts a real process to stand as a lock holder in a
// fixture proc tree: its identity is read through the fixture from the
// real /proc.
func startSleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// procTree is a fixture proc root: the real boot id and each real pid's
// stat (so identities are the real ones), and made-up lock tables and
// descriptors.
type procTree struct {
	t    *testing.T
	root string
}

func newProcTree(t *testing.T) *procTree {
	t.Helper()
	p := &procTree{t: t, root: t.TempDir()}
	p.link("/proc/sys/kernel/random/boot_id", "sys", "kernel", "random", "boot_id")
	return p
}

func (p *procTree) link(target string, elem ...string) {
	p.t.Helper()
	at := filepath.Join(append([]string{p.root}, elem...)...)
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.Symlink(target, at); err != nil {
		p.t.Fatal(err)
	}
}

func (p *procTree) write(content string, elem ...string) {
	p.t.Helper()
	at := filepath.Join(append([]string{p.root}, elem...)...)
	if err := os.MkdirAll(filepath.Dir(at), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(at, []byte(content), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// holds gives the real process pid the descriptor fd open on target, with
// the fdinfo lock line of the flock lockLine names ("MAJ:MIN:INO", as the
// kernel prints it).
func (p *procTree) holds(pid, fd int, target, lockLine string) {
	p.t.Helper()
	if _, err := os.Lstat(filepath.Join(p.root, itoa(pid), "stat")); err != nil {
		p.link(fmt.Sprintf("/proc/%d/stat", pid), itoa(pid), "stat")
	}
	p.link(target, itoa(pid), "fd", itoa(fd))
	var st unix.Stat_t
	if err := unix.Stat(target, &st); err != nil {
		p.t.Fatal(err)
	}
	p.write(fmt.Sprintf("pos:\t0\nflags:\t02100002\nmnt_id:\t27\nino:\t%d\nlock:\t1: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n", st.Ino, pid, lockLine),
		itoa(pid), "fdinfo", itoa(fd))
}

func itoa(n int) string { return fmt.Sprint(n) }

// kernelName is how the lock table names a device and inode.
func kernelName(dev, ino uint64) string {
	return fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), ino)
}

// The lock table's device need not be stat's (btrfs subvolumes, overlayfs
// over two file systems): the owner is the lock's holder by inode whose
// own descriptor is the lock file, whatever the devices say, and none
// when the holders by inode have another file open.
func TestLockOwnerConfirmedByItsDescriptor(t *testing.T) {
	root := home(t, "killed.jsonl")
	id := fixtures[1].id
	lock := filepath.Join(root, "thread-writer-locks", id+".lock")
	decoy := filepath.Join(t.TempDir(), "other.lock")
	for _, f := range []string{lock, decoy} {
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var st unix.Stat_t
	if err := unix.Stat(lock, &st); err != nil {
		t.Fatal(err)
	}
	statName := kernelName(uint64(st.Dev), st.Ino)
	// A device the stat of the lock file does not give, as the kernel
	// prints the upper tmpfs of an overlay or a btrfs's superblock.
	other := unix.Mkdev(0, 0x29)
	if other == uint64(st.Dev) {
		other = unix.Mkdev(0, 0x2a)
	}
	kernName := kernelName(other, st.Ino)
	writer, stranger := startSleeper(t), startSleeper(t)

	for _, tc := range []struct {
		name  string
		setup func(p *procTree) string // the lock table
		want  int
	}{
		{"the kernel names another device", func(p *procTree) string {
			p.holds(writer, 38, lock, kernName)
			return fmt.Sprintf("1: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n", writer, kernName)
		}, writer},
		{"two locks on the inode, one on stat's device", func(p *procTree) string {
			// The stranger's lock is on another file whose device number,
			// as the kernel prints it, happens to be the lock file's st_dev.
			p.holds(stranger, 5, decoy, statName)
			p.holds(writer, 38, lock, kernName)
			return fmt.Sprintf("1: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n2: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n", stranger, statName, writer, kernName)
		}, writer},
		{"a lock on the inode, of another file", func(p *procTree) string {
			p.holds(stranger, 5, decoy, statName)
			return fmt.Sprintf("1: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n", stranger, statName)
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newProcTree(t)
			p.write(tc.setup(p), "locks")
			a := New(Config{Roots: []string{root}, NoLearnedRoots: true, Host: &proc.Host{Root: p.root}, ReleaseGrace: -1})
			o := discover(t, a)[id]
			var got []int
			for _, ow := range o.Owners {
				got = append(got, ow.Identity.PID)
			}
			switch {
			case tc.want == 0 && len(got) != 0:
				t.Fatalf("owners %v (%+v), want none: no holder by inode has the lock file open", got, o.Owners)
			case tc.want != 0 && (len(got) != 1 || got[0] != tc.want || o.Owners[0].Inferred):
				t.Fatalf("owners %v (%+v), want exactly the writer %d (the stranger is %d)", got, o.Owners, tc.want, stranger)
			}
			if o.OwnersExact == "" {
				t.Errorf("owners not exact: every holder by inode was read")
			}
		})
	}
}

// lockOwnerOnMount: a Codex home on dir, its writer lock held by a real
// flock of another process, names that process the owner, exactly; killed,
// none.
func lockOwnerOnMount(t *testing.T, dir string) {
	root := homeIn(t, filepath.Join(dir, "codex-home"), "killed.jsonl")
	id := fixtures[1].id
	lock := filepath.Join(root, "thread-writer-locks", id+".lock")
	holder := holdLock(t, lock)
	var st unix.Stat_t
	if err := unix.Stat(lock, &st); err != nil {
		t.Fatal(err)
	}
	locks, _ := os.ReadFile("/proc/locks")
	var line string
	for _, l := range strings.Split(string(locks), "\n") {
		if f := strings.Fields(l); len(f) > 5 && f[4] == itoa(holder.Process.Pid) {
			line = l
		}
	}
	t.Logf("stat: %s; the lock table: %s", kernelName(uint64(st.Dev), st.Ino), line)

	a := New(Config{Roots: []string{root}, NoLearnedRoots: true, ReleaseGrace: -1})
	o := discover(t, a)[id]
	want, err := proc.NewHost().Identify(holder.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Owners) != 1 || o.Owners[0].Identity != want || o.Owners[0].Inferred || o.OwnersExact == "" {
		t.Fatalf("owners %+v (exact %q), want exactly the holder %v", o.Owners, o.OwnersExact, want)
	}
	holder.Process.Kill()
	holder.Wait()
	if o := discover(t, a)[id]; len(o.Owners) != 0 || o.OwnersExact == "" {
		t.Fatalf("a dead holder still owns: %+v (exact %q)", o.Owners, o.OwnersExact)
	}
}

// On an overlayfs whose layers are on two tmpfs, stat gives the overlay's
// device and the lock table the upper tmpfs's.
func TestLockOwnerOnOverlay(t *testing.T) {
	dir, err := mounttest.Overlay(t)
	if err != nil {
		t.Skipf("OVERLAYFS NOT TESTED: %v", err)
	}
	lockOwnerOnMount(t, dir)
}

// In a btrfs subvolume, stat gives the subvolume's device and the lock
// table the file system's.
func TestLockOwnerOnBtrfs(t *testing.T) {
	dir, err := mounttest.Btrfs(t)
	if err != nil {
		t.Skipf("BTRFS NOT TESTED: %v", err)
	}
	lockOwnerOnMount(t, dir)
}

// A process the lock table names for the lock file's inode whose
// descriptors cannot be read may be the writer: no owner is named, the
// owners are not exact (a recorded owner that lives on is kept), the
// session's tools are not called orphans, and a repair keeps off.
func TestLockOwnerUnchecked(t *testing.T) {
	root := home(t, "killed.jsonl")
	id := fixtures[1].id
	lock := filepath.Join(root, "thread-writer-locks", id+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(lock, &st); err != nil {
		t.Fatal(err)
	}
	tool := exec.Command("sleep", "60")
	tool.Env = append(os.Environ(), "CODEX_THREAD_ID="+id)
	if err := tool.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tool.Process.Kill(); tool.Wait() })
	stranger := startSleeper(t)

	p := newProcTree(t)
	p.write(fmt.Sprintf("1: FLOCK  ADVISORY  WRITE %d %s 0 EOF\n", stranger, kernelName(unix.Mkdev(0, 0x29), st.Ino)), "locks")
	// A file where its fd folder should be: there, and unreadable.
	p.write("", itoa(stranger), "fd")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true, Host: &proc.Host{Root: p.root}, ReleaseGrace: -1})
	o := discover(t, a)[id]
	if len(o.Owners) != 0 || o.OwnersExact != "" || len(o.Problems) != 0 {
		t.Fatalf("owners %+v (exact %q), problems %+v: want none, not exact, and no orphan", o.Owners, o.OwnersExact, o.Problems)
	}
	steps, err := a.PlanRepair(context.Background(), adapters.RepairTarget{UpstreamID: id, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0].Action != "repair" || !strings.Contains(steps[0].Detail, "cannot tell") {
		t.Fatalf("repair plan %+v, want one skipped repair that cannot tell", steps)
	}
}
