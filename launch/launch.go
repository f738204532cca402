// Package launch starts agent processes for sessiond: with an argv, never a
// shell string; in the resolved cwd; in a session and process group of
// their own; stdin from /dev/null; stdout and stderr to a per-session log.
// It also follows what it started: it collects a process's exit, kills a
// process group that must not run on, and reads the agent's own session
// id from its log.
//
// The log is a file the agent writes directly, not a pipe through sessiond:
// an agent must outlive a sessiond restart (KillMode=process), and a pipe
// whose reader died would kill it with SIGPIPE at its next write.
package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/lib/shell"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// Modes.
const (
	ModeHeadless = "headless"
	ModeTmux     = "tmux"
)

// defaultLogCap is the size past which a session's log is cut to its tail.
const defaultLogCap = 8 << 20

// ProcReader reads live processes (proc.Host): their identity, and the
// stat a pane's check reads right before each key it types.
type ProcReader interface {
	Identify(pid int) (proc.Identity, error)
	Stat(pid int) (proc.Stat, error)
}

// Config configures a Launcher.
type Config struct {
	// LogDir holds one log per launched session (<state-dir>/logs).
	LogDir string
	// LogCap bounds each log (default 8 MiB).
	LogCap int64
	Host   ProcReader
	// Tmux is the tmux binary (default "tmux" from PATH).
	Tmux   string
	Logger *zap.Logger
}

// Launcher starts agent processes.
type Launcher struct {
	cfg Config
	log *zap.Logger
}

// New returns a Launcher.
func New(cfg Config) *Launcher {
	if cfg.LogCap <= 0 {
		cfg.LogCap = defaultLogCap
	}
	if cfg.Tmux == "" {
		cfg.Tmux = "tmux"
	}
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	return &Launcher{cfg: cfg, log: cfg.Logger}
}

// Started is a process that was started.
type Started struct {
	Identity proc.Identity
	Cwd      string
	LogPath  string
	// Tmux is the tmux session name in tmux mode.
	Tmux string
	// cmd is set when sessiond is the parent (headless).
	cmd   *exec.Cmd
	start time.Time
}

// AttachCommand is what a person types to see a tmux session.
func (s *Started) AttachCommand() string {
	if s.Tmux == "" {
		return ""
	}
	return "tmux attach -t " + s.Tmux
}

// UsageError is an error of the request (a missing binary, a bad cwd),
// as opposed to a failure of sessiond.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ResolveCwd returns the real path of dir, which must be a directory.
func ResolveCwd(dir string) (string, error) {
	if dir == "" {
		return "", &UsageError{errors.New("cwd is required")}
	}
	if !filepath.IsAbs(dir) {
		return "", &UsageError{fmt.Errorf("cwd %q must be an absolute path", dir)}
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", &UsageError{fmt.Errorf("cwd %s: %w", dir, err)}
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", &UsageError{fmt.Errorf("cwd %s: %w", dir, err)}
	}
	if !fi.IsDir() {
		return "", &UsageError{fmt.Errorf("cwd %s is not a directory", dir)}
	}
	return real, nil
}

// childEnv is sessiond's environment without what belongs to sessiond's
// own service manager, plus the request's variables.
func childEnv(extra map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "NOTIFY_SOCKET", k == "WATCHDOG_USEC", k == "WATCHDOG_PID", strings.HasPrefix(k, "LISTEN_"):
			continue
		case extra != nil:
			if _, ok := extra[k]; ok {
				continue
			}
		}
		out = append(out, kv)
	}
	for k, v := range extra {
		out = append(out, k+"="+v)
	}
	return out
}

// Start runs cmd for session id in the given mode and returns once the
// process exists and is identified. It never waits on the agent's output.
func (l *Launcher) Start(id string, cmd adapters.Command, mode string, reqEnv map[string]string) (*Started, error) {
	if len(cmd.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	env := map[string]string{}
	for k, v := range reqEnv {
		env[k] = v
	}
	for k, v := range cmd.Env { // the agent's own (its data root) wins
		env[k] = v
	}
	bin, err := exec.LookPath(cmd.Argv[0])
	if err != nil {
		return nil, &UsageError{fmt.Errorf("agent binary %q not found: %w", cmd.Argv[0], err)}
	}
	cwd, err := ResolveCwd(cmd.Cwd)
	if err != nil {
		return nil, err
	}
	// PWD is sessiond's own otherwise: OpenCode takes its session's
	// directory from $PWD before its real working directory (checked on
	// 1.18.33), so a launched session would name sessiond's directory.
	env["PWD"] = cwd
	if err := os.MkdirAll(l.cfg.LogDir, 0o700); err != nil {
		return nil, fmt.Errorf("create log dir %s: %w", l.cfg.LogDir, err)
	}
	logPath := filepath.Join(l.cfg.LogDir, id+".log")
	switch mode {
	case "", ModeHeadless:
		return l.startHeadless(bin, cmd, cwd, logPath, env)
	case ModeTmux:
		return l.startTmux(id, bin, cmd, cwd, logPath, env)
	}
	return nil, &UsageError{fmt.Errorf("mode %q: want headless or tmux", mode)}
}

func (l *Launcher) startHeadless(bin string, cmd adapters.Command, cwd, logPath string, env map[string]string) (*Started, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open log %s: %w", logPath, err)
	}
	defer logf.Close() // the child has its own descriptor
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return nil, err
	}
	defer devnull.Close()
	c := &exec.Cmd{
		Path: bin, Args: cmd.Argv, Dir: cwd, Env: childEnv(env),
		Stdin: devnull, Stdout: logf, Stderr: logf,
		// A session of its own: a terminal hangup or a signal to sessiond's
		// group never reaches the agent, and stop can signal its group.
		SysProcAttr: &syscall.SysProcAttr{Setsid: true},
	}
	start := time.Now()
	if err := c.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	// Until Wait, the process stays at least a zombie, so its identity can
	// always be read, even if it already exited.
	ident, err := l.cfg.Host.Identify(c.Process.Pid)
	if err != nil {
		c.Process.Kill()
		c.Wait()
		return nil, fmt.Errorf("identify launched pid %d: %w", c.Process.Pid, err)
	}
	l.log.Info("launched", zap.Int("pid", ident.PID), zap.Strings("argv", redactArgv(cmd.Argv)), zap.String("cwd", cwd), zap.String("log", logPath))
	return &Started{Identity: ident, Cwd: cwd, LogPath: logPath, cmd: c, start: start}, nil
}

