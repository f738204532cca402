package pi

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

// The builders below write lines as Pi 0.73.1 does (docs/agents/pi.md).

var t0 = time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)

func ts(sec int) string {
	return t0.Add(time.Duration(sec) * time.Second).Format("2006-01-02T15:04:05.000Z")
}

func jsonLine(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b) + "\n"
}

func hdr(id, cwd string) string {
	return jsonLine(map[string]any{"type": "session", "version": 3, "id": id, "timestamp": ts(0), "cwd": cwd})
}

var entrySeq int

func entry(sec int, typ string, fields map[string]any) string {
	entrySeq++
	m := map[string]any{"type": typ, "id": fmt.Sprintf("%08x", entrySeq), "parentId": nil, "timestamp": ts(sec)}
	for k, v := range fields {
		m[k] = v
	}
	return jsonLine(m)
}

func msg(sec int, m map[string]any) string {
	m["timestamp"] = t0.Add(time.Duration(sec) * time.Second).UnixMilli()
	return entry(sec, "message", map[string]any{"message": m})
}

func user(sec int, text string) string {
	return msg(sec, map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}})
}

func say(sec int, text, stop string) string {
	return msg(sec, map[string]any{"role": "assistant", "content": []any{map[string]any{"type": "text", "text": text}},
		"api": "openai-completions", "provider": "fake", "model": "m1", "stopReason": stop})
}

func callBash(sec int, id, command string) string {
	return msg(sec, map[string]any{"role": "assistant", "content": []any{
		map[string]any{"type": "toolCall", "id": id, "name": "bash", "arguments": map[string]any{"command": command}}},
		"api": "openai-completions", "provider": "fake", "model": "m1", "stopReason": "toolUse"})
}

func result(sec int, id, out string) string {
	return msg(sec, map[string]any{"role": "toolResult", "toolCallId": id, "toolName": "bash",
		"content": []any{map[string]any{"type": "text", "text": out}}, "isError": false})
}

func modelChange(sec int) string {
	return entry(sec, "model_change", map[string]any{"provider": "fake", "modelId": "m1"})
}

// sessionPath is where Pi keeps a session of cwd in root.
func sessionPath(root, cwd, id string) string {
	return filepath.Join(root, "sessions", dirName(cwd), "2026-11-28T01-00-00-000Z_"+id+".jsonl")
}

func writeSession(t testing.TB, root, cwd, id string, lines ...string) string {
	t.Helper()
	p := sessionPath(root, cwd, id)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	body.WriteString(hdr(id, cwd))
	for _, l := range lines {
		body.WriteString(l)
	}
	if err := os.WriteFile(p, []byte(body.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func appendTo(t testing.TB, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, l := range lines {
		if _, err := f.WriteString(l); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeHost answers open files and start times from maps.
type fakeHost struct {
	open  map[int][]string
	start map[int]time.Time
}

func (h *fakeHost) OpenFiles(pid int) (proc.Descriptors, error) {
	if fs, ok := h.open[pid]; ok {
		return proc.Descriptors{Files: fs}, nil
	}
	return proc.Descriptors{}, os.ErrPermission
}

func (h *fakeHost) StartTime(id proc.Identity) (time.Time, error) {
	if t, ok := h.start[id.PID]; ok {
		return t, nil
	}
	return time.Time{}, os.ErrNotExist
}

func newAdapter(root string) *Adapter {
	return New(Config{Roots: []string{root}, Host: &fakeHost{}})
}

// discover runs a pass and returns its sessions by upstream id.
func discover(t testing.TB, a *Adapter, snap *proc.Snapshot) (map[string]adapters.Observed, adapters.Observation) {
	t.Helper()
	obs, err := a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]adapters.Observed{}
	for _, o := range obs.All() {
		out[o.UpstreamID] = o
	}
	return out, obs
}

const (
	id1 = "019ac0de-0000-7000-8000-000000000001"
	id2 = "019ac0de-0000-7000-8000-000000000002"
	id3 = "019ac0de-0000-7000-8000-000000000003"
	id4 = "019ac0de-0000-7000-8000-000000000004"
)

func uidOf() int { return os.Getuid() }
