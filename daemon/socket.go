package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// listenSocket listens on a Unix socket at path, mode 0600.
//
// The socket's directory is created 0700 if it is missing. An existing
// directory is never changed: --socket may point into $HOME or /tmp, whose
// modes are not sessiond's to decide. It is refused, though, if someone
// else could replace the socket in it (see checkSocketDir).
//
// A socket file outlives a killed daemon. So dial it first: if something
// answers, another sessiond serves it and we must not steal it; only if
// nothing answers is the old file removed, and only if it is a socket of
// this user: a regular file or another user's socket at the path is a
// mistake to report, not something to delete.
func listenSocket(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("create socket directory %s: %w", dir, err)
		}
	}
	if err := checkSocketDir(dir); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
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

// checkSocketDir refuses a socket directory in which another user could
// unlink sessiond's socket and put their own in its place, to be handed
// clients' requests: one owned by another user (root excepted), or one
// its group or others may write to without the sticky bit (a sticky
// directory such as /tmp lets only a file's owner remove it).
func checkSocketDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("socket directory %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := int(st.Uid); uid != os.Getuid() && uid != 0 {
			return fmt.Errorf("socket directory %s belongs to uid %d, not to this user (uid %d): its owner could replace the socket; choose a directory of your own with --socket", dir, uid, os.Getuid())
		}
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("socket directory %s (mode %v) is writable by its group or others without the sticky bit: they could replace the socket; choose a private directory with --socket, or remove the write permission (chmod go-w %s)", dir, fi.Mode().Perm(), dir)
	}
	return nil
}

// removeStaleSocket clears path for a new socket: nothing there is fine; a
// socket of this user that nothing answers on is removed; anything else is
// refused, and left as it is.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("socket path %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("socket path %s is not a socket (it is a %s); sessiond removes only a stale socket of its own there: move it away or choose another --socket", path, fileKind(fi.Mode()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return fmt.Errorf("socket %s belongs to uid %d, not to this user (uid %d); sessiond will not remove it: choose another --socket", path, st.Uid, os.Getuid())
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return &AlreadyRunningError{What: "socket " + path, Detail: "another process answers on it"}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// fileKind names a non-socket file type for an error message.
func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "regular file"
	case fs.ModeDir:
		return "directory"
	case fs.ModeSymlink:
		return "symlink"
	case fs.ModeNamedPipe:
		return "named pipe"
	case fs.ModeDevice, fs.ModeDevice | fs.ModeCharDevice:
		return "device"
	}
	return "file of mode " + m.String()
}
