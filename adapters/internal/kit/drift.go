package kit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/internal/oneline"
	"github.com/sessiond/sessiond/adapters/internal/wire"
	"github.com/sessiond/sessiond/session"
)

// Bounds of what drift keeps. A hostile or broken input cannot make it
// grow past them: per input MaxSeen values (more set Seen.More), per
// version MaxDriftValues distinct values (the rest counted as others), and
// MaxDriftVersions versions (the rest under OtherVersions).
const (
	MaxSeen          = 16
	MaxDriftValues   = 32
	MaxDriftVersions = 16
	maxDriftValueLen = 80
)

// OtherVersions is the version drift is counted under once
// MaxDriftVersions versions are kept.
const OtherVersions = "(other versions)"

// DriftItem is one thing an input showed that its reader did not
// understand: its kind and value ("line_type", "x").
type DriftItem struct {
	Kind  adapters.DriftKind
	Value string
}

// Seen is what one input (a transcript, a rollout, a registry entry)
// showed that its reader did not understand: a set of DriftItem, at most
// MaxSeen. The zero Seen is empty and costs nothing, so it lives in each
// input's state. Add never changes an array another Seen may share (a
// copy of a state taken before a read), so copies stay as they were.
type Seen struct {
	items []DriftItem // sorted by kind, then value; unique
	// More: values past MaxSeen were seen and not kept.
	More bool
}

// Add notes one value not understood. The value is cut to one short line.
func (s *Seen) Add(kind adapters.DriftKind, value string) {
	if !plainShort(value) {
		value = oneline.Cut(value, maxDriftValueLen)
	}
	it := DriftItem{kind, value}
	i, found := slices.BinarySearchFunc(s.items, it, compareItem)
	if found {
		return
	}
	if len(s.items) >= MaxSeen {
		s.More = true
		return
	}
	items := make([]DriftItem, 0, len(s.items)+1)
	items = append(items, s.items[:i]...)
	items = append(items, it)
	s.items = append(items, s.items[i:]...)
}

// plainShort reports whether v is already one short line of printable
// ASCII (as oneline.Cut would leave it): the common case, without a copy.
func plainShort(v string) bool {
	if len(v) > maxDriftValueLen || v == "" || v[0] == ' ' || v[len(v)-1] == ' ' {
		return false
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= ' ' && c != ' ' || c >= 0x7f || c == ' ' && v[i-1] == ' ' {
			return false
		}
	}
	return true
}

// Union adds what o holds.
func (s *Seen) Union(o Seen) {
	for _, it := range o.items {
		s.Add(it.Kind, it.Value)
	}
	s.More = s.More || o.More
}

// Empty reports whether nothing was seen.
func (s Seen) Empty() bool { return len(s.items) == 0 && !s.More }

// Items are the values, by kind then value. They must not be changed.
func (s Seen) Items() []DriftItem { return s.items }

// Equal reports whether s and o hold the same values.
func (s Seen) Equal(o Seen) bool { return s.More == o.More && slices.Equal(s.items, o.items) }

func compareItem(a, b DriftItem) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return cmp.Compare(a.Value, b.Value)
}

// Append writes s to a checkpoint entry.
func (s Seen) Append(w *wire.Writer) {
	w.Bool(s.More)
	w.Uvarint(uint64(len(s.items)))
	for _, it := range s.items {
		w.Str(string(it.Kind))
		w.Str(it.Value)
	}
}

// ReadSeen reads what Seen.Append wrote; garbage fails r (never a panic,
// never more than MaxSeen values).
func ReadSeen(r *wire.Reader) Seen {
	var s Seen
	s.More = r.Bool()
	n := r.Uvarint()
	if n > MaxSeen {
		r.Fail("more drift values than are kept")
		return Seen{}
	}
	for i := uint64(0); i < n && r.Err() == nil; i++ {
		kind, value := adapters.DriftKind(r.Str()), r.Str()
		s.Add(kind, value)
	}
	if r.Err() != nil || len(s.items) != int(n) {
		r.Fail("drift values not sorted and unique")
		return Seen{}
	}
	return s
}

