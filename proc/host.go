package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// DefaultRoot is the proc root used when Host.Root is empty.
const DefaultRoot = "/proc"

// Host reads process state from the running kernel. It is a struct rather
// than package functions so tests can point it at a fixture tree and a fake
// signal, the way node_exporter takes a configurable /proc root.
//
// A Host is safe for concurrent use once its fields are set; do not copy it
// after first use (it caches the boot id).
type Host struct {
	// Root is the proc file system root ("/proc" when empty). Only Linux
	// reads it; macOS has no /proc and asks the kernel through sysctl.
	Root string
	// Signal0 sends signal 0 to pid, which checks existence without side
	// effects. Nil means unix.Kill(pid, 0); tests on fixture trees replace it
	// because the fixture's pids are not real processes.
	Signal0 func(pid int) error
	// MachineIDFile is the machine-id file (/etc/machine-id when
	// empty); tests point it at a fixture.
	MachineIDFile string

	bootID atomic.Pointer[string]
	m      machine
}

// NewHost returns a Host that reads the real kernel.
func NewHost() *Host { return &Host{Root: DefaultRoot} }

func (h *Host) root() string {
	if h.Root == "" {
		return DefaultRoot
	}
	return h.Root
}

func (h *Host) signal0(pid int) error {
	if h.Signal0 != nil {
		return h.Signal0(pid)
	}
	return unix.Kill(pid, 0)
}

// BootID returns the kernel's boot id, which changes at every boot; a
// recorded Identity from another boot can never be alive. The value is
// cached after the first successful read since it cannot change while this
// process runs.
func (h *Host) BootID() (string, error) {
	if p := h.bootID.Load(); p != nil {
		return *p, nil
	}
	id, err := h.readBootID()
	if err != nil {
		return "", err
	}
	h.bootID.Store(&id)
	return id, nil
}

// Probe answers whether the process named by id still lives. It is the only
// liveness truth sessiond uses, so it is strict about identity: the boot id,
// the pid and the start time must all match, a zombie counts as dead, and
// Unknown is returned only when a check itself failed (never for "not
// found").
func (h *Host) Probe(id Identity) Result {
	if id.PID <= 0 {
		// kill(0 or -n, 0) would address a process group: never send it.
		return Result{Unknown, fmt.Sprintf("invalid pid %d", id.PID)}
	}
	boot, err := h.BootID()
	if err != nil {
		return Result{Unknown, fmt.Sprintf("cannot read boot id: %v", err)}
	}
	if id.BootID != boot {
		return Result{Dead, fmt.Sprintf("rebooted since pid %d started (boot %.8s, now %.8s)", id.PID, id.BootID, boot)}
	}
	switch err := h.signal0(id.PID); {
	case err == nil, errors.Is(err, unix.EPERM):
		// EPERM: the pid exists but belongs to another uid. It is alive.
	case errors.Is(err, unix.ESRCH):
		return Result{Dead, fmt.Sprintf("pid %d does not exist", id.PID)}
	default:
		return Result{Unknown, fmt.Sprintf("signal 0 to pid %d: %v", id.PID, err)}
	}
	st, err := h.readState(id.PID)
	switch {
	case vanished(err):
		// Not hidepid: a per-user daemon probes its own user's processes,
		// which hidepid never hides.
		return Result{Dead, fmt.Sprintf("pid %d exited between checks", id.PID)}
	case err != nil:
		return Result{Unknown, fmt.Sprintf("cannot read state of pid %d: %v", id.PID, err)}
	}
	if st.StartTicks != id.StartTicks {
		return Result{Dead, fmt.Sprintf("pid %d reused: start ticks %d, want %d", id.PID, st.StartTicks, id.StartTicks)}
	}
	if st.Exited() {
		return Result{Dead, fmt.Sprintf("pid %d is a zombie (exited, not yet reaped)", id.PID)}
	}
	return Result{Alive, fmt.Sprintf("pid %d is running", id.PID)}
}

// vanished reports whether err means the process is gone: its /proc entry
// is missing (ENOENT), or it exited while its file was open (ESRCH).
func vanished(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH)
}

