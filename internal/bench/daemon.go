package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/lib/tailbuf"
)

// Bins are the built binaries a benchmark runs.
type Bins struct {
	Sessiond   string
	Sessionctl string
}

// daemonConfig says how to start one sessiond for a benchmark.
type daemonConfig struct {
	// Dir holds the daemon's state dir, socket and home. Keep it short:
	// socket paths are capped at 104 bytes on macOS.
	Dir string
	// ClaudeDirs and OpenCodeDir are the agents' data; empty ones are
	// replaced by empty directories, so nothing real is ever read.
	ClaudeDirs  []string
	OpenCodeDir string
	CodexDir    string
	// AgentDirs are the newer agents' data folders by adapter name
	// (gemini, qwen, pi, copilot); a missing one is a folder under the
	// daemon's home that does not exist, so nothing real is read (their
	// defaults may come from $GEMINI_CLI_HOME, $QWEN_HOME,
	// $PI_CODING_AGENT_DIR, $COPILOT_HOME).
	AgentDirs map[string]string
	// Args are extra flags (they follow the defaults, so they win).
	Args []string
}

// daemon is a sessiond process started by a benchmark.
type daemon struct {
	Cmd      *exec.Cmd
	Socket   string
	StateDir string
	Home     string
	// Started is the time just before the process was started.
	Started time.Time
	stderr  *tailbuf.Buffer
	done    chan struct{}
	err     error
	client  *http.Client
}

// spawnDaemon starts sessiond and returns at once; see WaitComplete and
// WaitReady.
func spawnDaemon(bins Bins, cfg daemonConfig) (*daemon, error) {
	d := &daemon{
		Socket:   filepath.Join(cfg.Dir, "run", "s.sock"),
		StateDir: filepath.Join(cfg.Dir, "state"),
		Home:     filepath.Join(cfg.Dir, "home"),
		stderr:   &tailbuf.Buffer{Max: 64 << 10},
		done:     make(chan struct{}),
	}
	if err := os.MkdirAll(d.Home, 0o755); err != nil {
		return nil, err
	}
	claude := cfg.ClaudeDirs
	if len(claude) == 0 {
		claude = []string{filepath.Join(d.Home, ".claude")}
	}
	oc := cfg.OpenCodeDir
	if oc == "" {
		oc = filepath.Join(d.Home, ".local", "share", "opencode")
	}
	args := []string{"--state-dir", d.StateDir, "--socket", d.Socket, "--opencode-dir", oc,
		"--claude-learn-roots=false", "--codex-learn-roots=false", "--log-level", "warn"}
	for _, c := range claude {
		args = append(args, "--claude-dir", c)
	}
	if cfg.CodexDir != "" {
		args = append(args, "--codex-dir", cfg.CodexDir)
	}
	for _, agent := range newAgents {
		dir := cfg.AgentDirs[agent]
		if dir == "" {
			dir = filepath.Join(d.Home, ".none", agent)
		}
		args = append(args, "--"+agent+"-dir", dir)
	}
	args = append(args, cfg.Args...)
	d.Cmd = exec.Command(bins.Sessiond, args...)
	d.Cmd.Env = testenv.Isolated(d.Home, d.Socket, d.StateDir)
	d.Cmd.Stderr = d.stderr
	dieWithParent(d.Cmd)
	d.client = unixClient(d.Socket, true)
	d.Started = time.Now()
	if err := d.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bins.Sessiond, err)
	}
	go func() { d.err = d.Cmd.Wait(); close(d.done) }()
	return d, nil
}

// PID is the daemon's process id.
func (d *daemon) PID() int { return d.Cmd.Process.Pid }

// Stderr is the tail of the daemon's log.
func (d *daemon) Stderr() string { return d.stderr.String() }

// Exited reports whether the daemon has exited, and how.
func (d *daemon) Exited() (bool, error) {
	select {
	case <-d.done:
		return true, d.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM and waits (SIGKILL after 10 s).
func (d *daemon) Stop() {
	if d == nil || d.Cmd.Process == nil {
		return
	}
	d.client.CloseIdleConnections()
	_ = d.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		_ = d.Cmd.Process.Kill()
		<-d.done
	}
}

// Kill sends SIGKILL, as a crash would end the daemon, and waits.
func (d *daemon) Kill() {
	if d == nil || d.Cmd.Process == nil {
		return
	}
	d.client.CloseIdleConnections()
	_ = d.Cmd.Process.Kill()
	<-d.done
}

// Client is an API client for the daemon (the api package's).
func (d *daemon) Client() *api.Client { return api.NewClient(d.Socket) }

// unixClient is an HTTP client over a Unix socket.
func unixClient(socket string, keepAlive bool) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 1,
	}}
}

// Get fetches path and returns the body, failing on any status but 200.
func (d *daemon) Get(ctx context.Context, path string) ([]byte, error) {
	return get(ctx, d.client, path)
}

