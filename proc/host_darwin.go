package proc

import (
	"fmt"
	"io/fs"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// macOS process states (sys/proc.h p_stat).
const (
	sIdl   = 1
	sRun   = 2
	sSleep = 3
	sStop  = 4
	sZomb  = 5
)

func (h *Host) readBootID() (string, error) {
	id, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return "", fmt.Errorf("read boot id: sysctl kern.bootsessionuuid: %w", err)
	}
	id = strings.TrimSpace(id)
	if id == "" {
		return "", fmt.Errorf("read boot id: sysctl kern.bootsessionuuid: empty")
	}
	return id, nil
}

// kinfo asks the kernel for one process. A pid without a process comes back
// as an error matching fs.ErrNotExist, which Probe reads as "exited".
func kinfo(pid int) (*unix.KinfoProc, error) {
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.pid", pid)
	if err != nil {
		return nil, fmt.Errorf("sysctl kern.proc.pid %d: %w", pid, err)
	}
	if len(ks) == 0 {
		return nil, fmt.Errorf("sysctl kern.proc.pid %d: %w", pid, fs.ErrNotExist)
	}
	return &ks[0], nil
}

// startOf is the process start time in microseconds since the epoch. The
// kernel stores it once at fork, so unlike a value derived from uptime it
// does not drift.
func startOf(k *unix.KinfoProc) uint64 {
	tv := k.Proc.P_starttime
	return uint64(tv.Sec)*1_000_000 + uint64(tv.Usec)
}

// stateOf maps p_stat to the Linux letters the rest of sessiond knows.
func stateOf(k *unix.KinfoProc) byte {
	switch k.Proc.P_stat {
	case sIdl:
		return 'I'
	case sRun:
		return 'R'
	case sSleep:
		return 'S'
	case sStop:
		return 'T'
	case sZomb:
		return 'Z'
	}
	return '?'
}

func statOf(k *unix.KinfoProc) Stat {
	comm := k.Proc.P_comm[:]
	if i := strings.IndexByte(string(comm), 0); i >= 0 {
		comm = comm[:i]
	}
	return Stat{
		PID:        int(k.Proc.P_pid),
		Comm:       string(comm),
		State:      stateOf(k),
		PPID:       int(k.Eproc.Ppid),
		PGID:       int(k.Eproc.Pgid),
		SID:        sidOf(int(k.Proc.P_pid)),
		TTY:        uint64(uint32(k.Eproc.Tdev)),
		TPGID:      int(k.Eproc.Tpgid),
		StartTicks: startOf(k),
	}
}

// sidOf is pid's session id, 0 when it cannot be read: kinfo_proc holds
// only a kernel pointer to the session, so it takes getsid(2).
func sidOf(pid int) int {
	sid, err := unix.Getsid(pid)
	if err != nil {
		return 0
	}
	return sid
}

func (h *Host) readState(pid int) (Stat, error) {
	k, err := kinfo(pid)
	if err != nil {
		return Stat{}, err
	}
	return statOf(k), nil
}

// Identify returns the identity of the live process pid, to be recorded now
// and probed later. On macOS StartTicks is p_starttime in microseconds
// since the epoch, read from sysctl kern.proc.pid.
func (h *Host) Identify(pid int) (Identity, error) {
	if pid <= 0 {
		return Identity{}, fmt.Errorf("identify pid %d: invalid pid", pid)
	}
	boot, err := h.BootID()
	if err != nil {
		return Identity{}, fmt.Errorf("identify pid %d: %w", pid, err)
	}
	k, err := kinfo(pid)
	if err != nil {
		return Identity{}, fmt.Errorf("identify pid %d: %w", pid, err)
	}
	return Identity{BootID: boot, PID: pid, StartTicks: startOf(k)}, nil
}

// Snapshot reads the whole process table once, so a reconcile tick works
// on one view. Identity, parent, state and uid come from one sysctl
// (kern.proc.all); argv and the markerVars from kern.procargs2 per process
// (unreadable for other users' processes: Argv and Env stay nil). The
// procargs buffer is wiped after use: it holds the environment.
func (h *Host) Snapshot() (*Snapshot, error) {
	boot, err := h.BootID()
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.all")
	if err != nil {
		return nil, fmt.Errorf("snapshot: sysctl kern.proc.all: %w", err)
	}
	s := &Snapshot{Taken: time.Now(), BootID: boot, Procs: make(map[int]*Process, len(ks))}
	for i := range ks {
		k := &ks[i]
		pid := int(k.Proc.P_pid)
		if pid <= 0 {
			continue // kernel_task: not a process sessiond can own
		}
		p := &Process{
			Identity: Identity{BootID: boot, PID: pid, StartTicks: startOf(k)},
			PPID:     int(k.Eproc.Ppid),
			PGID:     int(k.Eproc.Pgid),
			SID:      sidOf(pid),
			State:    stateOf(k),
			UID:      int(k.Eproc.Ucred.Uid),
			Cwd:      cwdOf(pid),
		}
		if args, err := unix.SysctlRaw("kern.procargs2", pid); err == nil {
			p.Argv, p.Env, _ = parseProcArgs2(args)
			clear(args)
		}
		s.Procs[pid] = p
	}
	return s, nil
}

// UID is the real user id pid runs as.
func (h *Host) UID(pid int) (int, error) {
	k, err := kinfo(pid)
	if err != nil {
		return 0, err
	}
	return int(k.Eproc.Ucred.Uid), nil
}

// MarkerEnv reads pid's environment now and returns its markerVars that
// are set (never the rest: it holds secrets). An error means it could not
// be read: the process exited, or it is another user's.
func (h *Host) MarkerEnv(pid int) (map[string]string, error) {
	args, err := unix.SysctlRaw("kern.procargs2", pid)
	if err != nil {
		return nil, fmt.Errorf("environment of pid %d: %w", pid, err)
	}
	defer clear(args)
	_, env, ok := parseProcArgs2(args)
	if !ok {
		return nil, fmt.Errorf("environment of pid %d: kern.procargs2 does not parse", pid)
	}
	return env, nil
}