// Wait waits for a headless process sessiond is the parent of, and returns
// how it ended with the tail of its log. For tmux it returns at once with
// ok false: the pane's process is tmux's child, and its exit is noticed by
// the exit watcher instead.
func (l *Launcher) Wait(s *Started) (st session.ExitStatus, ok bool) {
	if s.cmd == nil {
		return st, false
	}
	err := s.cmd.Wait()
	st = session.ExitStatus{PID: s.Identity.PID, At: time.Now(), LogTail: logTail(s.LogPath, 2048)}
	st.Code = s.cmd.ProcessState.ExitCode()
	if ws, ok := s.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.Signal = ws.Signal().String()
	}
	l.log.Info("launched process exited", zap.Int("pid", st.PID), zap.Int("code", st.Code),
		zap.String("signal", st.Signal), zap.Duration("after", time.Since(s.start)), zap.NamedError("wait", err))
	return st, true
}

func (l *Launcher) startTmux(id, bin string, cmd adapters.Command, cwd, logPath string, env map[string]string) (*Started, error) {
	tmux, err := exec.LookPath(l.cfg.Tmux)
	if err != nil {
		return nil, &UsageError{fmt.Errorf("tmux mode needs tmux: %w", err)}
	}
	name := "sessiond-" + id
	args := []string{"new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", cwd}
	for k, v := range env {
		args = append(args, "-e", k+"="+v)
	}
	// tmux runs a multi-word command directly, without a shell; a single
	// word would go through the shell, so env(1) makes it two words (env
	// execs the agent in place: the pane's pid is the agent's).
	if len(cmd.Argv) == 1 {
		args = append(args, "env")
	}
	args = append(args, bin)
	args = append(args, cmd.Argv[1:]...)
	// A launch runs under the tracker's pass lock: a hung tmux server must
	// not stall every pass, so each tmux call has a deadline.
	ctx, cancel := context.WithTimeout(context.Background(), tmuxTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, tmux, args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tmux new-session %s: %v: %s", name, err, bytes.TrimSpace(out))
	}
	// From here on a failure leaves a tmux session nobody tracks: end it.
	fail := func(err error) (*Started, error) {
		kctx, kcancel := context.WithTimeout(context.Background(), tmuxTimeout)
		defer kcancel()
		_ = exec.CommandContext(kctx, tmux, "kill-session", "-t", "="+name).Run()
		return nil, err
	}
	out, err := exec.CommandContext(ctx, tmux, "display-message", "-p", "-t", "="+name+":", "#{pane_pid}").Output()
	if err != nil {
		return fail(fmt.Errorf("the agent in tmux session %s exited at once (see %s): %w", name, logPath, err))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return fail(fmt.Errorf("tmux pane pid %q: %w", out, err))
	}
	// Keep a log of the pane, as for headless sessions.
	_ = exec.CommandContext(ctx, tmux, "pipe-pane", "-t", "="+name+":", "-o", "cat >> "+shell.Quote(logPath)).Run()
	ident, err := l.cfg.Host.Identify(pid)
	if err != nil {
		return fail(fmt.Errorf("identify tmux pane pid %d: %w", pid, err))
	}
	l.log.Info("launched in tmux", zap.String("tmux", name), zap.Int("pid", pid), zap.Strings("argv", redactArgv(cmd.Argv)), zap.String("cwd", cwd))
	return &Started{Identity: ident, Cwd: cwd, LogPath: logPath, Tmux: name, start: time.Now()}, nil
}

// tmuxTimeout bounds each tmux command of a launch.
const tmuxTimeout = 10 * time.Second

// redactArgv keeps prompts out of logs: they are the user's words.
func redactArgv(argv []string) []string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if len(a) > 80 || strings.ContainsAny(a, "\n") {
			a = fmt.Sprintf("<%d bytes>", len(a))
		}
		out[i] = a
	}
	return out
}

// logTail returns up to n bytes of the end of a log, from a line start.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := fi.Size() - n
	if off < 0 {
		off = 0
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, off, fi.Size()-off))
	if off > 0 {
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return strings.TrimSpace(string(b))
}

// CapLog cuts a log past the cap to its last quarter. The agent writes with
// O_APPEND, so after the cut its writes continue at the new end.
func (l *Launcher) CapLog(path string) error {
	fi, err := os.Stat(path)
	if err != nil || fi.Size() <= l.cfg.LogCap {
		return nil
	}
	keep := logTail(path, l.cfg.LogCap/4)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "[sessiond: log cut at %d bytes; its last part follows]\n%s\n", fi.Size(), keep)
	return err
}
