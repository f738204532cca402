package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestGenerated: every target's json_gen.go is what jsongen writes now, so
// a field added to a generated type and not to its file fails here (and
// in the package's own test against json.Marshal).
func TestGenerated(t *testing.T) {
	root, modPath := module(t)
	for _, tg := range targets {
		want, err := generate(tg)
		if err != nil {
			t.Fatal(err)
		}
		dir := strings.TrimPrefix(strings.TrimPrefix(tg.roots[0].PkgPath(), modPath), "/")
		path := filepath.Join(root, dir, "json_gen.go")
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what jsongen writes now: run go generate ./%s", path, dir)
		}
	}
}

// module returns the module's root directory and path.
func module(t *testing.T) (root, path string) {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil {
			for l := range strings.Lines(string(b)) {
				if p, ok := strings.CutPrefix(l, "module "); ok {
					return dir, strings.TrimSpace(p)
				}
			}
			t.Fatalf("no module line in %s/go.mod", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

type (
	embedded     struct{ A string }
	withEmbedded struct {
		embedded
	}
	withFloat struct {
		F float64 `json:"f"`
	}
	withBytes struct {
		B []byte `json:"b"`
	}
	withOption struct {
		N int `json:"n,string"`
	}
	withOmitZero struct {
		N int `json:"n,omitzero"`
	}
	withDuplicate struct {
		A string `json:"B"`
		B string
	}
	withEscapedName struct {
		A string `json:"a<b"`
	}
	withNumber struct {
		D json.Number `json:"d"`
	}
	withMarshaler struct {
		T marshalsText
	}
	withOmittedMarshaler struct {
		T marshalsText `json:"t,omitempty"`
	}
	withSelf struct {
		Next *withSelf `json:"next"`
		N    int       `json:"n"`
	}
	marshalsText     string
	withTextPointer  struct{ P *marshalsText }
	withJSONMarshal  struct{ R json.RawMessage }
	withUnexported   struct{ a, B string }
	withTimeAndSkips struct {
		T time.Time `json:"t,omitempty"`
		S string    `json:"-"`
		P *time.Time
	}
)

func (marshalsText) MarshalText() ([]byte, error) { return nil, nil }

// TestGenerateRefuses: what the generated code would not encode as
// encoding/json does is an error, not a file.
func TestGenerateRefuses(t *testing.T) {
	for _, typ := range []reflect.Type{
		reflect.TypeFor[withEmbedded](), reflect.TypeFor[withFloat](), reflect.TypeFor[withBytes](),
		reflect.TypeFor[withOption](), reflect.TypeFor[withOmitZero](), reflect.TypeFor[withDuplicate](),
		reflect.TypeFor[withEscapedName](), reflect.TypeFor[withNumber](), reflect.TypeFor[withMarshaler](), reflect.TypeFor[withOmittedMarshaler](), reflect.TypeFor[withTextPointer](),
		reflect.TypeFor[withJSONMarshal](),
	} {
		if src, err := generate(target{"main", []reflect.Type{typ}}); err == nil {
			t.Errorf("%v: generated\n%s", typ, src)
		}
	}
	// And what it does encode: a time with omitempty is never omitted, a
	// "-" or unexported field is, a field with no tag has its Go name; a
	// type that holds itself is one appender.
	src, err := generate(target{"main", []reflect.Type{reflect.TypeFor[withTimeAndSkips](), reflect.TypeFor[withUnexported](), reflect.TypeFor[withSelf]()}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`jsonenc.Key(b, "t")`, `jsonenc.TimePtr(b, w.P)`, `jsonenc.Key(b, "P")`, `jsonenc.Key(b, "B")`, `b = w.Next.AppendJSON(b)`} {
		if !strings.Contains(string(src), want) {
			t.Errorf("no %s in\n%s", want, src)
		}
	}
	for _, not := range []string{`"S"`, `"a"`} {
		if strings.Contains(string(src), not) {
			t.Errorf("%s in\n%s", not, src)
		}
	}
}
