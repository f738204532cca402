package claude

import (
	"io/fs"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/kit"
)

// What the adapter knows of each config root: the roots it reads (the
// configured ones, and those learned from live claude processes), each
// one's listed directories and project folders.

// rootState is what the adapter knows of one config root.
type rootState struct {
	serial  uint64 // tells this state apart from any other (shapePrint)
	path    string
	learned bool
	// present: the root exists; ok: it could be looked at this pass.
	present, ok bool

	sessionsDir dirState
	regsOK      bool
	regs        map[string]*regFile

	projectsDir dirState
	projects    map[string]*projectState
	// skipped are entries of projects/ not read (symlinks), as of the
	// last listing: named in health as warnings.
	skipped []adapters.InputError
}

func newRootState(path string, learned bool) *rootState {
	return &rootState{serial: nextSerial(), path: path, learned: learned, regs: map[string]*regFile{}, projects: map[string]*projectState{}}
}

// serials numbers every root, project and transcript state ever made, so
// shapePrint can tell a new one from an old one at the same address.
var serials atomic.Uint64

func nextSerial() uint64 { return serials.Add(1) }

// dirState remembers a directory's mtime at its last listing.
type dirState struct {
	exists bool
	listed bool
	mtime  time.Time
}

// needList reports whether the directory must be listed again: a
// directory modified within the racy window may change again within the
// same mtime tick, so it is listed again even if its stat looks unchanged.
func (d *dirState) needList(fi fs.FileInfo, full bool) bool {
	return full || !d.listed || !fi.ModTime().Equal(d.mtime) || !kit.Settled(d.mtime, time.Now())
}

func (d *dirState) listedNow(fi fs.FileInfo) {
	d.listed = true
	d.mtime = fi.ModTime()
}

type projectState struct {
	serial uint64
	path   string
	dir    dirState
	ok     bool
	files  map[string]*fileState
	// skipped are transcript-named entries not read (symlinks, not
	// regular files), as of the last listing.
	skipped []adapters.InputError
	hot     hotIndex // which files a steady pass stats (hot.go)
	// shapeSum is fileShape's last sum, valid while shapeOK.
	shapeSum uint64
	shapeOK  bool
}

// filesChanged marks what the project keeps about its set of files
// stale: the hot index and the shape's sum.
func (p *projectState) filesChanged() {
	p.hot.built, p.shapeOK = false, false
}

// learnRoots adds the config roots of live claude processes of this user.
func (a *Adapter) learnRoots(v *procView) {
	uid := os.Getuid()
	have := map[string]bool{}
	learned := 0
	for _, r := range a.roots {
		have[r.path] = true
		if r.learned {
			learned++
		}
	}
	for _, cp := range v.claude {
		if cp.root == "" || have[cp.root] || cp.p.UID != uid || cp.p.Env["CLAUDE_CONFIG_DIR"] == "" {
			continue
		}
		if learned >= maxLearnedRoots {
			a.log.Warn("too many learned Claude config roots; ignoring", zap.String("root", cp.root))
			return
		}
		have[cp.root] = true
		learned++
		a.roots = append(a.roots, newRootState(cp.root, true))
		a.log.Info("learned Claude config root from a live process", zap.String("root", cp.root), zap.Int("pid", cp.p.Identity.PID))
	}
}

func cleanPath(p string) string {
	if p == "" {
		return ""
	}
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}
