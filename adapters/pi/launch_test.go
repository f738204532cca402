package pi

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

// The first line `pi -p --mode json` 0.73.1 printed on a real run.
const headerLine = `{"type":"session","version":3,"id":"01a21fa1-58b3-71ff-b3ea-cb6fe7ef6ea4","timestamp":"2026-11-28T00:49:57.437Z","cwd":"/tmp/piobs/home/proj"}`

func TestOutputIDFromTheHeader(t *testing.T) {
	m := outputID.FindStringSubmatch(headerLine + "\n" + `{"type":"agent_start"}`)
	if m == nil || m[1] != "01a21fa1-58b3-71ff-b3ea-cb6fe7ef6ea4" {
		t.Fatalf("id not found: %q", m)
	}
	if outputID.MatchString(`{"type":"message_end","message":{"id":"01a21fa1-58b3-71ff-b3ea-cb6fe7ef6ea4"}}`) {
		t.Fatal("matched a line that is no header")
	}
}

func TestLaunchCommands(t *testing.T) {
	root := t.TempDir()
	a := New(Config{Roots: []string{root}, Binary: "/opt/pi", Host: &fakeHost{}})
	cmd, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Prompt: "fix it", Args: []string{"--model", "m1"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/pi", "-p", "--mode", "json", "--model", "m1", "fix it"}
	if !reflect.DeepEqual(cmd.Argv, want) || cmd.Cwd != "/w" || cmd.Root != root || cmd.OutputID == nil || cmd.Env["PI_CODING_AGENT_DIR"] != root {
		t.Fatalf("headless: %+v, want argv %q", cmd, want)
	}
	if _, err := a.NewCommand(adapters.LaunchSpec{Cwd: "/w"}); err == nil || !strings.Contains(err.Error(), "needs a prompt") {
		t.Errorf("headless without a prompt: %v", err)
	}
	cmd, err = a.NewCommand(adapters.LaunchSpec{Cwd: "/w", Mode: "tmux"})
	if err != nil || !reflect.DeepEqual(cmd.Argv, []string{"/opt/pi"}) || cmd.OutputID != nil {
		t.Fatalf("tmux: %+v %v", cmd, err)
	}

	p := writeSession(t, root, "/w", id1, user(1, "a"), say(2, "b", "stop"))
	cur := session.ResumeCursor{UpstreamID: id1, Cwd: "/w", Root: root}
	cmd, err = a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: "/elsewhere", Prompt: "again"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"/opt/pi", "-p", "--mode", "json", "--session", p, "again"}; !reflect.DeepEqual(cmd.Argv, want) || cmd.Cwd != "/w" || cmd.UpstreamID != id1 || cmd.OutputID != nil {
		t.Fatalf("resume: %+v, want %q in /w", cmd, want)
	}
	cmd, err = a.ResumeCommand(cur, adapters.LaunchSpec{Cwd: "/x", Prompt: "again"}, true)
	if want := []string{"/opt/pi", "-p", "--mode", "json", "--fork", p, "again"}; err != nil || !reflect.DeepEqual(cmd.Argv, want) || cmd.Cwd != "/x" || cmd.UpstreamID != "" {
		t.Fatalf("fork: %+v %v", cmd, err)
	}
	if ex, err := a.Exists(context.Background(), cur); ex != adapters.Exists {
		t.Errorf("exists: %v %v", ex, err)
	}
	os.Remove(p)
	if ex, _ := a.Exists(context.Background(), cur); ex != adapters.Missing {
		t.Errorf("removed: %v", ex)
	}
	if _, err := a.ResumeCommand(cur, adapters.LaunchSpec{Prompt: "x"}, false); err == nil {
		t.Error("resumed a session with no file")
	}
	// An unreadable sessions folder is unknown, never missing.
	sessions := filepath.Join(root, "sessions")
	os.RemoveAll(sessions)
	os.Symlink("sessions", sessions)
	if ex, _ := a.Exists(context.Background(), cur); ex != adapters.ExistenceUnknown {
		t.Errorf("unreadable: %v", ex)
	}
}
