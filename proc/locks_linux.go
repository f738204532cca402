package proc

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockTable reads <root>/locks: the files held with an exclusive
// flock(2), each with the pid that took the lock. Codex names its
// rollout's writer this way (thread-writer-locks/<id>.lock): the lock is
// the kernel's, so it goes with its holder's death, and a lock file left
// behind by a killed writer is held by nobody. The table lists every lock
// on the machine, the pid as seen from this PID namespace; a waiter ("->")
// holds nothing and is left out.
func (h *Host) LockTable() (*LockTable, error) {
	b, err := os.ReadFile(filepath.Join(h.root(), "locks"))
	if err != nil {
		return nil, err
	}
	locks, err := parseLocks(b)
	if err != nil {
		return nil, err
	}
	t := &LockTable{h: h, byIno: make(map[uint64][]Flock, len(locks))}
	for _, l := range locks {
		t.byIno[l.Ino] = append(t.byIno[l.Ino], l)
	}
	return t, nil
}

// Holder returns the pid holding the file at path with an exclusive
// flock, 0 when nobody does.
//
// The table names its candidates by inode alone (its devices are not
// stat's, see Flock). A candidate is the holder only when one of its own
// descriptors, <root>/<pid>/fd/<n>, is that very file (a link to a file of
// path's name, which stat(2) through the link finds with path's device
// and inode) and carries that very lock (a "lock:" line of
// <root>/<pid>/fdinfo/<n> naming the table's lock: the kernel lists there
// the locks of that open file only, since Linux 4.1). So a lock on another
// file system's file of the same inode is never taken for path's; a file
// replaced at path since it was locked is held by nobody (the holder's
// descriptor is the removed file); and a pid that exited since the table
// was read, or was reused by another process, holds nothing. Only the pid
// the table names is looked at: a flock belongs to the open file, and a
// process that inherited the descriptor holds it too, but the kernel
// names the process that took it, and once that one has closed it or
// died nobody is found here.
//
// An error means path could not be stat'ed, or a candidate's descriptors
// could not be read (another user's process, a non-dumpable one): 0 may
// then be wrong.
func (t *LockTable) Holder(path string) (int, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	var errs []error
	for _, l := range t.byIno[st.Ino] {
		ok, err := t.holdsFlock(l, filepath.Base(path), uint64(st.Dev), st.Ino)
		if ok {
			return l.PID, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("who holds the flock on %s: %w", path, errors.Join(errs...))
	}
	return 0, nil
}

// holdsFlock reports whether the process l.PID has a descriptor open on
// the file named base with device dev and inode ino that carries the lock
// l. Only descriptors of that name are stat'ed: a stat may block (a dead
// network mount), a readlink does not. An error means the descriptors
// could not be read although the process is there.
func (t *LockTable) holdsFlock(l Flock, base string, dev, ino uint64) (bool, error) {
	links, err := t.links(l.PID)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return false, nil // exited since the table was read: its locks went with it
		}
		return false, fmt.Errorf("pid %d, which the lock table names for inode %d: %w", l.PID, l.Ino, err)
	}
	dir := filepath.Join(t.h.root(), strconv.Itoa(l.PID))
	for _, fd := range links {
		if filepath.Base(strings.TrimSuffix(fd.target, " (deleted)")) == base && fdHolds(dir, fd.n, l, dev, ino) {
			return true, nil
		}
	}
	return false, nil
}

// fdLink is a descriptor and the target of its link in <pid>/fd.
type fdLink struct{ n, target string }

// links reads the link targets of pid's descriptors, once per table: the
// TUI's app-server holds the writer lock of every thread it has loaded,
// and each lock file would read them all again.
func (t *LockTable) links(pid int) ([]fdLink, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r, ok := t.fds[pid]; ok {
		return r.links, r.err
	}
	links, err := t.h.readLinks(pid)
	if t.fds == nil {
		t.fds = map[int]fdLinks{}
	}
	t.fds[pid] = fdLinks{links, err}
	return links, err
}

func (h *Host) readLinks(pid int) ([]fdLink, error) {
	d, err := os.Open(filepath.Join(h.root(), strconv.Itoa(pid), "fd"))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	// Each link read relative to the open folder, into one buffer.
	buf := make([]byte, unix.PathMax)
	out := make([]fdLink, 0, len(names))
	for _, n := range names {
		k, err := unix.Readlinkat(int(d.Fd()), n, buf)
		if err != nil {
			continue // closed meanwhile
		}
		out = append(out, fdLink{n, string(buf[:k])})
	}
	return out, nil
}

// fdHolds: the descriptor n of the process at dir is the file dev, ino
// (stat follows the link to the open file, as stat of its path would),
// and its fdinfo lists the lock l. A descriptor closed meanwhile holds
// nothing.
func fdHolds(dir, n string, l Flock, dev, ino uint64) bool {
	var st unix.Stat_t
	if unix.Stat(filepath.Join(dir, "fd", n), &st) != nil || uint64(st.Dev) != dev || st.Ino != ino {
		return false
	}
	info, err := os.ReadFile(filepath.Join(dir, "fdinfo", n))
	if err != nil {
		return false
	}
	for _, line := range bytes.Split(info, []byte{'\n'}) {
		rest, ok := bytes.CutPrefix(line, []byte("lock:"))
		if !ok {
			continue
		}
		if got, ok, _ := parseLockLine(strings.Fields(string(rest))); ok && got.Dev == l.Dev && got.Ino == l.Ino {
			return true
		}
	}
	return false
}

// parseLocks parses /proc/locks lines such as
//
//	1: FLOCK  ADVISORY  WRITE 12535 fe:00:10347424 0 EOF
//
// whose device is MAJOR:MINOR in hex (as the kernel prints it) followed
// by the inode in decimal, and returns the exclusive flocks.
func parseLocks(b []byte) ([]Flock, error) {
	var out []Flock
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		l, ok, err := parseLockLine(strings.Fields(sc.Text()))
		if err != nil {
			return nil, fmt.Errorf("locks line %d: %w", n, err)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// parseLockLine parses the fields of one line of the lock table (or of a
// "lock:" line of fdinfo, which prints the same): ok is false for all but
// an exclusive flock held by a pid.
func parseLockLine(f []string) (Flock, bool, error) {
	if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" || f[3] != "WRITE" {
		return Flock{}, false, nil
	}
	pid, err := strconv.Atoi(f[4])
	if err != nil {
		return Flock{}, false, fmt.Errorf("pid %q: %w", f[4], err)
	}
	l, err := parseLockedFile(f[5])
	if err != nil {
		return Flock{}, false, err
	}
	l.PID = pid
	return l, pid > 0, nil
}

func parseLockedFile(s string) (Flock, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Flock{}, fmt.Errorf("file %q: want MAJOR:MINOR:INODE", s)
	}
	major, err1 := strconv.ParseUint(parts[0], 16, 32)
	minor, err2 := strconv.ParseUint(parts[1], 16, 32)
	ino, err3 := strconv.ParseUint(parts[2], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Flock{}, fmt.Errorf("file %q: want MAJOR:MINOR:INODE", s)
	}
	return Flock{Dev: unix.Mkdev(uint32(major), uint32(minor)), Ino: ino}, nil
}
