package gemini

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

func TestLaunchCommands(t *testing.T) {
	tr := newTree(t)
	a := New(Config{Roots: []string{tr.root}, Binary: "/opt/gemini"})
	cmd, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Prompt: "hi", Args: []string{"--yolo"}, Mode: "headless"})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(cmd.UpstreamID) {
		t.Fatalf("id %q", cmd.UpstreamID)
	}
	want := []string{"/opt/gemini", "--session-id", cmd.UpstreamID, "--yolo", "-p", "hi"}
	if !slices.Equal(cmd.Argv, want) || cmd.Cwd != "/w" || cmd.Root != tr.root || cmd.Env["GEMINI_CLI_HOME"] != filepath.Dir(tr.root) {
		t.Fatalf("command %+v, want argv %v", cmd, want)
	}
	if _, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Mode: "headless"}); err == nil {
		t.Fatal("a headless launch without a prompt")
	}
	tm, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Prompt: "go", Mode: "tmux"})
	if err != nil || !slices.Equal(tm.Argv[3:], []string{"-i", "go"}) {
		t.Fatalf("%v %+v", err, tm)
	}
	cur := session.ResumeCursor{Agent: "gemini", UpstreamID: "abcdef01-0000-4000-8000-000000000000", Cwd: "/proj", Root: tr.root}
	r, err := a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: "/elsewhere", Prompt: "more", Mode: "headless"}, false)
	if err != nil || !slices.Equal(r.Argv, []string{"/opt/gemini", "--resume", cur.UpstreamID, "-p", "more"}) || r.Cwd != "/proj" || r.UpstreamID != cur.UpstreamID {
		t.Fatalf("%v %+v", err, r)
	}
	if _, err := a.ResumeCommand(cur, adapters.LaunchSpec{Prompt: "x"}, true); err == nil {
		t.Fatal("a fork")
	}
	if _, err := New(Config{Roots: []string{t.TempDir()}}).NewCommand(adapters.LaunchSpec{Prompt: "x"}); err == nil {
		t.Fatal("a root not named .gemini cannot be given to Gemini CLI")
	}
}

func TestExists(t *testing.T) {
	tr := newTree(t)
	chats := tr.project("p", "/p")
	const id = "abcdef01-0000-4000-8000-000000000000"
	a := New(Config{Roots: []string{tr.root}})
	cur := session.ResumeCursor{Agent: "gemini", UpstreamID: id, Root: tr.root}
	if e, _ := a.Exists(context.Background(), cur); e != adapters.Missing {
		t.Fatalf("no chat: %s", e)
	}
	// Another session sharing the first 8 characters is not it.
	tr.write(filepath.Join(chats, "session-2026-11-27T10-00-abcdef01.jsonl"), newLines().header("abcdef01-ffff-4000-8000-000000000000", "h").b.Bytes())
	if e, _ := a.Exists(context.Background(), cur); e != adapters.Missing {
		t.Fatalf("another session's chat: %s", e)
	}
	tr.write(filepath.Join(chats, "session-2026-11-27T11-00-abcdef01.jsonl"), newLines().header(id, "h").b.Bytes())
	if e, err := a.Exists(context.Background(), cur); e != adapters.Exists {
		t.Fatalf("%s %v", e, err)
	}
	// A root that is gone is not proof the session is.
	cur.Root = filepath.Join(t.TempDir(), "gone", ".gemini")
	if e, _ := a.Exists(context.Background(), cur); e != adapters.ExistenceUnknown {
		t.Fatalf("gone root: %s", e)
	}
}
