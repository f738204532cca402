package hookinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// A document is a JSON file read for editing: its bytes and where each
// value lies in them. An edit rebuilds only the containers it changes,
// and those from their own bytes: every value, separator and blank it
// does not touch is written back as it was read (integers beyond 2^53,
// 1.0, 1e400, escapes, key order, tabs), so a document rebuilt without
// a change is the same bytes.
type document struct {
	src  []byte
	root *node
	// unit is one level of indentation ("" = the file is on one line),
	// nl its line end ("\n" or "\r\n"); colon and comma are what follows
	// a key and an item on one line.
	unit, nl, colon, comma string
}

// A node is one value of the document: src[start:end].
type node struct {
	start, end int
	kind       byte // '{', '[', '"', or 0 for a number, true, false, null
	// keys are an object's member names and kstart where each member
	// (its key's quote) starts; kids are its values, or an array's items.
	keys   []string
	kstart []int
	kids   []*node
}

// parseDocument reads src, which must hold one JSON object; blank is {}.
func parseDocument(src []byte) (*document, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		src = []byte("{}\n")
	}
	if !json.Valid(src) {
		var v any
		if err := json.Unmarshal(src, &v); err != nil {
			return nil, err
		}
		return nil, errors.New("not JSON")
	}
	p := parser{src: src}
	root := p.value()
	if root.kind != '{' {
		return nil, errors.New("its top level is not an object")
	}
	d := &document{src: src, root: root, unit: "  ", nl: "\n", colon: ": ", comma: ", "}
	if len(root.kids) > 0 {
		// The file's own layout, from its first member: the blank
		// before it, and what follows its key.
		lead := string(src[root.start+1 : root.kstart[0]])
		d.unit = ""
		if i := strings.LastIndexByte(lead, '\n'); i >= 0 {
			d.unit = lead[i+1:]
			if strings.HasSuffix(lead[:i], "\r") {
				d.nl = "\r\n"
			}
		}
		key := parser{src: src, i: root.kstart[0]}
		key.str()
		if string(src[key.i:root.kids[0].start]) == ":" {
			d.colon, d.comma = ":", ","
		}
	}
	return d, nil
}

// parser walks a document json.Valid has accepted.
type parser struct {
	src []byte
	i   int
}

func (p *parser) blank() {
	for p.i < len(p.src) && strings.IndexByte(" \t\r\n", p.src[p.i]) >= 0 {
		p.i++
	}
}

func (p *parser) value() *node {
	p.blank()
	n := &node{start: p.i}
	switch c := p.src[p.i]; c {
	case '{', '[':
		n.kind = c
		p.i++
		p.blank()
		for p.src[p.i] != c+2 { // '}' and ']' follow '{' and '[' by 2
			if c == '{' {
				ks := p.i
				p.str()
				var key string
				_ = json.Unmarshal(p.src[ks:p.i], &key)
				n.keys, n.kstart = append(n.keys, key), append(n.kstart, ks)
				p.blank()
				p.i++ // ':'
			}
			n.kids = append(n.kids, p.value())
			p.blank()
			if p.src[p.i] == ',' {
				p.i++
				p.blank()
			}
		}
		p.i++
	case '"':
		n.kind = c
		p.str()
	default:
		for p.i < len(p.src) && strings.IndexByte(",}] \t\r\n", p.src[p.i]) < 0 {
			p.i++
		}
	}
	n.end = p.i
	return n
}

func (p *parser) str() {
	p.i++
	for p.src[p.i] != '"' {
		if p.src[p.i] == '\\' {
			p.i++
		}
		p.i++
	}
	p.i++
}

// member returns the index of the object's member named key, the last
// one as JavaScript's JSON.parse takes it, or -1; and how many it has.
func (n *node) member(key string) (int, int) {
	at, count := -1, 0
	for i, k := range n.keys {
		if k == key {
			at, count = i, count+1
		}
	}
	return at, count
}

// str is a string node's value ("" for any other node).
func (d *document) str(n *node) string {
	var s string
	if n.kind == '"' {
		_ = json.Unmarshal(d.src[n.start:n.end], &s)
	}
	return s
}

func (d *document) text(n *node) string { return string(d.src[n.start:n.end]) }

// itemStart is where a container's i-th item starts: a member's key, or
// an array's value.
func (d *document) itemStart(n *node, i int) int {
	if n.kind == '{' {
		return n.kstart[i]
	}
	return n.kids[i].start
}

