package hookinstall

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// errChanged is what Apply returns (wrapped) when the file changed after
// it was read: something else wrote it meanwhile, and sessiond, which
// would have overwritten that write, wrote nothing.
var errChanged = errors.New("changed since it was read")

// beforeReplace, when set (by tests), runs right before the last check
// that the file is as it was read: where another writer would lose its
// write to a rename that did not look.
var beforeReplace func(path string)

// maxLinks bounds a chain of symlinks, as the kernel's ELOOP does.
const maxLinks = 40

// resolve is the file path names once its symlinks are followed: path
// itself when it is not a link (or not there), else the file at the end
// of the chain, in its real directory, whether or not that file exists
// yet. Writing it there keeps the links links, and a temporary file
// beside it renames over it within one directory.
func resolve(path string) (string, error) {
	p := path
	for hops := 0; ; hops++ {
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return p, nil
		}
		if err != nil {
			return "", err
		}
		if hops == maxLinks {
			return "", fmt.Errorf("%s: more than %d symbolic links in a row", path, maxLinks)
		}
		link, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(link) {
			// Relative to the link's directory as the kernel reads it: the
			// ".." of the text applies to the directory's real path.
			link = filepath.Dir(p) + string(filepath.Separator) + link
		}
		dir, base := filepath.Split(link)
		real, err := filepath.EvalSymlinks(dir)
		if err != nil {
			return "", fmt.Errorf("%s: the symlink %s leads to %s: %w", path, p, link, err)
		}
		p = filepath.Join(real, base)
	}
}

// readTarget reads the file at target with what it is on disk, to tell
// later whether it changed; absent is (nil, nil, nil).
func readTarget(target string) ([]byte, fs.FileInfo, error) {
	// Looked at before it is opened: opening a named pipe would block.
	fi, err := os.Stat(target)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err == nil && !fi.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s is not a regular file (%v): sessiond does not touch it", target, fi.Mode().Type())
	}
	f, err := os.Open(target)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	// The file's identity and time from the descriptor read: what the
	// check before the write compares with.
	if fi, err = f.Stat(); err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, nil, err
	}
	return b, fi, nil
}

// unchanged checks that the file is still the one read, as read: the
// same symlinks to the same file, the same inode, size, modification
// time and bytes (or still absent).
func (p *Plan) unchanged() error {
	target, err := resolve(p.Path)
	if err != nil {
		return err
	}
	if target != p.target {
		return p.changed(fmt.Sprintf("its symlinks now lead to %s, not %s", target, p.target))
	}
	fi, err := os.Lstat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if p.Existed {
			return p.changed("it was removed")
		}
		return nil
	case err != nil:
		return err
	case !p.Existed:
		return p.changed("it was created")
	}
	b, err := os.ReadFile(target)
	if err != nil {
		return err
	}
	switch {
	case !bytes.Equal(b, p.Before):
		return p.changed(fmt.Sprintf("it holds other bytes: %d now, %d when read", len(b), len(p.Before)))
	case !os.SameFile(fi, p.info) || fi.Size() != p.info.Size() || !fi.ModTime().Equal(p.info.ModTime()):
		return p.changed(fmt.Sprintf("it was written again: the same bytes, but modified %s, not %s, or another file",
			fi.ModTime().Format(time.RFC3339Nano), p.info.ModTime().Format(time.RFC3339Nano)))
	}
	return nil
}

func (p *Plan) changed(why string) error {
	name := p.Path
	if p.target != p.Path {
		name += " (" + p.target + ")"
	}
	return fmt.Errorf("%s %w (%s): nothing was written; run the command again to act on the file as it is now", name, errChanged, why)
}

// lockRoot holds an exclusive flock on the root's directory while a plan
// is applied, so that two `sessionctl hooks` at once do not interleave
// their backups and writes: the second then finds the file changed and
// stops before writing anything. (The agent takes no such lock: its
// writes are caught by unchanged.) A file system without flock is used
// without it.
func lockRoot(dir string) (func(), error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return func() { f.Close() }, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			if time.Now().After(deadline) {
				f.Close()
				return nil, fmt.Errorf("%s is locked by another sessionctl hooks for more than 10s: nothing was written", dir)
			}
			time.Sleep(10 * time.Millisecond)
		default:
			return func() { f.Close() }, nil
		}
	}
}

// writeAtomic puts b at path through a temporary file in its directory,
// renamed over it once check (if any) passes right before.
func writeAtomic(path string, b []byte, mode fs.FileMode, check func() error) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if check != nil {
		if beforeReplace != nil {
			beforeReplace(path)
		}
		if err := check(); err != nil {
			return err
		}
	}
	return os.Rename(tmp, path)
}
