package copilot

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

// The owners of a session.
//
// Copilot 1.0.102 marks the sessions a process has open: the process
// creates <session>/inuse.<pid>.lock (its pid) and inuse.<pid>.hold, and
// holds the .hold file open with flock(LOCK_EX) for as long as it has the
// session; a clean exit removes both, a kill -9 leaves them behind, held
// by nobody. So a copilot process that has its own inuse.<pid>.hold of a
// session open is that session's owner, named by its own descriptor
// (proc.Host.OpenFiles): exact. Where
// the descriptors of every copilot process of this user could be read,
// the owners are the whole truth (Observed.OwnersExact): a recorded owner
// that no longer holds the session has let it go (a TUI switched to
// another session).
//
// A live process an inuse.<pid>.lock of the session names, whose
// descriptors were not read (one not known as copilot by its argv, an SDK
// host or a renamed binary; or a copilot whose descriptors could not be
// read), and that started before the folder last changed, is named by the
// data: an owner, the owners then not exact. A process at that pid that
// started later is not the one the file names. Where some copilot's
// descriptors could not be read and nothing names an owner, the copilots
// in the session's cwd that started before its last write are inferred.
// Several candidates make the tracker say owner_ambiguous, and the
// session stops only when every one is confirmed dead.

// startSlack allows for the resolution of process start times when
// comparing them with a write time.
const startSlack = 2 * time.Second

// cprocess is a live copilot process of this user.
type cprocess struct {
	p *proc.Process
	// holds are the session folders whose inuse.<pid>.hold it has open
	// (paths as the kernel names them); fdErr why its descriptors could
	// not be read.
	holds map[string]bool
	fdErr error
	start time.Time // zero when unknown
}

// procView is the copilot processes of one pass.
type procView struct {
	snap  *proc.Snapshot
	host  ProcHost
	uid   int
	list  []*cprocess
	byPID map[int]*cprocess
	// unreadable: some copilot's descriptors could not be read, so the
	// holders found are not the whole truth.
	unreadable bool
}

// copilotProcs finds this user's live copilot processes in the snapshot
// and reads which session folders each holds.
func (a *Adapter) copilotProcs(snap *proc.Snapshot) *procView {
	uid := os.Getuid()
	v := &procView{snap: snap, host: a.cfg.Host, uid: uid, byPID: map[int]*cprocess{}}
	if snap == nil {
		v.snap = &proc.Snapshot{}
		return v
	}
	natives := map[int]bool{} // parents of a native copilot: npm loaders
	for _, p := range snap.Procs {
		if p.UID == uid && !p.Exited() && isNativeArgv(p.Argv) {
			natives[p.PPID] = true
		}
	}
	for _, p := range snap.Procs {
		if p.UID != uid || p.Exited() {
			continue
		}
		native := isNativeArgv(p.Argv)
		if !native && !(isLoaderArgv(p.Argv) && !natives[p.Identity.PID]) {
			continue // a loader that has its native binary is not the owner
		}
		c := &cprocess{p: p, holds: map[string]bool{}}
		if t, err := a.cfg.Host.StartTime(p.Identity); err == nil {
			c.start = t
		}
		fds, err := a.cfg.Host.OpenFiles(p.Identity.PID)
		if err != nil {
			c.fdErr = err
			v.unreadable = true
		} else {
			suffix := fmt.Sprintf("/inuse.%d.hold", p.Identity.PID)
			for _, f := range fds.Files {
				if d, ok := strings.CutSuffix(f, suffix); ok {
					c.holds[d] = true
				}
			}
		}
		v.list = append(v.list, c)
		v.byPID[p.Identity.PID] = c
	}
	sort.Slice(v.list, func(i, j int) bool { return v.list[i].p.Identity.PID < v.list[j].p.Identity.PID })
	return v
}

// isNativeArgv: the native binary, as the npm loader spawns it
// (…/@github/copilot-linux-x64/copilot) or installed on its own.
func isNativeArgv(argv []string) bool {
	return len(argv) > 0 && filepath.Base(argv[0]) == "copilot"
}

