package codex

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// What Codex 0.171.0 writes that 0.169.0 did not: item types this reader
// does not know, and compressed rollouts (docs/agents/codex.md).

func observeAll(t *testing.T, a *Adapter) adapters.Observation {
	t.Helper()
	snap, err := proc.NewHost().Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	obs, err := a.Discover(context.Background(), snap)
	if err != nil {
		t.Fatal(err)
	}
	return obs
}

func sessionOf(obs adapters.Observation, id string) (adapters.Observed, bool) {
	for _, o := range obs.All() {
		if o.UpstreamID == id {
			return o, true
		}
	}
	return adapters.Observed{}, false
}

// unknownItems are items of types the reader does not know, as 0.171.0
// adds them: id_allocation (named in the 0.171.0 binary; its payload's
// shape is not documented, so several are tried, one with a field of a
// name the reader knows in another type) and token_usage_record (seen in
// 0.171.0's rollouts right after a function_call).
var unknownItems = []string{
	`{"timestamp":"2026-11-25T00:15:10.100Z","ordinal":90,"type":"id_allocation","payload":{"next_item_ordinal":41,"observation_clock_floor_ms":1795827138000}}`,
	`{"timestamp":"2026-11-25T00:15:10.101Z","ordinal":91,"type":"id_allocation","payload":[1,2,3]}`,
	`{"timestamp":"2026-11-25T00:15:10.102Z","ordinal":92,"type":"id_allocation","payload":{"call_id":7,"name":{"kind":"call"},"content":"x"}}`,
	`{"timestamp":"2026-11-25T00:15:10.103Z","ordinal":93,"type":"id_allocation","payload":"call_00042"}`,
	`{"timestamp":"2026-11-25T00:15:10.104Z","ordinal":94,"type":"token_usage_record","payload":{"thread_id":"t","turn_id":"x","session_id":"s"}}`,
	`{"timestamp":"2026-11-25T00:15:10.105Z","ordinal":95,"type":"id_allocation"}`,
}

// insertAfter puts lines after the first line of b that contains marker.
func insertAfter(t *testing.T, b []byte, marker string, lines []string) []byte {
	t.Helper()
	i := bytes.Index(b, []byte(marker))
	if i < 0 {
		t.Fatalf("no %s in the fixture", marker)
	}
	end := i + bytes.IndexByte(b[i:], '\n') + 1
	var out []byte
	out = append(out, b[:end]...)
	out = append(out, strings.Join(lines, "\n")+"\n"...)
	return append(out, b[end:]...)
}

