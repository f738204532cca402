//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

var errNoProc = errors.New("no /proc on this platform: process figures are measured on Linux only")

// ReadProcStats needs /proc (Linux).
func ReadProcStats(pid int) (ProcStats, error) { return ProcStats{}, errNoProc }

// DropCaches needs /proc (Linux).
func DropCaches() error { return errNoProc }

// AccessWatch needs inotify (Linux).
type AccessWatch struct{}

// WatchAccess needs inotify (Linux).
func WatchAccess(dirs []string) (*AccessWatch, error) { return nil, errNoProc }

// Stop returns nothing off Linux.
func (w *AccessWatch) Stop() (reads, opens map[string]int) { return nil, nil }

// Supported reports whether this platform has the /proc figures.
const Supported = false

func dieWithParent(cmd *exec.Cmd) {}

// LoadAverage is not read off Linux.
func LoadAverage() string { return "?" }