func get(ctx context.Context, c *http.Client, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", "http://sessiond"+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("GET %s: %s: %s", path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

// Sessions lists every session (all=true).
func (d *daemon) Sessions(ctx context.Context) ([]api.Session, error) {
	b, err := d.Get(ctx, "/v1/sessions?all=true")
	if err != nil {
		return nil, err
	}
	return decodeList(b)
}

// decodeList reads the daemon's answer, always {"sessions": [...]}
// (decodeSessions also takes sessionctl's bare list, at the cost of a
// failed first attempt on this one).
func decodeList(b []byte) ([]api.Session, error) {
	var l api.SessionList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("decode session list: %w", err)
	}
	return l.Sessions, nil
}

// WaitComplete measures the time to the first complete ls: it asks for the
// session list as soon as the socket accepts a connection and repeats until
// the list holds want sessions, and returns the time from the process's
// start to the last byte of that answer. sessiond answers nothing before its startup
// reconciliation (a full discovery of every adapter) has been committed,
// so the first answer is already the complete one; the count checks it.
func (d *daemon) WaitComplete(ctx context.Context, want int, timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		if exited, err := d.Exited(); exited {
			return 0, fmt.Errorf("sessiond exited: %v\n%s", err, d.Stderr())
		}
		// The time is taken when the body's last byte is in, before the
		// bench decodes it: decoding 10,000 sessions into structs costs the
		// bench ~100 ms, which is not sessiond's (a user's tool may pass
		// the bytes on, as sessionctl --json does).
		b, err := d.Get(ctx, "/v1/sessions?all=true")
		took := time.Since(d.Started)
		var ss []api.Session
		if err == nil {
			ss, err = decodeList(b)
		}
		if err == nil && len(ss) >= want {
			return took, nil
		}
		if err == nil {
			err = fmt.Errorf("%d of %d sessions listed", len(ss), want)
		}
		last = err
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("no complete ls of %d sessions within %s: %v\n%s", want, timeout, last, d.Stderr())
}

// WaitReady waits until the daemon answers /v1/health.
func (d *daemon) WaitReady(ctx context.Context, timeout time.Duration) error {
	if err := d.Client().WaitReady(ctx, timeout); err != nil {
		return fmt.Errorf("sessiond not ready: %v\n%s", err, d.Stderr())
	}
	return nil
}

// WaitStatus waits until n sessions have the status.
func (d *daemon) WaitStatus(ctx context.Context, status string, n int, timeout time.Duration) ([]api.Session, error) {
	deadline := time.Now().Add(timeout)
	got := 0
	for time.Now().Before(deadline) {
		ss, err := d.Sessions(ctx)
		if err == nil {
			got = 0
			for _, s := range ss {
				if string(s.Status) == status {
					got++
				}
			}
			if got >= n {
				return ss, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil, fmt.Errorf("%d of %d sessions %s after %s\n%s", got, n, status, timeout, d.Stderr())
}

// metrics scrapes /metrics over a fresh connection (so the scrape leaves
// no connection open behind it) and returns the unlabelled samples and the
// labelled ones by their full name ("name{labels}").
func metrics(ctx context.Context, socket string) (map[string]float64, error) {
	c := unixClient(socket, false)
	b, err := get(ctx, c, "/metrics")
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// goroutines is the daemon's go_goroutines gauge.
func goroutines(ctx context.Context, socket string) (int, error) {
	m, err := metrics(ctx, socket)
	if err != nil {
		return 0, err
	}
	v, ok := m["go_goroutines"]
	if !ok {
		return 0, errors.New("no go_goroutines in /metrics")
	}
	return int(v), nil
}

// openFDs counts the process's open descriptors from /proc/<pid>/fd, or,
// where there is no /proc, from the daemon's process_open_fds gauge.
func openFDs(ctx context.Context, pid int, socket string) (int, error) {
	if s, err := readProcessStats(pid); err == nil {
		return s.FDs, nil
	}
	m, err := metrics(ctx, socket)
	if err != nil {
		return 0, err
	}
	v, ok := m["process_open_fds"]
	if !ok {
		return 0, errors.New("no /proc and no process_open_fds in /metrics")
	}
	return int(v), nil
}

// processStats are a process's figures as the kernel accounts them.
type processStats struct {
	RSS     uint64 // VmRSS
	PeakRSS uint64 // VmHWM: the peak resident set since start
	// RSSAnon and RSSFile split RSS: the heap and stacks, and mapped
	// files (the binary, the store's pages).
	RSSAnon, RSSFile uint64
	Threads          int
	// CPUSeconds is user plus system time.
	CPUSeconds float64
	// ReadChars is rchar: bytes passed to read(2) and friends, whether the
	// page cache or the disk served them; ReadBytes is read_bytes, what
	// had to come from the disk; ReadCalls is syscr.
	ReadChars, ReadBytes, ReadCalls uint64
	HaveIO                          bool
	// RunQueueWait sums the time its threads waited for a CPU (Linux
	// schedstat): the part of a wall-clock figure the machine's other
	// work took.
	RunQueueWait time.Duration
	FDs          int
}
