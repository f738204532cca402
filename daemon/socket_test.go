package daemon

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// listenOK listens at path and closes the listener when the test ends.
func listenOK(t *testing.T, path string) {
	t.Helper()
	ln, err := listenSocket(path)
	if err != nil {
		t.Fatalf("listen on %s: %v", path, err)
	}
	t.Cleanup(func() { ln.Close() })
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %s: %v %v, want a 0600 socket", path, fi.Mode(), err)
	}
}

// mkdirMode makes dir with exactly mode (the umask would narrow Mkdir's).
func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

func modeOf(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode() & (os.ModePerm | os.ModeSticky)
}

// A missing socket directory is sessiond's own: created, and private.
func TestSocketDirCreatedPrivate(t *testing.T) {
	dir := filepath.Join(shortDir(t), "a", "b")
	listenOK(t, filepath.Join(dir, "s.sock"))
	if m := modeOf(t, dir); m != 0o700 {
		t.Errorf("created socket dir mode %v, want 0700", m)
	}
}

// A directory sessiond did not create keeps its mode: --socket ~/s.sock
// must not make the home directory 0700, nor --socket /tmp/s.sock /tmp.
func TestSocketDirNotChanged(t *testing.T) {
	for _, mode := range []os.FileMode{0o755, 0o711, os.ModeSticky | 0o777, os.ModeSticky | 0o775} {
		dir := filepath.Join(shortDir(t), "d")
		mkdirMode(t, dir, mode)
		listenOK(t, filepath.Join(dir, "s.sock"))
		if m := modeOf(t, dir); m != mode {
			t.Errorf("existing socket dir mode %v became %v", mode, m)
		}
	}
}

// A directory others may write to without the sticky bit lets them unlink
// the socket and put their own in its place: refused, and left as it is.
func TestSocketDirWritableByOthersRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o777, 0o775, 0o757} {
		dir := filepath.Join(shortDir(t), "d")
		mkdirMode(t, dir, mode)
		path := filepath.Join(dir, "s.sock")
		ln, err := listenSocket(path)
		if err == nil {
			ln.Close()
			t.Errorf("mode %v: listened; want a refusal", mode)
			continue
		}
		if !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "writable by") {
			t.Errorf("mode %v: error %q does not name the directory and why", mode, err)
		}
		if m := modeOf(t, dir); m != mode {
			t.Errorf("refused dir mode %v became %v", mode, m)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("mode %v: something was created at %s: %v", mode, path, err)
		}
	}
}

// Only a socket is ever removed from the path: a regular file or a
// symlink there is the user's mistake to see, not to lose.
func TestSocketPathNotASocketRefused(t *testing.T) {
	dir := shortDir(t)
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{file, link} {
		ln, err := listenSocket(path)
		if err == nil {
			ln.Close()
			t.Fatalf("listened on %s over a non-socket", path)
		}
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("error %q does not name %s and what is wrong", err, path)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "precious" {
		t.Errorf("file at the socket path changed: %q %v", b, err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("symlink at the socket path changed: %v", err)
	}
}

// staleSocket leaves a socket file nothing listens on, as a killed daemon
// does.
func staleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
}

// A stale socket of this user is replaced; a live one is another daemon's.
func TestSocketStaleReplacedLiveRefused(t *testing.T) {
	path := filepath.Join(shortDir(t), "s.sock")
	staleSocket(t, path)
	ln, err := listenSocket(path)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	defer ln.Close()
	_, err = listenSocket(path)
	var already *AlreadyRunningError
	if !errors.As(err, &already) {
		t.Fatalf("second listen on a live socket: %v, want AlreadyRunningError", err)
	}
}

// Another user's socket is never removed, even a stale one.
func TestSocketOfOtherUserRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to give a socket to another user")
	}
	path := filepath.Join(shortDir(t), "s.sock")
	staleSocket(t, path)
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	ln, err := listenSocket(path)
	if err == nil {
		ln.Close()
		t.Fatal("listened over another user's socket")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "uid 65534") {
		t.Errorf("error %q does not name the socket and its owner", err)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("another user's socket was removed: %v", err)
	}
}
