package codex

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// A Codex repair writes nothing: each step is skipped and says why, the
// same planned and applied, and no file changes.
func TestRepairPlansNothingToWrite(t *testing.T) {
	root := home(t, "done.jsonl", "killed.jsonl", "sigint.jsonl")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	ctx := context.Background()
	killed := fixtures[1].id
	lock := filepath.Join(root, "thread-writer-locks", killed+".lock")
	if err := os.MkdirAll(filepath.Dir(lock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o644); err != nil { // left by a kill -9, held by no one
		t.Fatal(err)
	}
	before := snapshotTree(t, root)
	cases := []struct {
		id      string
		actions []string
		detail  string
	}{
		{killed, []string{"keep stale writer lock", "keep tool call without output"}, "exec_command"},
		{fixtures[0].id, []string{"repair"}, "nothing to repair"},
		{fixtures[2].id, []string{"repair"}, "nothing to repair"}, // ended by turn_aborted
	}
	for _, c := range cases {
		for _, apply := range []bool{false, true} {
			do := a.PlanRepair
			if apply {
				do = a.ApplyRepair
			}
			steps, err := do(ctx, adapters.RepairTarget{UpstreamID: c.id, Root: root})
			if err != nil {
				t.Fatalf("%s apply=%v: %v", c.id, apply, err)
			}
			var got []string
			for _, s := range steps {
				if s.Outcome != session.OutcomeSkipped {
					t.Errorf("%s: step %+v is not skipped", c.id, s)
				}
				got = append(got, s.Action)
			}
			if strings.Join(got, "|") != strings.Join(c.actions, "|") || !strings.Contains(steps[len(steps)-1].Detail, c.detail) {
				t.Errorf("%s apply=%v: steps %+v, want %q ending with %q", c.id, apply, steps, c.actions, c.detail)
			}
		}
	}
	if after := snapshotTree(t, root); after != before {
		t.Errorf("a repair changed the home:\n%s\nwas\n%s", after, before)
	}
	if _, err := a.PlanRepair(ctx, adapters.RepairTarget{UpstreamID: "01a2100e-0000-7000-8000-000000000000", Root: root}); err == nil {
		t.Error("a repair of a session with no rollout should say so")
	}
}

// A session whose writer lock is held is being written: nothing is done.
func TestRepairLiveWriter(t *testing.T) {
	root := home(t, "killed.jsonl")
	id := fixtures[1].id
	holder := holdLock(t, filepath.Join(root, "thread-writer-locks", id+".lock"))
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	steps, err := a.ApplyRepair(context.Background(), adapters.RepairTarget{UpstreamID: id, Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 1 || steps[0].Outcome != session.OutcomeSkipped || !strings.Contains(steps[0].Detail, "pid "+strconv.Itoa(holder.Process.Pid)+" holds the writer lock") {
		t.Fatalf("steps %+v: want one skipped step naming pid %d", steps, holder.Process.Pid)
	}
}

// snapshotTree lists every file under root with its size and mtime.
func snapshotTree(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		b.WriteString(p + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String() + "\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