// Problem is the format_drift issue of a session read from data that
// showed s, written by version of the agent: what was not understood, and
// that its activity may be approximate. ok is false when s is empty.
func (s Seen) Problem(agent, version string) (adapters.Issue, bool) {
	if s.Empty() {
		return adapters.Issue{}, false
	}
	var parts []string
	for i := 0; i < len(s.items); {
		j := i
		var vals []string
		for ; j < len(s.items) && s.items[j].Kind == s.items[i].Kind; j++ {
			vals = append(vals, s.items[j].Value)
		}
		parts = append(parts, fmt.Sprintf("%s %s", DriftNoun(s.items[i].Kind, len(vals)), strings.Join(vals, ", ")))
		i = j
	}
	if s.More {
		parts = append(parts, "and more")
	}
	v := version
	if v == "" {
		v = "(version not written)"
	}
	return adapters.Issue{
		Kind: session.ProblemFormatDrift, Key: version,
		Detail: fmt.Sprintf("%s %s wrote what sessiond does not understand: %s; activity may be approximate (liveness is the owner's process, unaffected)", agent, v, strings.Join(parts, "; ")),
	}, true
}

// DriftNoun names n values of a kind: "unknown line type(s)".
func DriftNoun(kind adapters.DriftKind, n int) string {
	var noun string
	switch kind {
	case adapters.DriftLineType:
		noun = "unknown line type"
	case adapters.DriftStatus:
		noun = "unknown status value"
	case adapters.DriftWaitingFor:
		noun = "unknown waitingFor value"
	case adapters.DriftHookEvent:
		noun = "unknown hook event"
	case adapters.DriftFieldType:
		noun = "field of another type"
		if n != 1 {
			return "fields of another type"
		}
		return noun
	default:
		noun = "unknown " + strings.ReplaceAll(string(kind), "_", " ")
	}
	if n != 1 {
		noun += "s"
	}
	return noun
}

// Drift is an adapter's tally of what its inputs showed that it did not
// understand, per agent version: each input's Seen counted once, however
// often the input is read. The adapter calls Set after each read of an
// input (a Seen that did not change costs a comparison) and Forget when
// the input is gone; Report is what Observation.Drift carries. Memory is
// bounded by the inputs that showed something and the kit's bounds, and a
// pass costs what changed: nothing is walked per input. Safe for
// concurrent use (hooks arrive beside passes).
type Drift struct {
	mu       sync.Mutex
	inputs   map[string]*driftInput
	versions map[string]*driftVersion
}

// driftInput is one input's share of the tally: where each of its values
// was counted, so that Forget takes back exactly what Set added.
type driftInput struct {
	version string // the version counted under (OtherVersions past the bound)
	noun    string
	seen    Seen
	asked   string // the version Set was given
	kept    []bool // per seen item: counted among the values (else others)
}

type bucketKey struct {
	kind adapters.DriftKind
	noun string
}

type driftVersion struct {
	values  int // distinct values kept, over every bucket
	buckets map[bucketKey]*driftBucket
}

type driftBucket struct {
	inputs int
	values map[string]int
	others int
}

// Set makes input's share what it showed now: seen, in data written by
// version, input being the sort of input ("transcript"). An empty seen
// forgets the input.
func (d *Drift) Set(input, noun, version string, seen Seen) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.inputs[input]
	if old != nil && old.asked == version && old.noun == noun && old.seen.Equal(seen) {
		return
	}
	if old != nil {
		d.remove(input, old)
	}
	if seen.Empty() {
		return
	}
	d.add(input, noun, version, seen)
}

// MaxNoted bounds the inputs Note keeps.
const MaxNoted = 256

// Note adds one value to what input showed, for inputs read once and
// never again (a hook's payload, by session): at most MaxNoted inputs are
// kept, a new one past them is not counted.
func (d *Drift) Note(input, noun, version string, kind adapters.DriftKind, value string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.inputs[input]
	if old == nil && len(d.inputs) >= MaxNoted {
		return
	}
	var seen Seen
	if old != nil {
		seen = old.seen
		d.remove(input, old)
	}
	seen.Add(kind, value)
	d.add(input, noun, version, seen)
}

