package launch

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/proc"
)

// Kill ends the whole process group of a started process, not only its
// leader: an agent's children (its tool processes) go with it.
func TestKillEndsProcessGroup(t *testing.T) {
	dir := t.TempDir()
	host := proc.NewHost()
	l := New(Config{LogDir: dir, Host: host})
	st, err := l.Start("kill", adapters.Command{Argv: []string{"sh", "-c", `sleep 60 & echo "child=$!"; wait`}, Cwd: dir}, ModeHeadless, nil)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	pid, err := strconv.Atoi(WaitForID(stop, st.LogPath, regexp.MustCompile(`child=(\d+)`), 10*time.Second))
	if err != nil {
		t.Fatalf("the child's pid never showed in the log: %v", err)
	}
	child, err := host.Identify(pid)
	if err != nil {
		t.Fatalf("identify the child pid %d: %v", pid, err)
	}
	l.Kill(st)
	for _, id := range []proc.Identity{st.Identity, child} {
		testenv.Eventually(t, 10*time.Second, fmt.Sprintf("pid %d dead after Kill", id.PID), func() bool {
			return host.Probe(id).Liveness == proc.Dead
		})
	}
}

// WaitForID finds an id written after it started looking, and gives up
// with "" at its limit or when told to stop.
func TestWaitForID(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.log")
	re := regexp.MustCompile(`session id: (\w+)`)
	go func() {
		time.Sleep(150 * time.Millisecond)
		os.WriteFile(path, []byte("starting\nsession id: ses_123\nmore\n"), 0o600)
	}()
	if got := WaitForID(nil, path, re, 10*time.Second); got != "ses_123" {
		t.Errorf("WaitForID = %q, want ses_123", got)
	}

	none := filepath.Join(dir, "none.log")
	os.WriteFile(none, []byte("no id here\n"), 0o600)
	start := time.Now()
	if got := WaitForID(nil, none, re, 300*time.Millisecond); got != "" {
		t.Errorf("WaitForID without an id = %q", got)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 5*time.Second {
		t.Errorf("WaitForID gave up after %v, want its limit of 300ms", took)
	}

	stop := make(chan struct{})
	close(stop)
	start = time.Now()
	if got := WaitForID(stop, filepath.Join(dir, "missing.log"), re, time.Minute); got != "" {
		t.Errorf("WaitForID after stop = %q", got)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("WaitForID did not stop when told: %v", took)
	}
}

// readHead reads no more than asked, and a short file whole.
func TestReadHead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.log")
	os.WriteFile(path, []byte("0123456789"), 0o600)
	if b, err := readHead(path, 4); err != nil || string(b) != "0123" {
		t.Errorf("readHead 4 = %q, %v", b, err)
	}
	if b, err := readHead(path, 100); err != nil || string(b) != "0123456789" {
		t.Errorf("readHead 100 = %q, %v", b, err)
	}
	if _, err := readHead(filepath.Join(t.TempDir(), "missing"), 4); err == nil {
		t.Error("readHead of a missing file: no error")
	}
}
