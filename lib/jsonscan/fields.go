package jsonscan

// Fields are the JSON names of a struct's fields (64 at the most), for
// a decoder that reads a line itself when it can and leaves it to
// encoding/json when it cannot say what encoding/json would make of it.
type Fields []string

// Match finds the field the key k of b names. It returns its index, or -1
// for a key that names no field in any case, and ok false for a key
// encoding/json might match otherwise than byte for byte: another ASCII
// case of a name, an escape, a byte >= 0x80 (Unicode folding).
func (f Fields) Match(b []byte, k Str) (int, bool) {
	if k.Esc || k.High {
		return -1, false
	}
	key := b[k.Start:k.End]
	for i, name := range f {
		if string(key) == name {
			return i, true
		}
	}
	for _, name := range f {
		if asciiEqualFold(key, name) {
			return -1, false
		}
	}
	return -1, true
}

// Object walks the object at b[i] == '{' (depth containers down) for a
// decoder of these fields: read is given each member a field names, by
// the field's index, and where its value starts, and returns where the
// value ends, or false to stop; any other member is checked and skipped.
// A key Match cannot answer for, or a field named twice (encoding/json
// would decode the second into what the first left), stops the walk:
// the decoder leaves such a line to encoding/json.
func (f Fields) Object(b []byte, i, depth int, read func(field, v int) (int, bool)) (int, bool) {
	var seen uint64
	return Object(b, i, depth, func(k Str, v int) (int, bool) {
		n, ok := f.Match(b, k)
		switch {
		case !ok:
			return v, false
		case n < 0:
			return Value(b, v, depth+1)
		case seen&(1<<n) != 0:
			return v, false
		}
		seen |= 1 << n
		return read(n, v)
	})
}

// Object walks the object at b[i] == '{', at depth enclosing containers:
// member is given each key and where its value starts, and returns where
// the value ends, or false to stop. Object reports where the object ends,
// false when it is not JSON or member stopped.
func Object(b []byte, i, depth int, member func(k Str, v int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '{' || depth+1 > MaxDepth {
		return i, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		k, v, ok := Key(b, i)
		if !ok {
			return v, false
		}
		if i, ok = member(k, v); !ok {
			return i, false
		}
		if i, ok = NextMember(b, i, '}'); !ok || b[i-1] == '}' {
			return i, ok
		}
	}
}

// Array walks the array at b[i] == '[' as Object walks an object.
func Array(b []byte, i, depth int, elem func(v int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '[' || depth+1 > MaxDepth {
		return i, false
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok bool
		if i, ok = elem(i); !ok {
			return i, false
		}
		if i, ok = NextMember(b, i, ']'); !ok || b[i-1] == ']' {
			return i, ok
		}
	}
}

// PlainString reads the string at b[i] for a string field: its text and
// where it ends; ok is false when the value is not a string, or not JSON.
func PlainString(b []byte, i int) (string, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	s, end, ok := String(b, i)
	if !ok {
		return "", end, false
	}
	return Text(b, s), end, true
}

// StringInto reads the string at b[i] into *dst for a string field, and
// returns where it ends; ok is false when the value is not a string, or
// not JSON.
func StringInto(dst *string, b []byte, i int) (int, bool) {
	s, end, ok := PlainString(b, i)
	if ok {
		*dst = s
	}
	return end, ok
}
