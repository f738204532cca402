package api

import (
	"os"
	"path/filepath"
)

// DefaultStateDir is where sessiond keeps its store when not told otherwise:
// $SESSIOND_STATE_DIR, else $XDG_STATE_HOME/sessiond, else
// ~/.local/state/sessiond.
func DefaultStateDir() string {
	if d := os.Getenv("SESSIOND_STATE_DIR"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "sessiond")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = "."
	}
	return filepath.Join(home, ".local", "state", "sessiond")
}

// DefaultSocket is the socket path when not told otherwise:
// $SESSIOND_SOCKET, else $XDG_RUNTIME_DIR/sessiond/sessiond.sock, else
// <stateDir>/sessiond.sock. The daemon and its clients compute it alike.
func DefaultSocket(stateDir string) string {
	if s := os.Getenv("SESSIOND_SOCKET"); s != "" {
		return s
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "sessiond", "sessiond.sock")
	}
	return filepath.Join(stateDir, "sessiond.sock")
}
