package gemini

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/proc"
)

// startSlack allows for the resolution of process start times when
// comparing them with a write time.
const startSlack = 2 * time.Second

// gProc is one live gemini process of the snapshot that may write chats.
type gProc struct {
	p *proc.Process
	// hash is its folder's project hash (Gemini CLI's project root is the
	// folder it runs in).
	hash  string
	start time.Time // zero when unknown
	// resume is the --resume/-r argument ("latest", an index or a
	// session id), "" when none; sessionID the --session-id argument (a
	// new session with that id).
	resume, sessionID string
	// files are the chats it holds open, when its descriptors were read.
	files map[string]bool
}

// isGeminiArgv: the gemini script run by node (`node …/bin/gemini …`, or
// its bundle), or a gemini executable.
func isGeminiArgv(argv []string) (args []string, ok bool) {
	if len(argv) == 0 {
		return nil, false
	}
	base := filepath.Base(argv[0])
	if base == "gemini" {
		return argv[1:], true
	}
	if !strings.HasPrefix(base, "node") {
		return nil, false
	}
	for i := 1; i < len(argv); i++ {
		a := argv[i]
		if strings.HasPrefix(a, "-") {
			continue // node's own options (--max-old-space-size=…)
		}
		if filepath.Base(a) == "gemini" || strings.Contains(a, "@google/gemini-cli/") {
			return argv[i+1:], true
		}
		return nil, false
	}
	return nil, false
}

// sessionArgs are the values of --resume/-r (a bare one is "latest") and
// --session-id.
func sessionArgs(args []string) (resume, sessionID string) {
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, has := strings.Cut(a, "=")
		if name != "--resume" && name != "-r" && name != "--session-id" {
			continue
		}
		if !has {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				val = args[i+1]
			} else if name != "--session-id" {
				val = "latest"
			}
		}
		if name == "--session-id" {
			sessionID = val
		} else {
			resume = val
		}
	}
	return resume, sessionID
}

// findProcs lists the gemini processes of this user that may write chats.
// Gemini CLI relaunches itself: the first node spawns a second with the
// same arguments, which does the work, and waits for it. A gemini whose
// child is a gemini is left out: the child is the owner.
func (a *Adapter) findProcs(snap *proc.Snapshot) []*gProc {
	if snap == nil {
		return nil
	}
	uid := os.Getuid()
	var out []*gProc
	for _, p := range snap.Procs {
		if p.UID != uid || p.Exited() || p.Cwd == "" || snap.ForkedNotExeced(p) {
			continue
		}
		args, ok := isGeminiArgv(p.Argv)
		if !ok {
			continue
		}
		relauncher := false
		for _, c := range snap.Children(p.Identity.PID) {
			if _, ok := isGeminiArgv(c.Argv); ok && !c.Exited() {
				relauncher = true
				break
			}
		}
		if relauncher {
			continue
		}
		g := &gProc{p: p, hash: hashOf(p.Cwd)}
		g.resume, g.sessionID = sessionArgs(args)
		if t, err := a.cfg.Host.StartTime(p.Identity); err == nil {
			g.start = t
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y *gProc) int { return x.p.Identity.PID - y.p.Identity.PID })
	return out
}

// isSessionID: s is a session id (a UUID), not "latest" or an index.
func isSessionID(s string) bool {
	return len(s) == 36 && strings.Count(s, "-") == 4
}

// startedBefore: g may have written at t (unknown times rule nothing out).
func (g *gProc) startedBefore(t time.Time) bool {
	if g.start.IsZero() || t.IsZero() {
		return true
	}
	return !g.start.After(t.Add(startSlack))
}

// holds reports whether g holds path open; known false when its
// descriptors could not be read. Read once per pass per process.
func (a *Adapter) holds(g *gProc, path string) (held, known bool) {
	if g.files == nil {
		g.files = map[string]bool{}
		d, err := a.cfg.Host.OpenFiles(g.p.Identity.PID)
		if err != nil {
			g.files = nil
			return false, false
		}
		for _, f := range d.Files {
			g.files[f] = true
		}
		g.files[""] = true // read
	}
	return g.files[path], true
}

