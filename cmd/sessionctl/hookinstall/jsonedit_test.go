package hookinstall

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

// FuzzEdit holds the editor to three things on any JSON object: a
// container rebuilt with all it holds is its own bytes; an install's
// result is JSON and the document a plain decode-edit-encode would give
// (numbers compared as written); taking sessiond's hooks out again gives
// the document taken out of the original.
func FuzzEdit(f *testing.F) {
	for _, s := range []string{
		userSettings, "{}", "", " {\n}\n", `{"a":[1,2.0,1e400],"hooks":{}}`,
		`{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "/x/sessionctl --socket /s hook claude"}, {"type": "command", "command": "mine"}]}], "PreToolUse": []}}`,
		"{\n  \"hooks\": {\n    \"Stop\": [\n      {\"matcher\": \"\", \"hooks\": [\n        {\"command\": \"sessionctl hook claude\"}\n      ]},\n      {\"hooks\": \"odd\"}\n    ],\n    \"X\": {}\n  }\n}",
		`{"hooks":{"Notification":[{"hooks":[{"command":"sessionctl hook claude"}]}],"Other":[{"hooks":[{"command":"sessionctl hook claude"}]}]}}`,
		`{"hooks":{"Stop":[{"hooks":[]},7,null,{"hooks":[{"command":7}]}]}}`,
	} {
		f.Add([]byte(s))
	}
	command := Claude.Command("/bin/sessionctl", "/s")
	f.Fuzz(func(t *testing.T, src []byte) {
		d, err := parseDocument(src)
		if err != nil {
			return
		}
		var walk func(n *node)
		walk = func(n *node) {
			if n.kind != '{' && n.kind != '[' {
				return
			}
			var all []item
			for i, k := range n.kids {
				all = append(all, d.keep(n, i))
				walk(k)
			}
			if got := d.rebuild(n, all); got != d.text(n) {
				t.Fatalf("rebuilt unchanged:\n%q\nwant its own bytes:\n%q", got, d.text(n))
			}
		}
		walk(d.root)

		orig, err := decodeExact(d.src)
		if err != nil {
			t.Fatal(err)
		}
		out, found, err := Claude.edit("f.json", d, command)
		if err != nil {
			return // refused: a key twice, an event that is not an array
		}
		if !json.Valid(out) {
			t.Fatalf("install of:\n%s\ngave what is not JSON:\n%s", d.src, out)
		}
		got, _ := decodeExact(out)
		want, wantFound := modelEdit(Claude, orig, command)
		if !reflect.DeepEqual(got, want) || found != wantFound {
			t.Fatalf("install of:\n%s\ngave (%d taken out):\n%s\nwant the document (%d taken out):\n%v", d.src, found, out, wantFound, want)
		}

		d2, err := parseDocument(out)
		if err != nil {
			t.Fatalf("install's result does not parse (%v):\n%s", err, out)
		}
		stripped, n, err := Claude.edit("f.json", d2, "")
		if err != nil || n < len(Claude.Events) {
			t.Fatalf("taking out of:\n%s\n%d hooks, %v", out, n, err)
		}
		again, _ := decodeExact(d.src) // a fresh copy: modelEdit edits in place
		wantStripped, _ := modelEdit(Claude, again, "")
		// (Up to what an install cannot tell from its own: an event of
		// the agent's that was an empty list, a "hooks" that was empty.)
		if gotStripped, _ := decodeExact(stripped); !reflect.DeepEqual(withoutEmpty(gotStripped), withoutEmpty(wantStripped)) {
			t.Fatalf("install then uninstall of:\n%s\ngave:\n%s\nwant the document:\n%v", d.src, stripped, wantStripped)
		}
	})
}

// modelEdit is edit on a decoded document, the plain way: sessiond's
// hooks out of every event (an event it empties goes, and "hooks" if it
// empties that on an uninstall), then a group of command at the end of
// each of the agent's events. It edits v in place.
func modelEdit(a Agent, v any, command string) (any, int) {
	doc := v.(map[string]any)
	hooks, had := doc["hooks"].(map[string]any)
	if !had {
		hooks = map[string]any{}
	}
	n := 0
	for ev, val := range hooks {
		list, ok := val.([]any)
		if !ok {
			continue
		}
		var keep []any
		removed := 0
		for _, g := range list {
			group, ok := g.(map[string]any)
			inner, ok2 := group["hooks"].([]any)
			if !ok || !ok2 {
				keep = append(keep, g)
				continue
			}
			var rest []any
			for _, h := range inner {
				if hm, ok := h.(map[string]any); ok {
					if c, _ := hm["command"].(string); a.ours(c) {
						continue
					}
				}
				rest = append(rest, h)
			}
			switch {
			case len(rest) == len(inner):
				keep = append(keep, g)
			case len(rest) > 0:
				group["hooks"] = rest
				keep = append(keep, group)
			}
			removed += len(inner) - len(rest)
		}
		n += removed
		ours := command != "" && slices.Contains(a.Events, ev)
		if ours {
			keep = append(keep, modelGroup(a, command, ev))
		}
		switch {
		case removed == 0 && !ours:
		case len(keep) == 0:
			delete(hooks, ev)
		default:
			hooks[ev] = keep
		}
	}
	if command != "" {
		for _, ev := range a.Events {
			if _, ok := hooks[ev]; !ok {
				hooks[ev] = []any{modelGroup(a, command, ev)}
			}
		}
	}
	switch {
	case had && len(hooks) == 0 && n > 0 && command == "":
		delete(doc, "hooks")
	case had || command != "":
		doc["hooks"] = hooks
	}
	return doc, n
}

func modelGroup(a Agent, command, ev string) any {
	g := map[string]any{"hooks": []any{map[string]any{"type": "command", "command": command, "timeout": json.Number(strconv.Itoa(a.Timeout))}}}
	if a.Matched[ev] {
		g["matcher"] = "*"
	}
	return g
}

// withoutEmpty is v without the agent's events that are empty lists, and
// without "hooks" if that leaves it empty.
func withoutEmpty(v any) any {
	doc := v.(map[string]any)
	hooks, ok := doc["hooks"].(map[string]any)
	if !ok {
		return doc
	}
	for ev, val := range hooks {
		if l, ok := val.([]any); ok && len(l) == 0 && slices.Contains(Claude.Events, ev) {
			delete(hooks, ev)
		}
	}
	if len(hooks) == 0 {
		delete(doc, "hooks")
	}
	return doc
}
