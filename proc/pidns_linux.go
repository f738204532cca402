package proc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// InitialPIDNamespace is the link text of the kernel's initial PID
// namespace: its inode is the fixed PROC_PID_INIT_INO (0xEFFFFFFC). A
// process in it has a pid in every PID namespace's ancestor, so its /proc
// lists every process of the machine.
const InitialPIDNamespace = "pid:[4026531836]"

func (h *Host) readPIDNamespace() string {
	ns, err := os.Readlink(h.root() + "/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
}

// InNamespace is the answer of FindInNamespace.
type InNamespace struct {
	// Visible is true when at least one process of the namespace could be
	// seen from here.
	Visible bool
	// Found is the process, in this host's pid numbering, whose pid in
	// the namespace is the one asked for; zero when there is none.
	Found Identity
	// Whole is true when every process that could be the one asked for
	// was looked at, so that a zero Found proves it is gone: the proc root
	// hides no process (no hidepid=), lists every process of the namespace
	// (one nested in this host's, as every namespace is when this host runs
	// in the initial PID namespace, and as one with a process in sight is),
	// and no process whose namespace could not be read (another user's, a
	// non-dumpable one) has that pid as its innermost.
	Whole bool
	// Why says why the answer is not Whole ("" when it is).
	Why string
}

// FindInNamespace finds the process that is nspid inside the PID namespace
// ns (a link text such as "pid:[4026532178]"): a process in a container, as
// its own tools (Claude Code's registry) name it. It walks the process
// table, keeps the processes whose /proc/<pid>/ns/pid is ns, and matches the
// last NSpid field of their status. A process whose namespace link cannot
// be read is ruled out by its status (world-readable) when its innermost
// pid is another, or it sits in this host's own namespace; otherwise it
// might be the one, and the answer is not Whole. It costs a readlink per
// process, so callers ask only about namespaces other than their own.
func (h *Host) FindInNamespace(ns string, nspid int) (InNamespace, error) {
	var out InNamespace
	if ns == "" || nspid <= 0 {
		return out, fmt.Errorf("find pid %d in namespace %q: invalid", nspid, ns)
	}
	boot, err := h.BootID()
	if err != nil {
		return out, fmt.Errorf("find pid %d in %s: %w", nspid, ns, err)
	}
	root := h.root()
	d, err := os.Open(root)
	if err != nil {
		return out, fmt.Errorf("find pid %d in %s: %w", nspid, ns, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return out, fmt.Errorf("find pid %d in %s: list %s: %w", nspid, ns, root, err)
	}
	own := h.PIDNamespace()
	var buf []byte
	unsure := ""
	for _, name := range names {
		pid, ok := parsePID(name)
		if !ok {
			continue
		}
		dir := root + "/" + name
		link, err := os.Readlink(dir + "/ns/pid")
		if err != nil {
			if unsure == "" {
				unsure, buf = mayBeIn(dir, pid, ns == own, nspid, buf)
			}
			continue
		}
		if link != ns {
			continue
		}
		out.Visible = true
		buf, err = readInto(dir+"/status", buf)
		if err != nil {
			continue
		}
		if inner, _, ok := nsPIDs(buf); !ok || inner != nspid {
			continue
		}
		st, err := h.readState(pid)
		if err != nil {
			continue
		}
		out.Found = Identity{BootID: boot, PID: pid, StartTicks: st.StartTicks}
		return out, nil
	}
	out.Whole, out.Why = h.whole(out.Visible, own, unsure)
	return out, nil
}

// mayBeIn says why the process in dir, whose namespace link could not be
// read, might be nspid of the namespace asked about ("" when its status
// rules it out, or it is gone). ownNS: the namespace asked about is this
// host's, so a process of this host's own level may be in it.
func mayBeIn(dir string, pid int, ownNS bool, nspid int, buf []byte) (string, []byte) {
	buf, err := readInto(dir+"/status", buf)
	switch {
	case vanished(err):
		return "", buf
	case err != nil:
		return fmt.Sprintf("pid %d: neither its PID namespace nor its status can be read (%v)", pid, err), buf
	}
	inner, levels, ok := nsPIDs(buf)
	switch {
	case !ok:
		return fmt.Sprintf("pid %d: its PID namespace cannot be read and its status has no NSpid line", pid), buf
	case inner != nspid, levels == 1 && !ownNS:
		return "", buf
	}
	return fmt.Sprintf("pid %d, whose PID namespace cannot be read (another user's, or not dumpable), is pid %d of its own", pid, nspid), buf
}

// whole says whether a walk that found nothing proves nothing is there,
// and if not, why.
func (h *Host) whole(visible bool, own, unsure string) (bool, string) {
	if !visible && own != InitialPIDNamespace {
		if own == "" {
			return false, "this daemon's own PID namespace cannot be read"
		}
		return false, fmt.Sprintf("this daemon runs in PID namespace %s, not the initial one, and sees only the processes of its own and nested namespaces", own)
	}
	if unsure != "" {
		return false, unsure
	}
	hide, err := h.hidePID()
	switch {
	case err != nil:
		return false, fmt.Sprintf("cannot tell whether %s hides processes: %v", h.root(), err)
	case hide != "":
		return false, fmt.Sprintf("%s is mounted with %s, which hides other users' processes", h.root(), hide)
	}
	return true, ""
}

// hidePID returns the hidepid= option of the proc mount at the root ("" when
// it hides nothing), read from <root>/self/mountinfo: the last proc mount
// on that path is the one in sight.
func (h *Host) hidePID() (string, error) {
	root := filepath.Clean(h.root())
	path := root + "/self/mountinfo"
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	found, hide := false, ""
	for _, line := range strings.Split(string(b), "\n") {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, g := strings.Fields(pre), strings.Fields(post)
		if len(f) < 5 || len(g) < 3 || g[0] != "proc" || unescapeMount(f[4]) != root {
			continue
		}
		found, hide = true, ""
		for _, opt := range strings.Split(g[2], ",") {
			if v, ok := strings.CutPrefix(opt, "hidepid="); ok && v != "0" && v != "off" {
				hide = opt
			}
		}
	}
	if !found {
		return "", fmt.Errorf("no proc mount at %s in %s", root, path)
	}
	return hide, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// lastNSpid reads the innermost pid of a status file's NSpid line (the pid
// as the process's own namespace numbers it).
func lastNSpid(status []byte) (int, bool) {
	n, _, ok := nsPIDs(status)
	return n, ok
}

// nsPIDs reads a status file's NSpid line: the innermost pid, and how many
// namespaces, from the proc root's down, number the process (1: it sits in
// the proc root's own namespace).
func nsPIDs(status []byte) (inner, levels int, ok bool) {
	for len(status) > 0 {
		line := status
		if i := bytes.IndexByte(status, '\n'); i >= 0 {
			line, status = status[:i], status[i+1:]
		} else {
			status = nil
		}
		rest, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) == 0 {
			return 0, 0, false
		}
		n, err := strconv.Atoi(string(f[len(f)-1]))
		return n, len(f), err == nil && n > 0
	}
	return 0, 0, false
}