// isLoaderArgv: the npm loader, `node …/bin/copilot` (or
// …/@github/copilot/npm-loader.js).
func isLoaderArgv(argv []string) bool {
	if len(argv) < 2 || !strings.HasPrefix(filepath.Base(argv[0]), "node") {
		return false
	}
	b := filepath.Base(argv[1])
	return b == "copilot" || b == "npm-loader.js" && strings.Contains(argv[1], "@github/copilot")
}

// heldIn returns the ids of r's sessions some process holds: they are
// looked at this pass however cold they were (a resume of an old
// session).
func (v *procView) heldIn(r *rootState) map[string]bool {
	out := map[string]bool{}
	if r.real == "" {
		if real, err := filepath.EvalSymlinks(r.path); err == nil {
			r.real = real
		}
	}
	for _, c := range v.list {
		for d := range c.holds {
			if id, ok := sessionIn(r, d); ok {
				out[id] = true
			}
		}
	}
	return out
}

// sessionIn reads the session id of a folder path under r's
// session-state/.
func sessionIn(r *rootState, dir string) (string, bool) {
	for _, base := range []string{r.real, r.path} {
		if base == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(dir, filepath.Join(base, "session-state")+string(filepath.Separator)); ok && isSessionID(rest) {
			return rest, true
		}
	}
	return "", false
}

// ownersOf sets o's owners.
func (v *procView) ownersOf(o *adapters.Observed, s *sessState, r *rootState) {
	for _, c := range v.list {
		for d := range c.holds {
			if id, ok := sessionIn(r, d); ok && id == s.id {
				o.Owners = append(o.Owners, adapters.Owner{Identity: c.p.Identity,
					Evidence: fmt.Sprintf("holds %s open", filepath.Join(s.dir, fmt.Sprintf("inuse.%d.hold", c.p.Identity.PID)))})
			}
		}
	}
	// A live process an inuse.<pid>.lock names, whose descriptors were not
	// read (not one known as copilot: an SDK host, a renamed binary; or
	// one whose descriptors could not be read), that started before the
	// folder last changed: the data names it. A readable copilot's own
	// descriptors are the truth of what it holds.
	named := false
	for _, pid := range s.inuse {
		if c := v.byPID[pid]; c != nil && c.fdErr == nil {
			continue
		}
		if slices.ContainsFunc(o.Owners, func(ow adapters.Owner) bool { return ow.Identity.PID == pid }) {
			continue
		}
		p := v.snap.Procs[pid]
		if p.Exited() || p.UID != v.uid {
			continue
		}
		start, err := v.host.StartTime(p.Identity)
		if err != nil || start.After(s.dirRead.mtime.Add(startSlack)) {
			continue
		}
		why := "not a process known as copilot"
		if c := v.byPID[pid]; c != nil {
			why = fmt.Sprintf("its descriptors could not be read: %v", c.fdErr)
		}
		o.Owners = append(o.Owners, adapters.Owner{Identity: p.Identity,
			Evidence: fmt.Sprintf("named by %s and started before it was written (%s)", filepath.Join(s.dir, fmt.Sprintf("inuse.%d.lock", pid)), why)})
		named = true
	}
	if !v.unreadable && !named {
		o.OwnersExact = "the open descriptors of every copilot process, for " + s.id + "'s inuse.<pid>.hold,"
		return
	}
	if len(o.Owners) > 0 || !v.unreadable {
		return
	}
	// Some copilot could not be looked at and no data names one: a
	// copilot in the session's cwd that started before its last write may
	// have it.
	cwd := filepath.Clean(o.Cwd)
	for _, c := range v.list {
		if c.fdErr == nil || o.Cwd == "" || c.p.Cwd == "" || filepath.Clean(c.p.Cwd) != cwd || !c.startedBefore(s.lastWrite()) {
			continue
		}
		o.Owners = append(o.Owners, adapters.Owner{Identity: c.p.Identity, Inferred: true,
			Evidence: fmt.Sprintf("cwd matches the session's, started before its last write (its descriptors could not be read: %v)", c.fdErr)})
	}
}

// startedBefore reports whether c started no later than t (with slack):
// a process that started after a session's last write did not write it.
func (c *cprocess) startedBefore(t time.Time) bool {
	return !c.start.IsZero() && !t.IsZero() && !c.start.After(t.Add(startSlack))
}
