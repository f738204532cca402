package hookinstall

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

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

// writeAtomic puts b at path through a temporary file in its directory,
// renamed over it.
func writeAtomic(path string, b []byte, mode fs.FileMode) error {
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
	return os.Rename(tmp, path)
}
