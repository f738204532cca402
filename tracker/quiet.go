package tracker

import (
	"slices"
	"strings"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// A pass at 10,000 sessions of history looked at every one of them: the
// record's observation looked up by id, its evidence fingerprinted, its
// upstream id checked for a record, all hashing strings, every 5 s. An
// adapter that hands out its quiet sessions as an adapters.QuietSet (the
// same pointer while none of them changed) lets a pass skip those
// records outright, for reasons that hold by construction rather than by
// comparison:
//
//   - a record settled last pass under the agent's set (its observation
//     came from it, or it was in neither list) was decided from evidence
//     that is still the same when the set is the same pointer, the
//     record is the same pointer, no session in this pass's own list
//     (which would shadow the set) is its, and the failed inputs are
//     the same; settled.go's rule, that time alone cannot change such a
//     decision, does the rest;
//   - a set every session of which had a record needs no look for new
//     sessions while it is the same: records are never removed, and an
//     upstream id once recorded stays.
//
// The memo lives on the Tracker, under passMu, like settled.

// settledMark is what settled keeps of a record: the fingerprint of the
// evidence it was settled on, and the quiet set that evidence came from
// (nil when it came from the adapter's own list).
type settledMark struct {
	print uint64
	quiet *adapters.QuietSet
}

// claimIndex maps each agent's upstream ids to the record that claims
// them, for one list of records.
type claimIndex struct {
	recs  []*session.Record // the list it was built from
	byUp  map[string]map[string]*session.Record
	count int
}

// claimsFor returns the index for recs: the last one when recs is the
// same list (the store hands out one slice until a write), else a new one.
func (t *Tracker) claimsFor(recs []*session.Record) *claimIndex {
	if c := t.claims; c != nil && sameList(c.recs, recs) {
		return c
	}
	// Each agent's map is sized to its own records: sized to all of
	// them, seven agents' maps held 7x the slots (~5 MiB at 17,000).
	per := map[string]int{}
	for _, r := range recs {
		if r.UpstreamID != "" {
			per[r.Agent]++
		}
	}
	c := &claimIndex{recs: recs, byUp: make(map[string]map[string]*session.Record, len(per))}
	for _, r := range recs {
		if r.UpstreamID == "" {
			continue
		}
		m := c.byUp[r.Agent]
		if m == nil {
			m = make(map[string]*session.Record, per[r.Agent])
			c.byUp[r.Agent] = m
		}
		m[r.UpstreamID] = r
		c.count++
	}
	if old := t.claims; old != nil && c.count < old.count {
		// Fewer claims than before: something was removed after all, so
		// no set is known to be wholly recorded any more.
		clear(t.quietClaimed)
	}
	t.claims = c
	return c
}

// sameList reports whether a and b are the same slice.
func sameList(a, b []*session.Record) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// isClaimed reports whether a record claims agent's upstream id, or the
// pass linked a launched record to it.
func (p *pass) isClaimed(agent, up string) bool {
	return p.claims.byUp[agent][up] != nil || p.linkedUp[agent][up]
}

// markLoud finds the records whose sessions are in an adapter's own list
// this pass: never skipped for their quiet set, which that list shadows.
func (p *pass) markLoud() {
	p.loud = map[*session.Record]bool{}
	for agent, o := range p.obs {
		recs := p.claims.byUp[agent]
		for up := range o.byUp {
			if r := recs[up]; r != nil {
				p.loud[r] = true
			}
		}
	}
}

// compareInputs notes, per agent, whether the inputs that failed this
// pass are those that failed last pass, and keeps this pass's.
func (p *pass) compareInputs() {
	t := p.t
	p.sameInputs = map[string]bool{}
	next := make(map[string]string, len(p.obs))
	for agent, o := range p.obs {
		ins := make([]string, 0, len(o.badInputs))
		for in := range o.badInputs {
			ins = append(ins, in)
		}
		slices.Sort(ins)
		key := strings.Join(ins, "\x00")
		last, ok := t.badInputs[agent]
		p.sameInputs[agent] = ok && last == key
		next[agent] = key
	}
	t.badInputs = next
}

// skipQuiet reports whether r can be skipped without a look: settled last
// pass under the quiet set its agent's adapter returned again.
func (p *pass) skipQuiet(r *session.Record, m settledMark, linked bool) bool {
	if m.quiet == nil || linked {
		return false
	}
	if r.Agent != p.quietAgent.name { // records come mostly in runs of one agent
		p.quietAgent.name, p.quietAgent.set = r.Agent, nil
		if o := p.obs[r.Agent]; o != nil && p.sameInputs[r.Agent] {
			p.quietAgent.set = o.quiet
		}
	}
	return p.quietAgent.set == m.quiet && !p.loud[r]
}

// quietCreates adds a first record for each session of the agent's quiet
// set that has none, unless the set is one already wholly recorded.
func (p *pass) quietCreates(agent string, o *observation) {
	t := p.t
	if o.quiet == nil || t.quietClaimed[agent] == o.quiet {
		return
	}
	whole := len(p.links) == 0
	o.quiet.Each(func(ob *adapters.Observed) bool {
		up := ob.UpstreamID
		if o.byUp[up] != nil || p.isClaimed(agent, up) {
			return true // shadowed (decided with the list), or recorded
		}
		p.create(agent, up, ob)
		whole = false
		return true
	})
	if whole {
		t.quietClaimed[agent] = o.quiet
	} else {
		delete(t.quietClaimed, agent)
	}
}
