//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

var errNoProc = errors.New("no /proc on this platform: process figures are measured on Linux only")

// readProcessStats needs /proc (Linux).
func readProcessStats(pid int) (processStats, error) { return processStats{}, errNoProc }

// dropCaches needs /proc (Linux).
func dropCaches() error { return errNoProc }

// accessWatch needs inotify (Linux).
type accessWatch struct{}

// watchAccess needs inotify (Linux).
func watchAccess(dirs []string) (*accessWatch, error) { return nil, errNoProc }

// Stop returns nothing off Linux.
func (w *accessWatch) Stop() (reads, opens map[string]int) { return nil, nil }

// Supported reports whether this platform has the /proc figures.
const Supported = false

func dieWithParent(cmd *exec.Cmd) {}

// LoadAverage is not read off Linux.
func LoadAverage() string { return "?" }
