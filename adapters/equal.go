package adapters

import (
	"slices"
	"strings"
)

// Equal reports whether o and p say the same of a session, field by
// field. An adapter whose observations are built afresh each pass uses it
// to hand out its last QuietSet again when the quiet ones came out the
// same (kit.Quiet): times compare as instants (their monotonic readings
// and locations aside), nil and empty lists alike.
func (o *Observed) Equal(p *Observed) bool {
	return o.UpstreamID == p.UpstreamID &&
		o.Source == p.Source &&
		o.Root == p.Root &&
		o.Cwd == p.Cwd &&
		o.Title == p.Title &&
		slices.EqualFunc(o.Owners, p.Owners, Owner.Equal) &&
		o.Activity == p.Activity &&
		o.ActivityEvidence == p.ActivityEvidence &&
		o.ActivitySource == p.ActivitySource &&
		o.ActivityAt.Equal(p.ActivityAt) &&
		o.WaitingFor.Equal(p.WaitingFor) &&
		o.LastActivity.Equal(p.LastActivity) &&
		slices.EqualFunc(o.InFlight, p.InFlight, Issue.Equal) &&
		slices.EqualFunc(o.Problems, p.Problems, Issue.Equal) &&
		o.OwnersExact == p.OwnersExact &&
		o.Stamp == p.Stamp
}

// Equal reports whether o and p are the same owner, found the same way.
func (o Owner) Equal(p Owner) bool {
	return o.Identity == p.Identity &&
		o.Inferred == p.Inferred &&
		o.Evidence == p.Evidence &&
		equalPtr(o.NoProbe, p.NoProbe) &&
		o.Unplaced == p.Unplaced &&
		o.Shared == p.Shared
}

// Equal reports whether i and j are the same item.
func (i Issue) Equal(j Issue) bool {
	return i.Kind == j.Kind &&
		i.Key == j.Key &&
		i.Detail == j.Detail &&
		i.Since.Equal(j.Since) &&
		equalPtr(i.Process, j.Process)
}

// equalPtr reports whether a and b are both nil or point to equal values.
func equalPtr[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// SortByID sorts obs by UpstreamID. (sort.Slice's reflective swaps of
// these large structs were a tenth of an idle pass over 2,000 sessions.)
func SortByID(obs []Observed) {
	slices.SortFunc(obs, func(a, b Observed) int { return strings.Compare(a.UpstreamID, b.UpstreamID) })
}
