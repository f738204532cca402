package mounttest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Overlay mounts, under a new temp dir, two tmpfs and an overlayfs whose
// lower layer is on one and upper layer on the other, and returns the
// merged dir; the test's end unmounts all three. A file created in it is
// on the upper tmpfs: stat(2) gives the overlay's own device, the lock
// table the upper tmpfs's.
func Overlay(t testing.TB) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("mounting an overlayfs needs root (euid %d)", os.Geteuid())
	}
	dir := t.TempDir()
	lowerFS, upperFS, merged := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "m")
	for _, d := range []string{lowerFS, upperFS, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	for _, d := range []string{lowerFS, upperFS} {
		if err := mount(t, "tmpfs", d, "tmpfs", "size=64m"); err != nil {
			return "", err
		}
	}
	lower, upper, work := filepath.Join(lowerFS, "lower"), filepath.Join(upperFS, "upper"), filepath.Join(upperFS, "work")
	for _, d := range []string{lower, upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return "", err
		}
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := mount(t, "overlay", merged, "overlay", opts); err != nil {
		return "", err
	}
	return merged, nil
}

// Btrfs makes a btrfs on a loop file under a new temp dir, mounts it,
// creates a subvolume in it and returns the subvolume's path; the test's
// end unmounts it (and the loop device goes with the file system). stat(2)
// of a file in the subvolume gives the subvolume's anonymous device, the
// lock table the file system's.
func Btrfs(t testing.TB) (string, error) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("mounting a btrfs needs root (euid %d)", os.Geteuid())
	}
	mkfs, err := exec.LookPath("mkfs.btrfs")
	if err != nil {
		return "", fmt.Errorf("mkfs.btrfs not found (Debian: apt-get install btrfs-progs): %w", err)
	}
	btrfs, err := exec.LookPath("btrfs")
	if err != nil {
		return "", fmt.Errorf("btrfs not found (Debian: apt-get install btrfs-progs): %w", err)
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "m")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(img)
	if err != nil {
		return "", err
	}
	// 128 MiB: above mkfs.btrfs's minimum; sparse, so it costs little.
	err = f.Truncate(128 << 20)
	f.Close()
	if err != nil {
		return "", err
	}
	if out, err := exec.Command(mkfs, "-q", img).CombinedOutput(); err != nil {
		return "", fmt.Errorf("mkfs.btrfs %s: %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	// mount(8) sets up the loop device (and frees it at the unmount:
	// autoclear), which mount(2) alone does not.
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		return "", fmt.Errorf("mount -o loop %s: %v: %s", img, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { unmount(t, mnt) })
	sub := filepath.Join(mnt, "sub")
	if out, err := exec.Command(btrfs, "subvolume", "create", sub).CombinedOutput(); err != nil {
		return "", fmt.Errorf("btrfs subvolume create %s: %v: %s", sub, err, strings.TrimSpace(string(out)))
	}
	return sub, nil
}

// mount mounts source on target and has the test's end unmount it.
func mount(t testing.TB, source, target, fstype, opts string) error {
	if err := unix.Mount(source, target, fstype, 0, opts); err != nil {
		return fmt.Errorf("mount -t %s -o %s %s %s: %w", fstype, opts, source, target, err)
	}
	t.Cleanup(func() { unmount(t, target) })
	return nil
}

// unmount unmounts target; still busy (a process the test started has
// not died yet), it is detached, to go when the last user does.
func unmount(t testing.TB, target string) {
	err := unix.Unmount(target, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(target, unix.MNT_DETACH)
	}
	if err != nil {
		t.Errorf("unmount %s: %v", target, err)
	}
}
