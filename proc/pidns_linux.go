package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

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
	// seen from here: only then does "not found" mean the pid is gone.
	Visible bool
	// Found is the process, in this host's pid numbering, whose pid in
	// the namespace is the one asked for; zero when there is none.
	Found Identity
}

// FindInNamespace finds the process that is nspid inside the PID namespace
// ns (a link text such as "pid:[4026532178]"): a process in a container, as
// its own tools (Claude Code's registry) name it. It walks the process
// table, keeps the processes whose /proc/<pid>/ns/pid is ns, and matches the
// last NSpid field of their status. It costs a readlink per process, so
// callers ask only about namespaces other than their own.
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
	var buf []byte
	for _, name := range names {
		pid, ok := parsePID(name)
		if !ok {
			continue
		}
		dir := root + "/" + name
		if link, err := os.Readlink(dir + "/ns/pid"); err != nil || link != ns {
			continue
		}
		out.Visible = true
		buf, err = readInto(dir+"/status", buf)
		if err != nil {
			continue
		}
		if inner, ok := lastNSpid(buf); !ok || inner != nspid {
			continue
		}
		st, err := h.readState(pid)
		if err != nil {
			continue
		}
		out.Found = Identity{BootID: boot, PID: pid, StartTicks: st.StartTicks}
		return out, nil
	}
	return out, nil
}

// lastNSpid reads the innermost pid of a status file's NSpid line (the pid
// as the process's own namespace numbers it).
func lastNSpid(status []byte) (int, bool) {
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
			return 0, false
		}
		n, err := strconv.Atoi(string(f[len(f)-1]))
		return n, err == nil && n > 0
	}
	return 0, false
}