// assignOwners sets each session's owners:
//
//   - named: a gemini in the chat's project folder whose argv resumes this
//     very session id or starts it (--session-id), or, among several
//     candidates, one holding the chat file open (Gemini CLI 0.61.0 opens
//     it only for each append, so this is rare); a gemini whose
//     --session-id or --resume names another session is no candidate;
//   - else inferred: every gemini working in the chat's project folder
//     (its hash is the chat's projectHash) that started before the chat's
//     last write. One gemini writes one main chat at a time: where a
//     gemini is the only candidate of two chats and started the newer one
//     after the older's last write (a /clear, a new session), it has left
//     the older one;
//   - a subagent's chat: the owners of its parent session.
func (a *Adapter) assignOwners(obs []adapters.Observed, procs []*gProc) {
	if len(procs) == 0 {
		return
	}
	type cand struct {
		i    int
		hash string
		last time.Time
		// started is the chat's start (its header's startTime).
		started time.Time
	}
	byID := map[string]int{}
	var cands []cand
	for i := range obs {
		byID[obs[i].UpstreamID] = i
	}
	for i := range obs {
		o := &obs[i]
		f := a.fileOf(o.Source)
		if f == nil || f.parent != "" {
			continue
		}
		cands = append(cands, cand{i: i, hash: f.c.ProjectHash, last: o.LastActivity, started: f.c.Started})
		var named []adapters.Owner
		var inferred []*gProc
		for _, g := range procs {
			if g.hash != f.c.ProjectHash && (o.Cwd == "" || g.p.Cwd != o.Cwd) {
				continue // another project: Gemini CLI writes its folder's chats only
			}
			switch {
			case g.resume == o.UpstreamID:
				named = append(named, adapters.Owner{Identity: g.p.Identity, Evidence: "argv --resume " + o.UpstreamID})
			case g.sessionID == o.UpstreamID:
				named = append(named, adapters.Owner{Identity: g.p.Identity, Evidence: "argv --session-id " + o.UpstreamID})
			case g.sessionID != "" || isSessionID(g.resume):
				// it writes the session it names, not this one
			case g.startedBefore(o.LastActivity):
				inferred = append(inferred, g)
			}
		}
		// Several candidates: one holding the chat open is its writer.
		// Only then are descriptors read (lsof on macOS is not cheap).
		if len(named) == 0 && len(inferred) > 1 {
			for _, g := range inferred {
				if held, _ := a.holds(g, f.path); held {
					named = append(named, adapters.Owner{Identity: g.p.Identity, Evidence: "holds " + f.path + " open"})
				}
			}
		}
		if len(named) > 0 {
			o.Owners = named
			continue
		}
		for _, g := range inferred {
			o.Owners = append(o.Owners, adapters.Owner{Identity: g.p.Identity, Inferred: true,
				Evidence: fmt.Sprintf("works in the chat's project folder (%s) and started before its last write", oneline.OrUnknown(g.p.Cwd))})
		}
	}
	// A gemini that is the only candidate of several chats writes the one
	// it started last: it has left the others whose last write is older
	// than that one's start.
	for _, c := range cands {
		o := &obs[c.i]
		if len(o.Owners) != 1 || !o.Owners[0].Inferred {
			continue
		}
		id := o.Owners[0].Identity
		for _, d := range cands {
			n := &obs[d.i]
			if d.i == c.i || len(n.Owners) != 1 || n.Owners[0].Identity != id || d.started.IsZero() {
				continue
			}
			if d.started.After(o.LastActivity.Add(startSlack)) {
				o.Owners = nil
				break
			}
		}
	}
	for i := range obs {
		o := &obs[i]
		f := a.fileOf(o.Source)
		if f == nil || f.parent == "" {
			continue
		}
		if pi, ok := byID[f.parent]; ok {
			for _, ow := range obs[pi].Owners {
				ow.Inferred = true
				ow.Evidence = "owner of the parent session " + f.parent + ": " + ow.Evidence
				o.Owners = append(o.Owners, ow)
			}
		}
	}
}

// fileOf is the chat read from path.
func (a *Adapter) fileOf(path string) *fileState {
	for _, r := range a.roots {
		if f := r.files[path]; f != nil {
			return f
		}
	}
	return nil
}
