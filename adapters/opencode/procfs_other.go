//go:build !linux

package opencode

import "errors"

// fdSupported: without /proc there is no cheap, dependency-free way to list
// another process's open files; "holds the database open" is then not
// checked and the evidence says so.
const fdSupported = false

var errNoProcFS = errors.New("open files are not readable on this platform")

func scanFDs(procRoot string, pid int) ([]string, map[uint64]bool, error) {
	return nil, nil, errNoProcFS
}

// listenersKnown: without /proc there is no dependency-free table of
// listening sockets and their owners; a server is found from its argv
// alone, and checked through its process (verifyServer).
const listenersKnown = false

func readListeners(procRoot string) ([]tcpListener, error) { return nil, errNoProcFS }
