package proc

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func (h *Host) readBootID() (string, error) {
	path := h.root() + "/sys/kernel/random/boot_id"
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	id := strings.TrimSpace(string(b))
	if id == "" {
		return "", fmt.Errorf("read boot id %s: empty", path)
	}
	return id, nil
}

// readState reads and parses <root>/<pid>/stat. A missing entry comes back
// as an error matching fs.ErrNotExist, which Probe reads as "exited".
func (h *Host) readState(pid int) (Stat, error) {
	st, _, err := h.readStat(h.root()+"/"+strconv.Itoa(pid), nil)
	return st, err
}

// readStat reads dir/stat into buf (reused) and parses it.
func (h *Host) readStat(dir string, buf []byte) (Stat, []byte, error) {
	path := dir + "/stat"
	buf, err := readInto(path, buf)
	if err != nil {
		return Stat{}, buf, err
	}
	st, err := ParseStat(buf)
	if err != nil {
		return Stat{}, buf, fmt.Errorf("%s: %w", path, err)
	}
	return st, buf, nil
}

// Identify returns the identity of the live process pid, to be recorded now
// and probed later. StartTicks is field 22 of /proc/<pid>/stat, the same
// value Claude Code records as procStart, so identities from either source
// compare equal.
func (h *Host) Identify(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("identify pid %d: invalid pid", pid)
	}
	boot, err := h.BootID()
	if err != nil {
		return Identity{}, fmt.Errorf("identify pid %d: %w", pid, err)
	}
	st, err := h.readState(pid)
	if err != nil {
		return Identity{}, fmt.Errorf("identify pid %d: %w", pid, err)
	}
	return Identity{BootID: boot, PID: pid, StartTicks: st.StartTicks}, nil
}

// Snapshot reads the whole process table once, so a reconcile tick works
// on one consistent-enough view instead of re-reading /proc per question.
// Processes that exit while being read are left out; only failing to list
// the proc root is an error. The environment of each process is scanned
// for markerVars only and the buffer is wiped afterwards: it holds secrets.
func (h *Host) Snapshot() (*Snapshot, error) {
	root := h.root()
	boot, err := h.BootID()
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", root, err)
	}
	d, err := os.Open(root)
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, fmt.Errorf("snapshot: list %s: %w", root, err)
	}
	s := &Snapshot{Taken: time.Now(), BootID: boot, Procs: make(map[int]*Process, len(names))}
	buf := make([]byte, 0, 4096)
	defer func() { clear(buf[:cap(buf)]) }()
	for _, name := range names {
		pid, ok := parsePID(name)
		if !ok {
			continue
		}
		var p *Process
		p, buf = readProcess(root+"/"+name, pid, boot, buf)
		if p != nil {
			s.Procs[pid] = p
		}
	}
	return s, nil
}

// readProcess reads one /proc/<pid> directory. It returns nil when the
// process vanished (or its stat is unreadable): a row must at least carry
// a true identity.
func readProcess(dir string, pid int, boot string, buf []byte) (*Process, []byte) {
	buf, err := readInto(dir+"/stat", buf)
	if err != nil {
		return nil, buf
	}
	st, err := ParseStat(buf)
	if err != nil || st.PID != pid {
		return nil, buf
	}
	if st.Kernel {
		// Nothing more to read: a kernel thread (root's) has no command
		// line, environment or cwd of its own. They are most of a
		// machine's rows (60 of 68 on the CI VM), and reading those four
		// files of each was ~60 % of every pass's process table.
		return &Process{Identity: Identity{BootID: boot, PID: pid, StartTicks: st.StartTicks},
			PPID: st.PPID, PGID: st.PGID, SID: st.SID, State: st.State, UID: 0}, buf
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, buf
	}
	uid, ok := fileUID(fi)
	if !ok {
		uid = -1
	}
	p := &Process{
		Identity: Identity{BootID: boot, PID: pid, StartTicks: st.StartTicks},
		PPID:     st.PPID,
		PGID:     st.PGID,
		SID:      st.SID,
		State:    st.State,
		UID:      uid,
	}
	buf, err = readInto(dir+"/cmdline", buf)
	if err != nil {
		if vanished(err) {
			return nil, buf
		}
	} else {
		p.Argv = splitNUL(buf)
	}
	// Zombies and other users' processes have no readable cwd: leave it
	// empty rather than drop the row.
	if cwd, err := os.Readlink(dir + "/cwd"); err == nil {
		p.Cwd = cwd
	}
	if buf, err = readInto(dir+"/environ", buf); err == nil {
		p.Env = envMarkers(buf)
	}
	return p, buf
}

// parsePID accepts a /proc entry name that is a positive decimal pid.
func parsePID(name string) (int, bool) {
	if len(name) == 0 || name[0] < '1' || name[0] > '9' {
		return 0, false
	}
	n, err := strconv.Atoi(name)
	if err != nil || n <= 0 || n > maxPID {
		return 0, false
	}
	return n, true
}

// UID is the user id pid runs as: the owner of its /proc directory.
func (h *Host) UID(pid int) (int, error) {
	fi, err := os.Stat(filepath.Join(h.root(), strconv.Itoa(pid)))
	if err != nil {
		return 0, err
	}
	uid, ok := fileUID(fi)
	if !ok {
		return 0, fmt.Errorf("stat of pid %d: no owner", pid)
	}
	return uid, nil
}

// fileUID is the owner of a /proc/<pid> directory: the process's user.
func fileUID(fi os.FileInfo) (int, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}

// MarkerEnv reads pid's environment now and returns its markerVars that
// are set (never the rest: it holds secrets). An error means it could not
// be read: the process exited, or it is another user's.
func (h *Host) MarkerEnv(pid int) (map[string]string, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("environment of pid %d: invalid pid", pid)
	}
	buf, err := readInto(h.root()+"/"+strconv.Itoa(pid)+"/environ", nil)
	defer clear(buf)
	if err != nil {
		return nil, err
	}
	return envMarkers(buf), nil
}
