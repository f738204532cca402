// Package jsonenctest fills values with random contents, every field by
// reflection, so that a test can hold a generated JSON appender to
// json.Marshal over fields it does not name: a field added to a struct and
// not to its appender makes the two differ.
package jsonenctest

import (
	"math/rand/v2"
	"reflect"
	"time"
)

// strings are the pieces random strings are made of: each case encoding/json
// escapes or rewrites, and plain text.
var pieces = []string{
	"", "a", "session", "/home/u/src/proj", "<b>&amp;</b>", `"quoted\"`, `back\slash`,
	"\n\t\r\b\f", "\x00\x01\x1f\x7f", "é", "日本語", "😀", "\u2028\u2029",
	"\xff", "\xe2\x80", "\xed\xa0\x80", "%1", "tail\n",
}

var zones = []*time.Location{time.UTC, time.FixedZone("IST", 5*3600+1800), time.FixedZone("", -7*3600), time.Local}

// Fill sets every field reachable from v (a pointer) to random contents:
// nil or set pointers, nil, empty or short slices, strings with escapes,
// times with and without nanoseconds in several zones. With broken, a time
// may be one json.Marshal refuses (year 10000).
func Fill(rng *rand.Rand, v any, broken bool) {
	fill(rng, reflect.ValueOf(v).Elem(), broken)
}

var timeType = reflect.TypeFor[time.Time]()

func fill(rng *rand.Rand, v reflect.Value, broken bool) {
	if v.Type() == timeType {
		v.Set(reflect.ValueOf(randTime(rng, broken)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(randString(rng))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64, reflect.Int32:
		switch rng.IntN(3) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(-rng.Int64N(1 << 40))
		default:
			v.SetInt(rng.Int64N(1 << 31))
		}
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		if rng.IntN(3) == 0 {
			v.SetUint(0)
		} else {
			v.SetUint(rng.Uint64() >> (rng.UintN(64)))
		}
	case reflect.Pointer:
		if rng.IntN(3) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		fill(rng, p.Elem(), broken)
		v.Set(p)
	case reflect.Slice:
		switch n := rng.IntN(5); n {
		case 0:
			v.SetZero()
		default:
			s := reflect.MakeSlice(v.Type(), n-1, n-1)
			for i := range n - 1 {
				fill(rng, s.Index(i), broken)
			}
			v.Set(s)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(rng, v.Field(i), broken)
			}
		}
	default:
		panic("jsonenctest: no filler for " + v.Type().String())
	}
}

func randString(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	s := ""
	for range 1 + rng.IntN(4) {
		s += pieces[rng.IntN(len(pieces))]
	}
	return s
}

func randTime(rng *rand.Rand, broken bool) time.Time {
	if rng.IntN(6) == 0 {
		return time.Time{}
	}
	t := time.Unix(rng.Int64N(4e9), 0)
	if rng.IntN(2) == 0 {
		t = t.Add(time.Duration(rng.Int64N(1e9)))
	}
	if broken && rng.IntN(20) == 0 {
		t = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return t.In(zones[rng.IntN(len(zones))])
}
