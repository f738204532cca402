package qwen

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/session"
)

func TestLaunchCommands(t *testing.T) {
	root := home(t, "headless-done.jsonl")
	a := New(Config{Roots: []string{root}, Binary: "/bin/qwen"})
	c, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Prompt: "do it", Args: []string{"--yolo"}})
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`).MatchString(c.UpstreamID) ||
		!slices.Equal(c.Argv, []string{"/bin/qwen", "--session-id", c.UpstreamID, "--yolo", "-p", "do it"}) ||
		c.Cwd != "/w" || c.Env["QWEN_HOME"] != root || c.Root != root {
		t.Errorf("new: %+v", c)
	}
	if _, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w"}); err == nil {
		t.Error("a headless launch without a prompt: no error")
	}
	c, _ = a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Mode: "tmux", Prompt: "hi"})
	if !slices.Equal(c.Argv, []string{"/bin/qwen", "--session-id", c.UpstreamID, "-i", "hi"}) {
		t.Errorf("tmux: %+v", c)
	}
	cur := session.ResumeCursor{UpstreamID: idDone, Cwd: "/proj", Root: root}
	c, err = a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: "/elsewhere", Prompt: "again"}, false)
	if err != nil || c.UpstreamID != idDone || c.Cwd != "/proj" || !slices.Equal(c.Argv, []string{"/bin/qwen", "--resume", idDone, "-p", "again"}) {
		t.Errorf("resume: %+v %v", c, err)
	}
	if _, err := a.ResumeCommand(cur, adapters.LaunchSpec{Prompt: "x"}, true); err == nil {
		t.Error("fork: no error")
	}
	if e, err := a.Exists(context.Background(), cur); e != adapters.Exists {
		t.Errorf("exists: %v %v", e, err)
	}
	if e, _ := a.Exists(context.Background(), session.ResumeCursor{UpstreamID: idKilled, Root: root}); e != adapters.Missing {
		t.Errorf("a missing chat: %v", e)
	}
	if e, _ := a.Exists(context.Background(), session.ResumeCursor{UpstreamID: idDone, Root: filepath.Join(root, "none")}); e != adapters.ExistenceUnknown {
		t.Errorf("a home that is not there: %v", e)
	}
	os.WriteFile(filepath.Join(root, "projects", "afile"), nil, 0o644)
	if e, _ := a.Exists(context.Background(), cur); e != adapters.Exists {
		t.Errorf("a file among the projects: %v", e)
	}
}
