package claude

import (
	"slices"

	"github.com/sessiond/sessiond/adapters"
)

// An idle pass over a long history must not cost a build of every
// session. Most sessions are quiet: seen only in their transcript, which
// no registry entry or argv names, in no other root, in a cwd where no
// claude runs. Their observations depend on their files alone (see
// observeFile), so once built they are kept as an adapters.QuietSet, and a
// pass in which no transcript, listing or root changed, and the same
// sessions are not quiet, hands the same set out again and builds only the
// others. Any change of that kind takes the full build again, and a new
// set.

// quietCache is the last full build's quiet observations and what decides
// whether they still hold.
type quietCache struct {
	valid bool
	// shape is quietShape at that build.
	shape uint64
	// loud are the ids that were not quiet; set the quiet observations,
	// stamped, without orphans (added each pass, outside the set).
	loud map[string]bool
	set  *adapters.QuietSet
	// forced are ids the full build found not quiet for a reason loudIDs
	// does not see; they are rebuilt every pass.
	forced map[string]bool
	// Indexes of the files as of that build: by session id (several roots
	// may hold one id) and by cleaned cwd.
	byID  map[string][]*fileRef
	byCwd map[string][]string
	multi []string // ids held by more than one root
}

// fileRef is a transcript and its root.
type fileRef struct {
	root *rootState
	file *fileState
}

// shapePrint changes whenever a transcript is added, removed or read, or a
// project or root becomes readable or not: what quiet observations rest
// on. It is a sum of per-item hashes, so map order does not matter; items
// are told apart by a serial given at creation, never by address.
func (a *Adapter) shapePrint() uint64 {
	var sum uint64
	for i, r := range a.roots {
		var flags uint64
		if r.ok {
			flags |= 1
		}
		if r.present {
			flags |= 2
		}
		sum += mix(uint64(i)<<8 | flags<<4 | 0xf)
		sum += mix(r.serial<<2 | 1)
		for _, p := range r.projects {
			ok := uint64(0)
			if p.ok {
				ok = 1
			}
			sum += mix(p.serial<<2 | ok<<1)
			sum += p.fileShape()
		}
	}
	return sum
}

// fileShape is the project's share of shapePrint from its files, kept
// between passes: only scanProject changes what it covers (a listing
// that adds or removes a file, a file gone, a read), and it marks the
// sum stale when it does. Summing 10,000 files' states every pass cost a
// cache miss per file.
func (p *projectState) fileShape() uint64 {
	if !p.shapeOK {
		p.shapeSum, p.shapeOK = 0, true
		for _, f := range p.files {
			if f.read {
				p.shapeSum += f.shapeHash()
			}
		}
	}
	return p.shapeSum
}

// shapeHash is a read file's share of shapePrint.
func (f *fileState) shapeHash() uint64 { return mix(f.serial<<24 ^ f.gen<<2 | 3) }

// quietShape is shape without the shares of the transcripts of the loud
// sessions (as the cache's index knows them): what the quiet
// observations rest on. A busy session's transcript is read at every
// pass it writes, and that read changes no quiet observation; taken
// whole, the shape made each such pass build every session and hand the
// tracker a new set (52 ms a pass at 10,000 sessions). A transcript of a
// loud id the index does not know (a new one, another root's) stays in,
// and a full build follows, as before.
func quietShape(shape uint64, loud map[string]bool, c *quietCache) uint64 {
	for id := range loud {
		for _, ref := range c.byID[id] {
			if ref.file.read {
				shape -= ref.file.shapeHash()
			}
		}
	}
	return shape
}

