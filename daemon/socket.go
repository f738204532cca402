package daemon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// listenSocket listens on a Unix socket at path in a private directory.
//
// A socket file outlives a killed daemon. So dial it first: if something
// answers, another sessiond serves it and we must not steal it; only if
// nothing answers is the old file removed.
func listenSocket(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
	}
	// MkdirAll keeps an existing directory's mode; the socket's directory
	// must not be open to others.
	if fi, err := os.Stat(dir); err == nil && fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("restrict socket directory %s to 0700: %w", dir, err)
		}
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, &AlreadyRunningError{What: "socket " + path, Detail: "another process answers on it"}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod socket %s: %w", path, err)
	}
	// Go removes the socket file on Close: a clean shutdown leaves nothing.
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return ln, nil
}
