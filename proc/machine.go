package proc

import (
	"os"
	"strings"
	"sync"
	"time"
)

// defaultMachineIDFile is where systemd (and dbus-less distributions)
// keep the machine id.
const defaultMachineIDFile = "/etc/machine-id"

// machine holds the host facts read once per Host: they cannot change
// while this process runs (a machine id is set at install time, a PID
// namespace for the life of a process, the boot time for the boot).
type machine struct {
	once      sync.Once
	machineID string
	pidNS     string

	bootOnce sync.Once
	bootTime time.Time
	bootErr  error
}

// MachineID is the trimmed contents of the machine-id file ("" when it
// cannot be read). It is read exactly the way Claude Code reads it for its
// registry's pidDomain (no dbus fallback, no other source), so the two
// compare equal on the machine that wrote the entry.
func (h *Host) MachineID() string {
	h.readMachine()
	return h.m.machineID
}

// PIDNamespace is the link text of this process's PID namespace
// ("pid:[4026531836]"), "" when it cannot be read (macOS, a fixture tree).
// Claude Code writes the same text into its registry's pidDomain.
func (h *Host) PIDNamespace() string {
	h.readMachine()
	return h.m.pidNS
}

func (h *Host) readMachine() {
	h.m.once.Do(func() {
		path := h.MachineIDFile
		if path == "" {
			path = defaultMachineIDFile
		}
		if b, err := os.ReadFile(path); err == nil {
			// JavaScript's trim(): Claude strips whitespace at both ends.
			h.m.machineID = strings.TrimSpace(string(b))
		}
		h.m.pidNS = h.readPIDNamespace()
	})
}

// BootTime is when this boot started, in wall-clock time, read once. A
// record of a process that says it started earlier than this was written
// by a previous boot, whatever its pid names now.
func (h *Host) BootTime() (time.Time, error) {
	h.m.bootOnce.Do(func() { h.m.bootTime, h.m.bootErr = h.readBootTime() })
	return h.m.bootTime, h.m.bootErr
}
