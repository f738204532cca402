package opencode

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

// startSlack allows for the resolution of process start times (the boot
// time is known to the second) when comparing them with a write time.
const startSlack = 2 * time.Second

// pass holds one Discover's evidence while observations are built.
type pass struct {
	a        *Adapter
	ctx      context.Context
	now      time.Time
	sessions map[string]*sessionData
	procs    []*ocProc
	servers  []*server
	dbKeys   map[string]string // db path -> normalized real path
	children map[string][]string
	owners   map[string][]adapters.Owner
	acts     map[string]*actResult
}

// newPass starts a pass over sessions, with the processes and servers
// found this pass and the databases it listed.
func (a *Adapter) newPass(ctx context.Context, now time.Time, sessions map[string]*sessionData, procs []*ocProc, servers []*server, dbPaths []string) *pass {
	p := &pass{a: a, ctx: ctx, now: now, sessions: sessions, procs: procs, servers: servers,
		dbKeys: map[string]string{}, children: map[string][]string{}, owners: a.owners, acts: a.acts}
	for _, path := range dbPaths {
		p.dbKeys[path] = dbKey(realPath(path))
	}
	for id, s := range sessions {
		if s.ParentID != "" {
			p.children[s.ParentID] = append(p.children[s.ParentID], id)
		}
	}
	return p
}

// maxDepth bounds parent/child recursion (and breaks cycles in odd data).
const maxDepth = 8

// ownersOf lists the processes that own or may own s. Named owners (argv
// --session, a server reporting it busy) exclude inferred ones.
func (p *pass) ownersOf(s *sessionData, depth int) []adapters.Owner {
	if o, ok := p.owners[s.ID]; ok {
		return o
	}
	var out []adapters.Owner
	seen := map[proc.Identity]bool{}
	add := func(id proc.Identity, inferred bool, ev string) {
		if !seen[id] {
			seen[id] = true
			out = append(out, adapters.Owner{Identity: id, Inferred: inferred, Evidence: ev})
		}
	}
	for _, o := range p.procs {
		if o.owner() && o.args.Session == s.ID && !o.args.Fork {
			add(o.id(), false, "argv --session "+s.ID)
		}
	}
	for _, sv := range p.servers {
		if st, ok := sv.status[s.ID]; ok {
			add(sv.Owner, false, fmt.Sprintf("server %s reports it %s", sv.URL, st.Type))
		}
	}
	// An `opencode run <message>` whose message is the session's first
	// prompt created it: named exactly, so two runs in one directory never
	// take each other's session. A run whose message is another prompt
	// runs another session, and is no candidate for this one.
	if len(out) == 0 {
		for _, o := range p.procs {
			if !o.inDir(s.Directory) || !p.startedBefore(o, s.LastWrite) {
				continue
			}
			if m := p.runMatches(o, s); m == runIsOwner {
				add(o.id(), false, "argv message is the session's first prompt")
			}
		}
	}
	if len(out) == 0 {
		dbName := filepath.Base(s.Source)
		for _, o := range p.procs {
			if !o.owner() || !o.inDir(s.Directory) || !p.startedBefore(o, s.LastWrite) || p.runMatches(o, s) == runIsOther {
				continue
			}
			held, how := p.holds(o, s)
			if !held {
				continue
			}
			ev := "cwd matches the session directory"
			switch how {
			case holdsYes:
				ev += ", holds " + dbName + " open"
			case holdsUnknown:
				ev += " (open files not checked)"
			}
			add(o.id(), true, ev+", started before the last write")
		}
	}
	// A subagent session runs in its parent's process.
	if len(out) == 0 && s.ParentID != "" && depth < maxDepth {
		if parent := p.sessions[s.ParentID]; parent != nil {
			for _, ow := range p.ownersOf(parent, depth+1) {
				add(ow.Identity, ow.Inferred, "owner of parent session "+parent.ID+": "+ow.Evidence)
			}
		}
	}
	if len(out) == 0 && s.inFlight() && !s.legacy {
		// Work in flight and nobody fits by directory: any opencode that
		// holds this database and started before the last write may be
		// running it (a server serving another directory, say). Better
		// several candidates than a live turn called interrupted.
		for _, o := range p.procs {
			if o.owner() && o.fdKnown && o.held[p.dbKeys[s.Source]] && p.startedBefore(o, s.LastWrite) && p.runMatches(o, s) != runIsOther {
				add(o.id(), true, "holds "+filepath.Base(s.Source)+" open and started before the last write (no directory match)")
			}
		}
	}
	p.owners[s.ID] = out
	return out
}

// runMatch says what a run's argv message tells about a session.
type runMatch int

const (
	// runUnknown: not a run with a message, or the session's first prompt
	// is not known: no evidence either way.
	runUnknown runMatch = iota
	runIsOwner
	runIsOther
)

// runMatches compares an `opencode run <message>` (that names no session
// and continues none: it creates its own) with the session's first prompt.
func (p *pass) runMatches(o *ocProc, s *sessionData) runMatch {
	if !o.owner() || o.args.Sub != "run" || o.args.Message == "" || o.args.Session != "" || o.args.Continue || s.legacy {
		return runUnknown
	}
	if !o.start.IsZero() && !s.Created.IsZero() && o.start.After(s.Created.Add(startSlack)) {
		// Such a run creates its session after it starts: one that existed
		// before is another's. (No database read for old sessions.)
		return runIsOther
	}
	prompt := p.a.firstPrompt(p.ctx, s)
	switch {
	case prompt == "":
		return runUnknown
	case strings.TrimSpace(prompt) == strings.TrimSpace(o.args.Message):
		return runIsOwner
	}
	return runIsOther
}

type holdState int

const (
	holdsNo holdState = iota
	holdsYes
	holdsUnknown
)

// holds reports whether o holds the session's database open. Legacy
// storage is not held open; unreadable open files cannot be checked.
func (p *pass) holds(o *ocProc, s *sessionData) (bool, holdState) {
	if s.legacy {
		return true, holdsUnknown
	}
	if !o.fdKnown {
		return true, holdsUnknown
	}
	if o.held[p.dbKeys[s.Source]] {
		return true, holdsYes
	}
	return false, holdsNo
}

func (p *pass) startedBefore(o *ocProc, t time.Time) bool {
	if o.start.IsZero() || t.IsZero() {
		return true // unknown: do not rule the process out
	}
	return !o.start.After(t.Add(startSlack))
}
