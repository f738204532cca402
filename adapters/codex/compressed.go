package codex

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Codex 0.171.0 can compress a rollout it has left idle (the feature
// local_thread_store_compression, off by default): the file is replaced
// by rollout-<time>-<uuid>.jsonl.zst beside it, a plain zstd stream of the
// same lines, with the old mtime kept (docs/agents/codex.md). Such a
// rollout is read whole, decompressed in memory up to maxDecompressed, as
// a new file is read (its head, then its tail); it is read again, whole,
// whenever its size, mtime or inode changes, and never saved in a
// checkpoint (an offset into the decompressed lines means nothing against
// the file's size). One that cannot be decompressed is an input error:
// its session keeps its last known status with adapter_error. One larger
// than maxDecompressed has only its head read: its session's turn state is
// unknown, and a warning says why.

// maxDecompressed bounds what one compressed rollout may take in memory.
const maxDecompressed = 64 << 20

// errTooLarge: the decompressed rollout is larger than the bound.
var errTooLarge = fmt.Errorf("larger than %d MiB decompressed", maxDecompressed>>20)

// decompress reads the compressed rollout at path: the decompressed bytes,
// at most limit of them; whole is false when there were more.
func decompress(path string, limit int64) (data []byte, whole bool, err error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer file.Close()
	var r io.Reader
	switch {
	case strings.HasSuffix(path, ".zst"):
		d, err := zstd.NewReader(file, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(limit)+1<<20), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, false, fmt.Errorf("zstd: %w", err)
		}
		defer d.Close()
		r = d
	case strings.HasSuffix(path, ".gz"):
		g, err := gzip.NewReader(file)
		if err != nil {
			return nil, false, fmt.Errorf("gzip: %w", err)
		}
		defer g.Close()
		r = g
	default:
		return nil, false, errors.New("not a compressed rollout name")
	}
	var buf bytes.Buffer
	n, err := io.Copy(&buf, io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, fmt.Errorf("decompress: %w", err)
	}
	if n > limit {
		return buf.Bytes()[:limit], false, nil
	}
	return buf.Bytes(), true, nil
}

// refreshCompressed reads a compressed rollout again, whole, once its
// size, mtime or inode changed.
func (a *Adapter) refreshCompressed(f *fileState, size int64, fi os.FileInfo, dev, ino uint64) {
	f.read, f.size, f.mtime, f.dev, f.ino = true, size, fi.ModTime(), dev, ino
	f.partial, f.readErr = nil, nil
	f.meta, f.metaErr, f.turn, f.offset, f.bad = meta{}, nil, turn{}, 0, 0
	a.gen++
	f.gen = a.gen
	data, whole, err := decompress(f.path, maxDecompressed)
	if err != nil {
		f.readErr = fmt.Errorf("compressed rollout not read: %w", err)
		return
	}
	r := bytes.NewReader(data)
	n := int64(len(data))
	m, _, err := readHead(r, n)
	f.meta, f.metaErr = m, err
	if !whole {
		// The turn state is at the end, past what is read: unknown.
		f.partial = errTooLarge
		return
	}
	var res readResult
	if n > 0 {
		if err := readTail(r, n, max(a.cfg.MaxTail, n), &res); err != nil {
			f.readErr = fmt.Errorf("compressed rollout not read: %w", err)
			return
		}
	}
	f.turn, f.offset, f.bad = res.turn, res.offset, res.bad
}
