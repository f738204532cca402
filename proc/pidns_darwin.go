package proc

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// macOS has no PID namespaces: Claude Code writes the constant "linux" as
// its pidDomain there, and there is no namespace link to read.
func (h *Host) readPIDNamespace() string { return "" }

// InNamespace is the answer of FindInNamespace.
type InNamespace struct {
	Visible bool
	Found   Identity
	Whole   bool
	Why     string
}

// FindInNamespace: macOS has no PID namespaces, so none is ever visible.
func (h *Host) FindInNamespace(ns string, nspid int) (InNamespace, error) {
	return InNamespace{Why: "macOS has no PID namespaces"}, nil
}

// readBootTime asks the kernel for kern.boottime.
func (h *Host) readBootTime() (time.Time, error) {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return time.Time{}, fmt.Errorf("sysctl kern.boottime: %w", err)
	}
	return time.Unix(tv.Sec, int64(tv.Usec)*1000), nil
}
