package codex

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

// The first line `codex exec --json` 0.169.0 printed on a real run.
const threadStarted = `{"type":"thread.started","thread_id":"01a2103d-0da4-7672-be7a-99cafd1edc0f"}`

func TestOutputIDFromRealExecOutput(t *testing.T) {
	m := outputID.FindStringSubmatch(threadStarted + "\n" + `{"type":"turn.started"}`)
	if m == nil || m[1] != "01a2103d-0da4-7672-be7a-99cafd1edc0f" {
		t.Fatalf("thread id not found: %q", m)
	}
	if outputID.MatchString(`{"type":"turn.started"}`) {
		t.Fatal("matched a line without a thread id")
	}
}

func TestNewCommand(t *testing.T) {
	root := filepath.Join(t.TempDir(), "codex-home") // not there yet
	a := New(Config{Roots: []string{root}, Binary: "/opt/codex", NoLearnedRoots: true})
	cmd, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Prompt: "fix it", Args: []string{"--skip-git-repo-check"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/codex", "exec", "--json", "--skip-git-repo-check", "fix it"}
	if !reflect.DeepEqual(cmd.Argv, want) || cmd.Cwd != "/w" || cmd.Root != root || cmd.UpstreamID != "" || cmd.OutputID == nil {
		t.Fatalf("headless: %+v, want argv %q", cmd, want)
	}
	if cmd.Env["CODEX_HOME"] != root {
		t.Errorf("env %v: want CODEX_HOME=%s", cmd.Env, root)
	}
	// Codex refuses a CODEX_HOME that does not exist; the launcher makes it.
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		t.Errorf("codex home not created: %v", err)
	}
	if _, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w"}); err == nil || !strings.Contains(err.Error(), "needs a prompt") {
		t.Errorf("headless without a prompt: %v", err)
	}
	cmd, err = a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Mode: "tmux", Args: []string{"-m", "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/opt/codex", "-m", "x"}; !reflect.DeepEqual(cmd.Argv, want) || cmd.OutputID != nil {
		t.Fatalf("tmux: %+v, want argv %q and no output id (a TUI prints none)", cmd, want)
	}
}

func TestResumeCommand(t *testing.T) {
	root := home(t, "done.jsonl")
	id := fixtures[0].id
	a := New(Config{Roots: []string{t.TempDir()}, NoLearnedRoots: true})
	cur := session.ResumeCursor{Agent: "codex", UpstreamID: id, Cwd: "/w", Root: root}

	cmd, err := a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: "/elsewhere", Prompt: "again"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"codex", "exec", "resume", "--json", id, "again"}; !reflect.DeepEqual(cmd.Argv, want) ||
		cmd.Cwd != "/w" || cmd.UpstreamID != id || cmd.OutputID != nil || cmd.Env["CODEX_HOME"] != root {
		t.Fatalf("resume: %+v, want argv %q in /w, same id, home %s", cmd, want, root)
	}
	cmd, err = a.ResumeCommand(cur, adapters.LaunchSpec{Mode: "tmux", Args: []string{"--no-alt-screen"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"codex", "resume", "--no-alt-screen", id}; !reflect.DeepEqual(cmd.Argv, want) {
		t.Fatalf("tmux resume argv %q, want %q", cmd.Argv, want)
	}
	cmd, err = a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: "/elsewhere", Prompt: "again"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"codex", "exec", "fork", "--json", id, "again"}; !reflect.DeepEqual(cmd.Argv, want) ||
		cmd.Cwd != "/elsewhere" || cmd.UpstreamID != "" || cmd.OutputID == nil {
		t.Fatalf("fork: %+v, want argv %q in /elsewhere, a new id from the output", cmd, want)
	}

	// Archived: Codex refuses it, so sessiond says so before starting it.
	arch := filepath.Join(root, "archived_sessions")
	if err := os.MkdirAll(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	day := filepath.Join(root, "sessions", "2026", "11", "25")
	name := "rollout-2026-11-25T00-15-09-" + id + ".jsonl"
	if err := os.Rename(filepath.Join(day, name), filepath.Join(arch, name)); err != nil {
		t.Fatal(err)
	}
	for _, fork := range []bool{false, true} {
		if _, err := a.ResumeCommand(cur, adapters.LaunchSpec{Prompt: "again"}, fork); err == nil || !strings.Contains(err.Error(), "codex unarchive "+id) {
			t.Errorf("archived, fork=%v: %v", fork, err)
		}
	}
}

func TestExists(t *testing.T) {
	root := home(t, "done.jsonl")
	a := New(Config{Roots: []string{root}, NoLearnedRoots: true})
	ctx := context.Background()
	cur := func(root, id string) session.ResumeCursor {
		return session.ResumeCursor{Agent: "codex", UpstreamID: id, Cwd: "/w", Root: root}
	}
	if ex, err := a.Exists(ctx, cur(root, fixtures[0].id)); ex != adapters.Exists {
		t.Errorf("present rollout: %v %v", ex, err)
	}
	if ex, err := a.Exists(ctx, cur(root, fixtures[1].id)); ex != adapters.Missing || err == nil {
		t.Errorf("absent rollout: %v %v", ex, err)
	}
	// An archived rollout exists (ResumeCommand says what to do about it).
	arch := filepath.Join(root, "archived_sessions")
	if err := os.MkdirAll(arch, 0o755); err != nil {
		t.Fatal(err)
	}
	writeRollout(t, arch, fixtures[1].id, readFixture(t, "killed.jsonl"))
	if ex, err := a.Exists(ctx, cur(root, fixtures[1].id)); ex != adapters.Exists {
		t.Errorf("archived rollout: %v %v", ex, err)
	}
	// A home that is gone, or a sessions folder that cannot be read, is
	// never Missing: that would reset the conversation.
	if ex, err := a.Exists(ctx, cur(filepath.Join(root, "gone"), fixtures[0].id)); ex != adapters.ExistenceUnknown || err == nil {
		t.Errorf("missing home: %v %v", ex, err)
	}
	odd := t.TempDir()
	if err := os.WriteFile(filepath.Join(odd, "sessions"), []byte("not a folder"), 0o644); err != nil {
		t.Fatal(err)
	}
	if ex, err := a.Exists(ctx, cur(odd, fixtures[0].id)); ex != adapters.ExistenceUnknown || err == nil {
		t.Errorf("unreadable sessions folder: %v %v", ex, err)
	}
}
