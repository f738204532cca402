package jsonscan

import "sync"

// Pruner names the object members Prune leaves out, by key.
//
// Why: an agent's chat line is mostly a tool's output, which no fold
// reads, and encoding/json checks and skips those bytes at ~50 MB/s a
// core; Prune checks them eight bytes at a time and hands encoding/json
// the rest. The fold's result is the same as long as no dropped key is
// one encoding/json would match to a field of the struct decoded (it
// matches case-insensitively) nor one the fold reads out of a map or a
// raw value: what Keep is for.
type Pruner struct {
	// Drop are the keys whose members are left out, at any depth.
	Drop []string
	// Keep are the keys whose values are checked and left whole, drops
	// inside them too: a value kept raw (a call's arguments shown as
	// they are), or decoded into a map or an interface, where every key
	// is read or a number that does not fit a float64 is an error.
	Keep []string
}

// Prune checks that b is one JSON value, as Valid does, and returns it
// without the members of dropped keys: appended to dst[:0], or b itself
// when it has none. ok is false (and out nil) for text Valid rejects.
//
// Keys are matched as a decoder might read them, erring on the side of
// keeping: a Drop key only byte for byte, a Keep key in any ASCII case
// (encoding/json matches a struct field so), and a key with an escape or
// a byte >= 0x80 (which may decode or fold to any name) as a Keep key.
func (p *Pruner) Prune(dst, b []byte) (out []byte, ok bool) {
	w := walk{b: b, p: p}
	i := SkipSpace(b, 0)
	end, ok := w.value(i, 0)
	if !ok || SkipSpace(b, end) != len(b) {
		return nil, false
	}
	if len(w.cuts) == 0 {
		return b, true
	}
	out, from := dst[:0], 0
	for k := 0; k < len(w.cuts); k += 2 {
		out = append(out, b[from:w.cuts[k]]...)
		from = w.cuts[k+1]
	}
	return append(out, b[from:]...), true
}

// walk is one Prune: the text and the ranges to leave out, in order
// (start, end pairs).
type walk struct {
	b    []byte
	p    *Pruner
	cuts []int
}

func (w *walk) value(i, depth int) (int, bool) {
	if i < len(w.b) {
		switch w.b[i] {
		case '{':
			return w.object(i, depth)
		case '[':
			return w.array(i, depth)
		}
	}
	return Value(w.b, i, depth)
}

// object walks the object at b[i] == '{'; depth is how many containers
// enclose it.
func (w *walk) object(i, depth int) (int, bool) {
	b := w.b
	if depth+1 > MaxDepth {
		return i, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	// kept: a member before this one is left in; comma: where the comma
	// before this member is.
	kept, comma := false, -1
	for {
		start := i
		k, j, ok := Key(b, i)
		if !ok {
			return j, false
		}
		drop, keep := w.kind(k)
		switch {
		case drop, keep:
			i, ok = Value(b, j, depth+1)
		default:
			i, ok = w.value(j, depth+1)
		}
		if !ok {
			return i, false
		}
		end := i
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		closed := false
		nextComma := -1
		switch b[i] {
		case ',':
			nextComma = i
			i = SkipSpace(b, i+1)
			if i >= len(b) || b[i] == '}' {
				return i, false
			}
		case '}':
			closed = true
			i++
		default:
			return i, false
		}
		switch {
		case !drop:
			kept = true
		case kept:
			// ", member" goes: the comma before it and the member.
			w.cuts = append(w.cuts, comma, end)
		case closed:
			w.cuts = append(w.cuts, start, end)
		default:
			// The first member left so far: it goes with the comma and
			// space after it.
			w.cuts = append(w.cuts, start, i)
		}
		if closed {
			return i, true
		}
		comma = nextComma
	}
}

// array walks the array at b[i] == '['.
func (w *walk) array(i, depth int) (int, bool) {
	return Array(w.b, i, depth, func(v int) (int, bool) { return w.value(v, depth+1) })
}

// kind says whether the member of key k is dropped, or kept whole.
func (w *walk) kind(k Str) (drop, keep bool) {
	if k.Esc || k.High {
		return false, true
	}
	key := w.b[k.Start:k.End]
	for _, s := range w.p.Keep {
		if asciiEqualFold(key, s) {
			return false, true
		}
	}
	for _, s := range w.p.Drop {
		if string(key) == s {
			return true, false
		}
	}
	return false, false
}

// asciiEqualFold reports whether a and b, both ASCII, are equal in any
// case.
func asciiEqualFold(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range len(a) {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// Use prunes b as Prune does, into a buffer of a pool, and hands what is
// left to use, which must not keep it past its return. It reports false
// (without calling use) for text Valid rejects. The agents' folds prune
// every line of a first start; a pooled buffer makes that no allocation.
func (p *Pruner) Use(b []byte, use func(pruned []byte)) bool {
	buf := pruneBufs.Get().(*[]byte)
	defer pruneBufs.Put(buf)
	pruned, ok := p.Prune(*buf, b)
	if !ok {
		return false
	}
	if len(pruned) > 0 && &pruned[0] != &b[0] && cap(pruned) <= maxPooled {
		*buf = pruned[:0]
	}
	use(pruned)
	return true
}

// maxPooled bounds a buffer kept in the pool: a line of megabytes left
// after pruning is rare, and its buffer is not kept.
const maxPooled = 1 << 20

var pruneBufs = sync.Pool{New: func() any { return new([]byte) }}