// mix is splitmix64's finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// loudIDs are the sessions that are not quiet this pass: named by a
// registry entry or an argv, in a cwd where a claude runs, or held by
// several roots. cwds and multi come from the cache's indexes.
func (a *Adapter) loudIDs(v *procView, c *quietCache) map[string]bool {
	loud := map[string]bool{}
	for _, r := range a.roots {
		if !r.ok || !r.present || !r.regsOK {
			continue
		}
		for _, rf := range r.regs {
			if rf.entry != nil && rf.entry.SessionID != "" {
				loud[rf.entry.SessionID] = true
			}
		}
	}
	for id := range v.byArgv {
		loud[id] = true
	}
	if v.snap != nil {
		for cwd, cps := range v.byCwd {
			if len(cps) == 0 {
				continue
			}
			for _, id := range c.byCwd[cwd] {
				loud[id] = true
			}
		}
	}
	for _, id := range c.multi {
		loud[id] = true
	}
	return loud
}

// indexFiles builds the cache's indexes from the roots.
func (a *Adapter) indexFiles(c *quietCache) {
	n := a.filesRead()
	c.byID = make(map[string][]*fileRef, n)
	c.byCwd = map[string][]string{}
	c.multi = nil
	refs := make([]fileRef, 0, n) // one array, not n allocations
	for r, f := range a.readFiles {
		refs = append(refs, fileRef{r, f})
		c.byID[f.id] = append(c.byID[f.id], &refs[len(refs)-1])
		if len(c.byID[f.id]) == 2 {
			c.multi = append(c.multi, f.id)
		}
		if f.sum.Cwd != "" {
			k := f.cwdKey()
			c.byCwd[k] = append(c.byCwd[k], f.id)
		}
	}
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// buildLoud builds the sessions that are not quiet afresh, as the full
// build would, sorted by id; the quiet ones stay in the cache's set.
func (a *Adapter) buildLoud(v *procView, c *quietCache) ([]adapters.Observed, []liveOwner) {
	ids := make([]string, 0, len(c.loud))
	for id := range c.loud {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]adapters.Observed, 0, len(ids))
	var live []liveOwner
	for _, id := range ids {
		o, lo, ok := a.observeID(id, v, c)
		if !ok {
			continue
		}
		live = append(live, lo...)
		out = append(out, o)
	}
	return out, live
}

// observeID builds one session from every input that names id, as the
// full build does: a build per root (the transcript, the registry
// entries), the argv owners attached to the first build of a matching
// root, and the builds merged.
func (a *Adapter) observeID(id string, v *procView, c *quietCache) (adapters.Observed, []liveOwner, bool) {
	var builds []*sessBuild
	byRoot := map[*rootState]*sessBuild{}
	get := func(r *rootState) *sessBuild {
		if b := byRoot[r]; b != nil {
			return b
		}
		b := &sessBuild{id: id, root: r}
		byRoot[r] = b
		builds = append(builds, b)
		return b
	}
	// In the full build's order: root by root, the transcript, then the
	// registry entries.
	for _, r := range a.roots {
		if !r.ok || !r.present {
			continue
		}
		for _, ref := range c.byID[id] {
			if ref.root == r {
				get(r).file = ref.file
			}
		}
		if !r.regsOK {
			continue
		}
		for _, rf := range r.regs {
			if rf.entry != nil && rf.entry.SessionID == id {
				b := get(r)
				b.entries = append(b.entries, rf)
			}
		}
	}
	for _, cp := range v.byArgv[id] {
		var b *sessBuild
		for _, x := range builds {
			if cp.root == "" || cp.root == x.root.path {
				b = x
				break
			}
		}
		if b == nil {
			for _, r := range a.roots {
				if r.ok && r.present && r.path == cp.root {
					b = get(r)
					break
				}
			}
		}
		if b == nil {
			continue // another root, or one that cannot be read now
		}
		b.argv = append(b.argv, cp)
	}
	if len(builds) == 0 {
		return adapters.Observed{}, nil, false
	}
	var out adapters.Observed
	var live []liveOwner
	for i, b := range builds {
		o, lo := a.observeFile(b, v)
		live = append(live, lo...)
		if i == 0 {
			out = o
			continue
		}
		out = merge(out, o)
		out.Stamp = 0
	}
	return out, live, true
}