// Forget takes input's share out: the input is gone.
func (d *Drift) Forget(input string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old := d.inputs[input]; old != nil {
		d.remove(input, old)
	}
}

// Seen returns what input showed, as last Set.
func (d *Drift) Seen(input string) Seen {
	d.mu.Lock()
	defer d.mu.Unlock()
	if in := d.inputs[input]; in != nil {
		return in.seen
	}
	return Seen{}
}

// Len is the number of inputs that showed something.
func (d *Drift) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.inputs)
}

func (d *Drift) add(input, noun, version string, seen Seen) {
	if d.inputs == nil {
		d.inputs, d.versions = map[string]*driftInput{}, map[string]*driftVersion{}
	}
	counted := version
	v := d.versions[counted]
	if v == nil && len(d.versions) >= MaxDriftVersions {
		counted = OtherVersions
		v = d.versions[counted]
	}
	if v == nil {
		v = &driftVersion{buckets: map[bucketKey]*driftBucket{}}
		d.versions[counted] = v
	}
	in := &driftInput{version: counted, asked: version, noun: noun, seen: seen, kept: make([]bool, len(seen.items))}
	var last *driftBucket
	for i, it := range seen.items {
		k := bucketKey{it.Kind, noun}
		b := v.buckets[k]
		if b == nil {
			b = &driftBucket{values: map[string]int{}}
			v.buckets[k] = b
		}
		if b != last {
			b.inputs++ // items are sorted by kind: once per kind
			last = b
		}
		switch n, ok := b.values[it.Value]; {
		case ok:
			b.values[it.Value] = n + 1
			in.kept[i] = true
		case v.values < MaxDriftValues:
			b.values[it.Value] = 1
			v.values++
			in.kept[i] = true
		default:
			b.others++
		}
	}
	d.inputs[input] = in
}

func (d *Drift) remove(input string, in *driftInput) {
	delete(d.inputs, input)
	v := d.versions[in.version]
	var last *driftBucket
	for i, it := range in.seen.items {
		k := bucketKey{it.Kind, in.noun}
		b := v.buckets[k]
		if b != last {
			b.inputs--
			last = b
		}
		if in.kept[i] {
			if b.values[it.Value]--; b.values[it.Value] == 0 {
				delete(b.values, it.Value)
				v.values--
			}
		} else {
			b.others--
		}
	}
	for _, it := range in.seen.items {
		if k := (bucketKey{it.Kind, in.noun}); v.buckets[k] != nil && v.buckets[k].inputs == 0 {
			delete(v.buckets, k)
		}
	}
	if len(v.buckets) == 0 {
		delete(d.versions, in.version)
	}
}

// Keep forgets every input keep rejects (those gone), walking only the
// inputs that showed something.
func (d *Drift) Keep(keep func(input string) bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for input, in := range d.inputs {
		if !keep(input) {
			d.remove(input, in)
		}
	}
}

// Report is the tally as Observation.Drift carries it: by version, kind
// and sort of input; values most inputs first. Reports of several
// tallies (an adapter's transcripts and its hooks) go in one list.
func (d *Drift) Report(more ...*Drift) []adapters.Drift {
	out := d.report()
	for _, m := range more {
		out = append(out, m.report()...)
	}
	slices.SortFunc(out, func(x, y adapters.Drift) int {
		return cmp.Or(cmp.Compare(x.Version, y.Version), cmp.Compare(x.Kind, y.Kind), cmp.Compare(x.Input, y.Input))
	})
	return out
}

func (d *Drift) report() []adapters.Drift {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []adapters.Drift
	for version, v := range d.versions {
		for k, b := range v.buckets {
			e := adapters.Drift{Version: version, Kind: k.kind, Input: k.noun, Inputs: b.inputs, Others: b.others}
			for val, n := range b.values {
				e.Values = append(e.Values, adapters.DriftValue{Value: val, Inputs: n})
			}
			slices.SortFunc(e.Values, func(x, y adapters.DriftValue) int {
				if c := cmp.Compare(y.Inputs, x.Inputs); c != 0 {
					return c
				}
				return cmp.Compare(x.Value, y.Value)
			})
			out = append(out, e)
		}
	}
	return out
}