// Unknown item types change nothing: the turn state, the calls in flight
// and the title are those of the same rollout without them; no line is
// counted as skipped (no warning); and a session whose writer holds its
// lock keeps that owner, whether the unknown items come first read, after
// the call, or appended later.
func TestUnknownRolloutItemsChangeNothing(t *testing.T) {
	root := home(t)
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	if err := os.MkdirAll(day, 0o755); err != nil {
		t.Fatal(err)
	}
	killed, done := fixtures[1], fixtures[0]
	kb := insertAfter(t, readFixture(t, killed.file), `"type":"session_meta"`, unknownItems)
	kb = insertAfter(t, kb, `"type":"function_call"`, unknownItems)
	kb = append(kb, strings.Join(unknownItems, "\n")+"\n"...)
	writeRollout(t, day, killed.id, kb)
	db := insertAfter(t, readFixture(t, done.file), `"task_started"`, unknownItems)
	dp := writeRollout(t, day, done.id, db)
	holder := holdLock(t, filepath.Join(root, "thread-writer-locks", killed.id+".lock"))
	owner, err := proc.NewHost().Identify(holder.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}

	check := func(when string) {
		t.Helper()
		obs := observeAll(t, New(Config{Roots: []string{root}, NoLearnedRoots: true}))
		if len(obs.Warnings) != 0 || len(obs.Errors) != 0 {
			t.Errorf("%s: warnings %v, errors %v", when, obs.Warnings, obs.Errors)
		}
		k, _ := sessionOf(obs, killed.id)
		if k.Activity != session.ActivityBusy || len(k.InFlight) != 1 || k.InFlight[0].Kind != session.ProblemOrphanedToolCall ||
			!strings.Contains(k.InFlight[0].Detail, "exec_command") || k.Title != "run it" {
			t.Errorf("%s: killed %+v", when, k)
		}
		if len(k.Owners) != 1 || k.Owners[0].Identity != owner {
			t.Errorf("%s: owners %+v, want the lock's holder %v", when, k.Owners, owner)
		}
		d, _ := sessionOf(obs, done.id)
		if d.Activity != session.ActivityIdle || len(d.InFlight) != 0 || d.Title != "run it" {
			t.Errorf("%s: done %+v", when, d)
		}
	}
	check("first read")

	// Appended to a rollout already read: read as appended bytes.
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	observeAll(t, a)
	f, err := os.OpenFile(dp, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(strings.Join(unknownItems, "\n") + "\n")
	f.Close()
	obs := observeAll(t, a)
	if d, _ := sessionOf(obs, done.id); d.Activity != session.ActivityIdle || len(d.InFlight) != 0 || len(obs.Warnings) != 0 {
		t.Errorf("appended: %+v, warnings %v", d, obs.Warnings)
	}
	check("again")
}

// A line of a type the reader does read, in a shape it cannot, is still
// counted and named: only unknown types are skipped silently.
func TestKnownItemOfAnotherShapeIsNamed(t *testing.T) {
	root := home(t)
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	os.MkdirAll(day, 0o755)
	b := insertAfter(t, readFixture(t, fixtures[0].file), `"task_complete"`,
		[]string{`{"timestamp":"2026-11-25T00:15:10.100Z","type":"response_item","payload":{"type":"function_call","call_id":7}}`})
	writeRollout(t, day, fixtures[0].id, b)
	obs := observeAll(t, New(Config{Roots: []string{root}, NoLearnedRoots: true}))
	if len(obs.Warnings) != 1 || !strings.Contains(obs.Warnings[0].Err.Error(), "1 lines skipped") {
		t.Errorf("warnings %v, want the one line named", obs.Warnings)
	}
}

func zstdOf(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

func gzipOf(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// writeCompressed writes b compressed as Codex 0.171.0 leaves an idle
// rollout: rollout-…jsonl.zst (or .gz), an old mtime.
func writeCompressed(t *testing.T, day, id, ext string, b []byte) string {
	t.Helper()
	p := filepath.Join(day, "rollout-2026-11-25T00-15-09-"+id+".jsonl"+ext)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-40 * 24 * time.Hour)
	os.Chtimes(p, old, old)
	return p
}

// A compressed rollout reads as the same rollout uncompressed: its meta,
// title, turn state and calls in flight; one that cannot be decompressed
// is an input error (its session keeps its last status, with
// adapter_error) and its session's activity is unknown; mended, it is
// read again.
func TestCompressedRolloutsRead(t *testing.T) {
	root := home(t)
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	os.MkdirAll(day, 0o755)
	killed, done, sigint := fixtures[1], fixtures[0], fixtures[2]
	writeCompressed(t, day, killed.id, ".zst", zstdOf(t, readFixture(t, killed.file)))
	writeCompressed(t, day, done.id, ".gz", gzipOf(readFixture(t, done.file)))
	bad := writeCompressed(t, day, sigint.id, ".zst", []byte("\x28\xb5\x2f\xfdnot zstd at all"))

	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	obs := observeAll(t, a)
	k, _ := sessionOf(obs, killed.id)
	if k.Activity != session.ActivityBusy || len(k.InFlight) != 1 || !strings.Contains(k.InFlight[0].Detail, "exec_command") ||
		k.Cwd != "/tmp/cx/work" || k.Title != "run it" || k.LastActivity.Year() != 2026 {
		t.Errorf("zst: %+v", k)
	}
	d, _ := sessionOf(obs, done.id)
	if d.Activity != session.ActivityIdle || len(d.InFlight) != 0 || d.Cwd != "/tmp/cx/work" || d.Title != "run it" {
		t.Errorf("gz: %+v", d)
	}
	s, ok := sessionOf(obs, sigint.id)
	if !ok || s.Activity != session.ActivityUnknown || len(s.InFlight) != 0 {
		t.Errorf("corrupt: %+v (listed %v)", s, ok)
	}
	if len(obs.Errors) != 1 || obs.Errors[0].Input != bad || !strings.Contains(obs.Errors[0].Err.Error(), "compressed rollout not read") {
		t.Errorf("errors %v, want the corrupt one named", obs.Errors)
	}
	// Still named on the next pass, without reading it again.
	if obs := observeAll(t, a); len(obs.Errors) != 1 || obs.Errors[0].Input != bad {
		t.Errorf("second pass errors %v", obs.Errors)
	}
	writeCompressed(t, day, sigint.id, ".zst", zstdOf(t, readFixture(t, sigint.file)))
	a.RequestRescan() // a full rescan looks at every rollout
	obs = observeAll(t, a)
	if s, _ := sessionOf(obs, sigint.id); s.Activity != session.ActivityIdle || len(obs.Errors) != 0 {
		t.Errorf("mended: %+v, errors %v", s, obs.Errors)
	}
}

// A compressed rollout larger than the bound has only its head read: the
// session is listed with its meta, its turn state unknown, and a warning
// says so.
func TestCompressedRolloutTooLarge(t *testing.T) {
	b := readFixture(t, fixtures[0].file)
	big := bytes.Repeat([]byte(`{"timestamp":"2026-11-25T00:15:11.000Z","type":"event_msg","payload":{"type":"token_count","pad":"`+strings.Repeat("x", 1000)+`"}}`+"\n"), maxDecompressed/1000+10)
	root := home(t)
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	os.MkdirAll(day, 0o755)
	p := writeCompressed(t, day, fixtures[0].id, ".zst", zstdOf(t, append(append([]byte{}, b...), big...)))
	obs := observeAll(t, New(Config{Roots: []string{root}, NoLearnedRoots: true}))
	o, _ := sessionOf(obs, fixtures[0].id)
	if o.Activity != session.ActivityUnknown || o.Cwd != "/tmp/cx/work" || o.Title != "run it" {
		t.Errorf("%+v", o)
	}
	if len(obs.Warnings) != 1 || obs.Warnings[0].Input != p || !strings.Contains(obs.Warnings[0].Err.Error(), "read only in part") || len(obs.Errors) != 0 {
		t.Errorf("warnings %v errors %v", obs.Warnings, obs.Errors)
	}
}