// Stat is the part of /proc/<pid>/stat sessiond needs.
type Stat struct {
	// PID is field 1; Snapshot checks it against the directory name.
	PID int
	// Comm is the command name the kernel keeps (at most 15 bytes for user
	// processes); it may contain spaces and parentheses.
	Comm string
	// State is the one-letter state (R, S, D, Z, X, ...).
	State byte
	// PPID is field 4, the parent: it builds the process tree that finds
	// an agent's orphaned tool processes.
	PPID int
	// PGID is field 5, the process group: an agent's MCP servers run in
	// its group and name no owner pid, so the group attributes them.
	PGID int
	// SID is field 6, the session id: the pid of the process that called
	// setsid(). Codex runs each tool in a session of its own, so the sid
	// ties what the tool forked to the tool, where an inherited
	// environment variable ties nothing.
	SID int
	// TTY is field 7, the controlling terminal's device number (0: none),
	// and TPGID field 8, that terminal's foreground process group (-1:
	// none). A prompt is typed into a pane only while the session's owner
	// is that pane terminal's foreground: otherwise the keys would go to
	// whatever is (a shell, after the agent was suspended or exited).
	TTY   uint64
	TPGID int
	// Kernel is PF_KTHREAD in field 9, the flags: a kernel thread, which
	// has no command line, environment or working directory of its own.
	Kernel bool
	// StartTicks is field 22, the start time in clock ticks since boot.
	StartTicks uint64
}

// pfKthread is the kernel's PF_KTHREAD process flag (include/linux/sched.h).
const pfKthread = 0x00200000

// Exited reports whether the process had exited when its stat was read: a
// zombie (Z) or dead (X).
func (s *Stat) Exited() bool { return exitedState(s.State) }

// Stat reads pid's stat now (not from a snapshot): what an action checks
// right before it acts.
func (h *Host) Stat(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("stat pid %d: invalid pid", pid)
	}
	return h.readState(pid)
}

// ParseStat parses one /proc/<pid>/stat line. The command name sits between
// the first '(' and the LAST ')', because it may itself contain spaces and
// parentheses ("1234 (a) b) (c) S 1 ..."); every field after it is numbered
// from there, state being field 3, ppid field 4, pgrp 5, session 6, flags
// 9 and starttime field 22. It is
// exported so a fuzz target can hammer it.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	closing := bytes.LastIndexByte(b, ')')
	if open < 0 || closing < open {
		return Stat{}, fmt.Errorf("parse stat %q: no (comm)", clip(b))
	}
	pid, ok := parseUint(bytes.TrimSpace(b[:open]))
	if !ok || pid > maxPID {
		return Stat{}, fmt.Errorf("parse stat %q: bad pid", clip(b))
	}
	st := Stat{PID: int(pid), Comm: string(b[open+1 : closing])}

	// Walk the space-separated fields after ')' without allocating: rest
	// starts at field 3.
	rest := b[closing+1:]
	field := 2
	for len(rest) > 0 && field < 22 {
		i := 0
		for i < len(rest) && rest[i] == ' ' {
			i++
		}
		rest = rest[i:]
		j := 0
		for j < len(rest) && rest[j] != ' ' && rest[j] != '\n' {
			j++
		}
		if j == 0 {
			break
		}
		tok := rest[:j]
		rest = rest[j:]
		field++
		switch field {
		case 3:
			if len(tok) != 1 {
				return Stat{}, fmt.Errorf("parse stat %q: bad state %q", clip(b), tok)
			}
			st.State = tok[0]
		case 4:
			ppid, ok := parseUint(tok)
			if !ok || ppid > maxPID {
				return Stat{}, fmt.Errorf("parse stat %q: bad ppid %q", clip(b), tok)
			}
			st.PPID = int(ppid)
		case 5:
			pgid, ok := parseUint(tok)
			if !ok || pgid > maxPID {
				return Stat{}, fmt.Errorf("parse stat %q: bad pgrp %q", clip(b), tok)
			}
			st.PGID = int(pgid)
		case 6:
			sid, ok := parseUint(tok)
			if !ok || sid > maxPID {
				return Stat{}, fmt.Errorf("parse stat %q: bad session %q", clip(b), tok)
			}
			st.SID = int(sid)
		case 7:
			tty, ok := parseUint(tok)
			if !ok || tty > 1<<32-1 {
				return Stat{}, fmt.Errorf("parse stat %q: bad tty_nr %q", clip(b), tok)
			}
			st.TTY = tty
		case 8:
			tpgid, ok := parseUint(bytes.TrimPrefix(tok, []byte("-")))
			if !ok || tpgid > maxPID {
				return Stat{}, fmt.Errorf("parse stat %q: bad tpgid %q", clip(b), tok)
			}
			st.TPGID = int(tpgid)
			if tok[0] == '-' {
				st.TPGID = -st.TPGID
			}
		case 9:
			flags, ok := parseUint(tok)
			if !ok {
				return Stat{}, fmt.Errorf("parse stat %q: bad flags %q", clip(b), tok)
			}
			st.Kernel = flags&pfKthread != 0
		case 22:
			v, ok := parseUint(tok)
			if !ok {
				return Stat{}, fmt.Errorf("parse stat %q: bad starttime %q", clip(b), tok)
			}
			st.StartTicks = v
		}
	}
	if field < 22 {
		return Stat{}, fmt.Errorf("parse stat %q: %d fields, want at least 22", clip(b), field)
	}
	return st, nil
}