// splice is n's text with its child's replaced by text.
func (d *document) splice(n, child *node, text string) string {
	return string(d.src[n.start:child.start]) + text + string(d.src[child.end:n.end])
}

// An item is what a rebuilt container holds: one of its own (orig, its
// text maybe edited), or a new one (orig -1) of value val, and key for
// an object, laid out as the container lays out its items.
type item struct {
	orig int
	text string
	key  string
	val  any
}

// keep is the container's i-th item as it is.
func (d *document) keep(n *node, i int) item {
	return item{orig: i, text: string(d.src[d.itemStart(n, i):n.kids[i].end])}
}

// rebuild is the container n holding items, in that order, its own in
// the order they had. Its own keep the blank and comma that came before
// them; new ones follow the one before the last item (else its first
// item's), so they sit as the others do: one a line at their
// indentation, or on the same line.
func (d *document) rebuild(n *node, items []item) string {
	if len(items) == 0 && len(n.kids) == 0 {
		return d.text(n)
	}
	open, close := d.src[n.start], d.src[n.end-1]
	var b strings.Builder
	b.WriteByte(open)
	if len(items) == 0 {
		b.WriteByte(close)
		return b.String()
	}
	var lead, sep, trail string
	if k := len(n.kids); k > 0 {
		lead = string(d.src[n.start+1 : d.itemStart(n, 0)])
		trail = string(d.src[n.kids[k-1].end : n.end-1])
		sep = "," + lead
		if lead == "" {
			sep = d.comma
		}
		if k > 1 {
			sep = string(d.src[n.kids[k-2].end:d.itemStart(n, k-1)])
		}
	} else if d.unit != "" {
		// An empty container in a file laid out one item a line: its
		// items a level deeper than the line it is on.
		outer := d.indentAt(n.start)
		lead, sep, trail = d.nl+outer+d.unit, ","+d.nl+outer+d.unit, d.nl+outer
	} else {
		sep = d.comma
	}
	for j, it := range items {
		before := sep
		switch {
		case j == 0:
			before = lead
		case it.orig > 0:
			before = string(d.src[n.kids[it.orig-1].end:d.itemStart(n, it.orig)])
		}
		b.WriteString(before)
		if it.orig >= 0 {
			b.WriteString(it.text)
			continue
		}
		// A new item on a line of its own is laid out over lines at
		// that line's indentation (its blanks: a file that puts each
		// comma first on the line has it there too); one after another
		// on a line, on one.
		indent, lines := "", false
		if i := strings.LastIndexByte(before, '\n'); i >= 0 && d.unit != "" {
			rest := before[i+1:]
			indent, lines = rest[:len(rest)-len(strings.TrimLeft(rest, " \t"))], true
		}
		if n.kind == '{' {
			b.WriteString(quote(it.key) + d.colon)
		}
		b.WriteString(d.render(it.val, indent, lines))
	}
	b.WriteString(trail)
	b.WriteByte(close)
	return b.String()
}

// indentAt is the blank that begins the line holding src[pos].
func (d *document) indentAt(pos int) string {
	start := bytes.LastIndexByte(d.src[:pos], '\n') + 1
	end := start
	for end < pos && (d.src[end] == ' ' || d.src[end] == '\t') {
		end++
	}
	return string(d.src[start:end])
}

// An object is a new JSON object, its members in order.
type object []member

type member struct {
	key string
	val any
}

// render lays out a new value (an object, []any, a string or an int):
// over lines, its items one level deeper than indent, or on one line.
func (d *document) render(v any, indent string, lines bool) string {
	var items []string
	var open, close string
	switch v := v.(type) {
	case object:
		open, close = "{", "}"
		for _, m := range v {
			items = append(items, quote(m.key)+d.colon+d.render(m.val, indent+d.unit, lines))
		}
	case []any:
		open, close = "[", "]"
		for _, x := range v {
			items = append(items, d.render(x, indent+d.unit, lines))
		}
	case string:
		return quote(v)
	case int:
		return strconv.Itoa(v)
	case bool:
		return strconv.FormatBool(v)
	default:
		panic(fmt.Sprintf("hookinstall: render of a %T", v))
	}
	if len(items) == 0 {
		return open + close
	}
	if !lines {
		return open + strings.Join(items, d.comma) + close
	}
	inner := d.nl + indent + d.unit
	return open + inner + strings.Join(items, ","+inner) + d.nl + indent + close
}

// quote is s as a JSON string, with <, > and & as they are.
func quote(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
