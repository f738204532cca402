package claude

import (
	"sync/atomic"
	"time"
)

// hot says which transcripts are stat'ed at every pass: those not read
// yet or modified recently, and those a live process may be writing
// (named by a registry entry or an argv, or in the cwd of a live claude).
// The others are stat'ed at full rescans only: on a machine with years of
// history a pass then costs a few stats, not one per transcript ever
// written.
type hot struct {
	coldAfter time.Duration
	ids       map[string]bool
	names     []string // the ids' transcript names
	cwds      map[string][]*claudeProc
	pass      uint64 // this pass, for fileState.hotMark
}

// has is the rule itself: whether f is hot now.
func (h *hot) has(f *fileState, now time.Time) bool {
	if h.byTime(f.read, f.mtime, now) || h.ids[f.id] {
		return true
	}
	return len(h.cwds) > 0 && f.sum.Cwd != "" && len(h.cwds[f.cwdKey()]) > 0
}

// byTime is the rule's part that time can end: a file not read yet, or
// written (mtime) within ColdAfter.
func (h *hot) byTime(read bool, mtime, now time.Time) bool {
	return !read || now.Sub(mtime) < h.coldAfter
}

// hotPasses numbers the passes for fileState.hotMark.
var hotPasses atomic.Uint64

func (a *Adapter) hotSet(r *rootState, v *procView) *hot {
	h := &hot{coldAfter: a.cfg.ColdAfter, ids: map[string]bool{}, cwds: v.byCwd, pass: hotPasses.Add(1)}
	for _, rf := range r.regs {
		if rf.entry != nil {
			h.ids[rf.entry.SessionID] = true
		}
	}
	for id := range v.byArgv {
		h.ids[id] = true
	}
	for id := range h.ids {
		h.names = append(h.names, id+".jsonl")
	}
	return h
}

// hotIndex finds a project's hot transcripts without looking at the cold
// ones: walking every file's state to ask has was most of a steady pass
// of the Claude adapter over 10,000 transcripts (cache misses, one per
// file). It keeps the files that were hot by time at the last look (not
// read, or written within ColdAfter: their time can run out), and the
// others by cwd; the files named by id are found by name. It is rebuilt
// from every file after a full rescan, a new listing or a file gone.
type hotIndex struct {
	built bool
	warm  []*fileState
	byCwd map[string][]*fileState
}

// files returns the files of p to stat this pass: all of them at a full
// rescan, else the hot ones.
func (x *hotIndex) files(p *projectState, full bool, h *hot, now time.Time) []*fileState {
	if full || !x.built {
		x.built, x.warm, x.byCwd = true, nil, map[string][]*fileState{}
		out := make([]*fileState, 0, len(p.files))
		for _, f := range p.files {
			f.byCwd = false
			x.index(f)
			if full || h.has(f, now) {
				out = append(out, f)
			}
		}
		return out
	}
	var out []*fileState
	add := func(f *fileState) {
		if f.hotMark != h.pass {
			f.hotMark = h.pass
			out = append(out, f)
		}
	}
	for _, f := range x.warm {
		if h.byTime(f.read, f.mtime, now) {
			add(f)
		} else {
			x.index(f) // gone cold since the last look: by cwd from now on
		}
	}
	for _, name := range h.names {
		if f := p.files[name]; f != nil {
			add(f)
		}
	}
	if len(x.byCwd) > 0 {
		for cwd, cps := range h.cwds {
			if len(cps) > 0 {
				for _, f := range x.byCwd[cwd] {
					add(f)
				}
			}
		}
	}
	if hotCheck != nil {
		hotCheck(p, h, now, out)
	}
	return out
}

// settle keeps the files found hot by time at their stat this pass
// (unread ones included: they are read after the scan) as the next pass's
// warm.
func (x *hotIndex) settle(warm []*fileState) {
	if x.built {
		x.warm = warm
	} // else a file is gone: rebuilt next pass
}

// index adds f by cwd, once, when it has been read and names a cwd.
func (x *hotIndex) index(f *fileState) {
	if f.byCwd || !f.read || f.sum.Cwd == "" {
		return
	}
	f.byCwd = true
	k := f.cwdKey()
	x.byCwd[k] = append(x.byCwd[k], f)
}

// hotCheck, set by tests, sees each steady pass's files to stat for a
// project, to hold them to the rule.
var hotCheck func(p *projectState, h *hot, now time.Time, files []*fileState)