// maxPID bounds pids so they fit an int on every platform (Linux caps them
// at 2^22).
const maxPID = 1<<31 - 1

// parseUint parses a decimal without allocating (strconv needs a string).
func parseUint(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// clip shortens input quoted in errors so one bad line cannot flood a log.
func clip(b []byte) []byte {
	const n = 80
	if len(b) > n {
		return b[:n]
	}
	return b
}

// splitNUL splits a NUL-separated list (cmdline) into strings, dropping the
// trailing terminator. It returns nil for an empty buffer (kernel threads,
// zombies).
func splitNUL(b []byte) []string {
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil
	}
	out := make([]string, 0, bytes.Count(b, []byte{0})+1)
	for {
		i := bytes.IndexByte(b, 0)
		if i < 0 {
			return append(out, string(b))
		}
		out = append(out, string(b[:i]))
		b = b[i+1:]
	}
}

// envMarkers picks the markerVars out of a NUL-separated environment block.
// Only the marker values are copied; the rest of the block (which holds
// tokens and API keys) is never turned into strings. The result is non-nil
// (possibly empty): the environment was readable.
func envMarkers(b []byte) map[string]string {
	m := map[string]string{}
	for len(b) > 0 {
		var kv []byte
		if i := bytes.IndexByte(b, 0); i >= 0 {
			kv, b = b[:i], b[i+1:]
		} else {
			kv, b = b, nil
		}
		eq := bytes.IndexByte(kv, '=')
		if eq <= 0 {
			continue
		}
		for _, k := range markerVars {
			if len(k) == eq && string(kv[:eq]) == k {
				m[k] = string(kv[eq+1:])
				break
			}
		}
	}
	return m
}

// readInto reads the whole file at path into buf (grown as needed) and
// returns the filled slice. /proc files report size 0, so os.ReadFile would
// allocate a fresh buffer every time; reusing one keeps a snapshot cheap.
func readInto(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf[:0], err // a *PathError: it names path
	}
	defer f.Close()
	buf = buf[:0]
	if cap(buf) == 0 {
		buf = make([]byte, 0, 512)
	}
	for {
		if len(buf) == cap(buf) {
			// Grow by hand and wipe the old array: it may hold an
			// environment, and the GC would keep it around uncleared.
			nb := make([]byte, len(buf), 2*cap(buf))
			copy(nb, buf)
			clear(buf)
			buf = nb
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err // a *PathError: it names path
		}
	}
}

// Ancestors returns the identities of pid and of its ancestors, nearest
// first, up to max processes or pid 1 (init is never included). A hook's
// caller is checked against a session's owner with it: the hook counts
// only when the owner is among them. A process that exits during the
// walk ends it; what was read before stands.
func (h *Host) Ancestors(pid, max int) ([]Identity, error) {
	boot, err := h.BootID()
	if err != nil {
		return nil, fmt.Errorf("ancestors of pid %d: %w", pid, err)
	}
	var out []Identity
	for pid > 1 && len(out) < max {
		st, err := h.readState(pid)
		if err != nil {
			if len(out) == 0 {
				return nil, fmt.Errorf("ancestors of pid %d: %w", pid, err)
			}
			break
		}
		out = append(out, Identity{BootID: boot, PID: pid, StartTicks: st.StartTicks})
		pid = st.PPID
	}
	return out, nil
}
