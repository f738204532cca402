package jsonscan

// Fields are the JSON names of a struct's fields, for a decoder that
// reads a line itself when it can and leaves it to encoding/json when it
// cannot say what encoding/json would make of it.
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

// Once is Match for a decoder that reads each field once: a field seen
// before in the same object (a bit of seen, which Once sets) fails, as
// encoding/json would decode a duplicate into what the first one left.
func (f Fields) Once(b []byte, k Str, seen *uint64) (int, bool) {
	i, ok := f.Match(b, k)
	if !ok || i < 0 {
		return i, ok
	}
	if *seen&(1<<i) != 0 {
		return i, false
	}
	*seen |= 1 << i
	return i, true
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
