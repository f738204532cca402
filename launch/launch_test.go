package launch

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
)

func TestResolveCwd(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	os.Mkdir(real, 0o755)
	link := filepath.Join(dir, "link")
	os.Symlink(real, link)
	file := filepath.Join(dir, "file")
	os.WriteFile(file, nil, 0o600)
	if got, err := ResolveCwd(link); err != nil || got != real {
		t.Errorf("symlink: %q %v", got, err)
	}
	for _, bad := range []string{"", "relative/dir", filepath.Join(dir, "missing"), file} {
		_, err := ResolveCwd(bad)
		var ue *UsageError
		if !errors.As(err, &ue) {
			t.Errorf("ResolveCwd(%q) = %v, want a UsageError", bad, err)
		}
	}
}

func TestChildEnvDropsServiceManagerVariables(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "/run/x")
	t.Setenv("WATCHDOG_USEC", "1")
	t.Setenv("KEEP_ME", "1")
	env := strings.Join(childEnv(map[string]string{"KEEP_ME": "2", "ADDED": "3"}), "\n")
	for _, gone := range []string{"NOTIFY_SOCKET=", "WATCHDOG_USEC=", "KEEP_ME=1"} {
		if strings.Contains(env, gone) {
			t.Errorf("child env has %s", gone)
		}
	}
	for _, kept := range []string{"KEEP_ME=2", "ADDED=3"} {
		if !strings.Contains(env, kept) {
			t.Errorf("child env lacks %s", kept)
		}
	}
}

// The child's PWD is its own directory, never sessiond's: OpenCode names
// its session's directory after $PWD.
func TestStartSetsPWD(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PWD", "/somewhere/else")
	l := New(Config{LogDir: filepath.Join(dir, "logs"), Host: proc.NewHost()})
	st, err := l.Start("pwd123", adapters.Command{Argv: []string{"printenv", "PWD"}, Cwd: dir}, ModeHeadless, map[string]string{"PWD": "/from/the/request"})
	if err != nil {
		t.Fatal(err)
	}
	x, ok := l.Wait(st)
	real, _ := ResolveCwd(dir)
	if !ok || x.Code != 0 || strings.TrimSpace(x.LogTail) != real {
		t.Fatalf("child PWD %q (exit %+v), want %q", x.LogTail, x, real)
	}
}

// A headless start: its own session (setsid), output in the log, stdin
// from /dev/null, and the exit status collected with the log tail.
func TestStartHeadlessAndWait(t *testing.T) {
	dir := t.TempDir()
	l := New(Config{LogDir: filepath.Join(dir, "logs"), Host: proc.NewHost()})
	cmd := adapters.Command{Argv: []string{"sh", "-c", `echo "pgid=$(ps -o pgid= -p $$ | tr -d ' ') pid=$$"; read x || echo "stdin closed"; echo "boom" >&2; exit 3`}, Cwd: dir}
	st, err := l.Start("abc123", cmd, ModeHeadless, map[string]string{"X": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if st.Identity.PID == 0 || st.Identity.StartTicks == 0 {
		t.Fatalf("identity %+v", st.Identity)
	}
	x, ok := l.Wait(st)
	if !ok || x.Code != 3 || x.PID != st.Identity.PID {
		t.Fatalf("exit %+v ok %v", x, ok)
	}
	if !strings.Contains(x.LogTail, "boom") || !strings.Contains(x.LogTail, "stdin closed") {
		t.Errorf("log tail %q", x.LogTail)
	}
	pid := st.Identity.PID
	if !strings.Contains(x.LogTail, "pgid="+itoa(pid)+" pid="+itoa(pid)) {
		t.Errorf("not its own process group leader: %q", x.LogTail)
	}
	if fi, err := os.Stat(st.LogPath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log %s: %v", st.LogPath, err)
	}
}

func TestStartSignalled(t *testing.T) {
	dir := t.TempDir()
	l := New(Config{LogDir: dir, Host: proc.NewHost()})
	st, err := l.Start("sig", adapters.Command{Argv: []string{"sleep", "30"}, Cwd: dir}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Kill(-st.Identity.PID, syscall.SIGKILL)
	x, _ := l.Wait(st)
	if x.Signal != "killed" || x.Code != -1 {
		t.Fatalf("exit %+v", x)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	l := New(Config{LogDir: dir, Host: proc.NewHost()})
	var ue *UsageError
	if _, err := l.Start("x", adapters.Command{Argv: []string{"no-such-agent-binary"}, Cwd: dir}, "", nil); !errors.As(err, &ue) {
		t.Errorf("missing binary: %v", err)
	}
	if _, err := l.Start("x", adapters.Command{Argv: []string{"true"}, Cwd: dir}, "screen", nil); !errors.As(err, &ue) {
		t.Errorf("bad mode: %v", err)
	}
}

func TestLogTailAndCap(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.log")
	var b strings.Builder
	for i := 0; i < 2000; i++ {
		b.WriteString("line " + itoa(i) + "\n")
	}
	os.WriteFile(path, []byte(b.String()), 0o600)
	tail := logTail(path, 30)
	if !strings.HasSuffix(tail, "line 1999") || strings.HasPrefix(tail, "ine") {
		t.Errorf("tail %q does not start at a line", tail)
	}
	l := New(Config{LogDir: dir, LogCap: 4096})
	if err := l.CapLog(path); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(path)
	if len(got) > 4096 || !strings.Contains(string(got), "log cut at") || !strings.HasSuffix(strings.TrimSpace(string(got)), "line 1999") {
		t.Errorf("capped log (%d bytes): %.80q...", len(got), got)
	}
	if logTail(filepath.Join(dir, "none"), 10) != "" {
		t.Error("tail of a missing log")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
