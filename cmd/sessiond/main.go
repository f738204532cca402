// Command sessiond is the per-user supervisor daemon for AI coding-agent
// sessions. `go run ./cmd/sessiond` starts a working daemon with defaults;
// every flag also reads an environment variable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/adapters/claude"
	"github.com/sessiond/sessiond/adapters/codex"
	"github.com/sessiond/sessiond/adapters/copilot"
	"github.com/sessiond/sessiond/adapters/gemini"
	"github.com/sessiond/sessiond/adapters/opencode"
	"github.com/sessiond/sessiond/adapters/pi"
	"github.com/sessiond/sessiond/adapters/qwen"
	"github.com/sessiond/sessiond/agents"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/daemon"
	"github.com/sessiond/sessiond/lib/buildinfo"
	"github.com/sessiond/sessiond/reactions"
)

// Exit codes. ExitAlreadyRunning is listed in the systemd unit's
// RestartPreventExitStatus, so a second instance does not restart-loop.
const (
	ExitOK             = 0
	ExitError          = 1
	ExitUsage          = 2
	ExitAlreadyRunning = 17
)

// version is set at build time with -ldflags "-X main.version=..."; else it
// comes from the module's build info.
var version = ""

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// firstStartMemoryLimitBytes is the runtime's soft memory limit during a
// first start (see daemon.Config.FirstStartMemoryLimit): the peak RSS
// target of 100 MiB less what is not Go's memory (the binary's text, the
// store's mapped pages). GOGC or GOMEMLIMIT, when set, win.
const firstStartMemoryLimitBytes = 70 << 20

func firstStartMemoryLimit() int64 {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return firstStartMemoryLimitBytes
}

// memoryTargetBytes is the runtime's soft memory limit after the startup
// pass, while the live heap leaves room under it (daemon.Config.
// MemoryTarget): like the first start's, the RSS target of 100 MiB less
// what is not Go's memory (the binary's text, the store's mapped pages:
// 17-18 MiB over seven homes). GOGC or GOMEMLIMIT, when set, win.
const memoryTargetBytes = 80 << 20

func memoryTarget() int64 {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return memoryTargetBytes
}

// firstStartExtraProcs is how many Ps a first start adds to the cores:
// one per transcript read in flight (see daemon.Config.FirstStartProcs).
const firstStartExtraProcs = 8

// firstStartProcs is GOMAXPROCS during a first start's pass, or 0 when
// GOMAXPROCS is set (it wins).
func firstStartProcs() int {
	if os.Getenv("GOMAXPROCS") != "" {
		return 0
	}
	return runtime.GOMAXPROCS(0) + firstStartExtraProcs
}

// options are the parsed flags.
type options struct {
	stateDir        string
	socket          string
	claudeDirs      []string
	claudeBin       string
	learnRoots      bool
	codexDirs       []string
	codexLearnRoots bool
	opencodeDir     string
	opencodeBin     string
	codexBin        string
	piDirs          []string
	piBin           string
	copilotDirs     []string
	geminiDirs      []string
	geminiBin       string
	qwenDirs        []string
	qwenBin         string
	// repairGrace is how long an OpenCode session's data must be still
	// before a repair writes it.
	repairGrace time.Duration
	interval    time.Duration
	grace       time.Duration
	stallAfter  time.Duration
	logLevel    string
	logFormat   string
	noExitEvts  bool
	autoRepair  []string
	showVersion bool
	// notify, hooksDir and hookTimeout configure the reactions.
	notify      bool
	hooksDir    string
	hookTimeout time.Duration
}

// stringList is a repeatable flag.
type stringList struct {
	vals []string
	set  bool
}

func (s *stringList) String() string { return strings.Join(s.vals, ",") }
func (s *stringList) Set(v string) error {
	if !s.set {
		s.vals, s.set = nil, true // the first use replaces the default
	}
	s.vals = append(s.vals, v)
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// envDurations defines duration (and boolean) flags whose defaults come
// from environment variables, and remembers which variable each came from: a malformed
// value must be reported by its variable's name, not replaced by the
// built-in default without a word (a unit's SESSIOND_GRACE=5 minutes would
// otherwise run with 30s unnoticed).
type envDurations struct {
	fs   *flag.FlagSet
	keys map[string]string // flag name -> environment variable
	bad  map[string]error  // flag name -> why its variable's value is no duration
}

// Var defines a duration flag whose default is the variable key's value
// when it is set, else def; a malformed value is kept for check to report.
func (e *envDurations) Var(p *time.Duration, name, key string, def time.Duration, usage string) {
	if v := os.Getenv(key); v != "" {
		e.keys[name] = key
		d, err := time.ParseDuration(v)
		if err != nil {
			e.bad[name] = fmt.Errorf("environment variable %s=%q is not a duration (want a number with a unit, such as 30s, 5m or 1h)", key, v)
		} else {
			def = d
		}
	}
	e.fs.DurationVar(p, name, def, usage)
}

// Bool defines a boolean flag whose default is the variable key's value
// when it is set (true/false, 1/0, as strconv.ParseBool reads them), else
// def. Any other value is kept for check to report: SESSIOND_NO_EXIT_EVENTS
// =false must not turn exit events off, nor =no leave them on unnoticed.
func (e *envDurations) Bool(p *bool, name, key string, def bool, usage string) {
	if v := os.Getenv(key); v != "" {
		e.keys[name] = key
		b, err := strconv.ParseBool(v)
		if err != nil {
			e.bad[name] = fmt.Errorf("environment variable %s=%q is not a boolean (want true or false)", key, v)
		} else {
			def = b
		}
	}
	e.fs.BoolVar(p, name, def, usage)
}

// check runs after the flags are parsed: a flag given on the command line
// wins over its variable, so only the values actually used are checked.
// Each must parse and be positive.
func (e *envDurations) check() error {
	given := map[string]bool{}
	e.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	e.fs.VisitAll(func(f *flag.Flag) {
		if err != nil {
			return
		}
		g, ok := f.Value.(flag.Getter)
		if !ok {
			return
		}
		key, fromEnv := e.keys[f.Name]
		fromEnv = fromEnv && !given[f.Name]
		d, isDur := g.Get().(time.Duration)
		if !isDur {
			if fromEnv && e.bad[f.Name] != nil {
				err = e.bad[f.Name]
			}
			return
		}
		switch {
		case fromEnv && e.bad[f.Name] != nil:
			err = e.bad[f.Name]
		case d <= 0 && fromEnv:
			err = fmt.Errorf("environment variable %s must be a positive duration, got %s", key, os.Getenv(key))
		case d <= 0:
			err = fmt.Errorf("--%s must be positive, got %s", f.Name, d)
		}
	})
	return err
}

func home() string {
	h, err := os.UserHomeDir()
	if err != nil {
		return "."
	}
	return h
}

// defaultHooksDir is $XDG_CONFIG_HOME/sessiond/hooks.d, else
// ~/.config/sessiond/hooks.d (macOS too: one place to document).
func defaultHooksDir() string {
	if v := os.Getenv("XDG_CONFIG_HOME"); v != "" {
		return filepath.Join(v, "sessiond", "hooks.d")
	}
	return filepath.Join(home(), ".config", "sessiond", "hooks.d")
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("sessiond", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `sessiond: the per-user supervisor of AI coding-agent sessions.

It tracks Claude Code, OpenCode and Codex sessions, decides from process identity
which really run, and serves the answer on a Unix socket (see sessionctl).

Usage: sessiond [flags]

Flags (each also read from the environment variable shown):
`)
		fs.PrintDefaults()
		fmt.Fprintf(stderr, `
Signals: SIGTERM/SIGINT stop gracefully (a second one exits at once);
SIGHUP rescans every agent's data now.
Exit codes: 0 stopped cleanly, 1 error, 2 usage, %d another sessiond is
already running on this state dir or socket.
`, ExitAlreadyRunning)
	}
	stateDir := api.DefaultStateDir()
	fs.StringVar(&o.stateDir, "state-dir", stateDir, "directory of the store `sessiond.db` ($SESSIOND_STATE_DIR)")
	fs.StringVar(&o.socket, "socket", "", "API socket path ($SESSIOND_SOCKET; default $XDG_RUNTIME_DIR/sessiond/sessiond.sock, else <state-dir>/sessiond.sock)")
	claude := &stringList{vals: agents.Claude.DefaultRoots()}
	fs.Var(claude, "claude-dir", "Claude Code config root, repeatable (default $CLAUDE_CONFIG_DIR, else ~/.claude)")
	fs.StringVar(&o.claudeBin, "claude-bin", envOr("SESSIOND_CLAUDE_BIN", "claude"), "claude executable for launch and resume ($SESSIOND_CLAUDE_BIN)")
	fs.StringVar(&o.opencodeBin, "opencode-bin", envOr("SESSIOND_OPENCODE_BIN", "opencode"), "opencode executable for launch and resume ($SESSIOND_OPENCODE_BIN)")
	fs.StringVar(&o.opencodeDir, "opencode-dir", agents.OpenCode.DefaultRoots()[0], "OpenCode data dir (default $XDG_DATA_HOME/opencode, else ~/.local/share/opencode)")
	codexDirs := &stringList{vals: agents.Codex.DefaultRoots()}
	fs.Var(codexDirs, "codex-dir", "Codex home, repeatable (default $CODEX_HOME, else ~/.codex)")
	fs.StringVar(&o.codexBin, "codex-bin", envOr("SESSIOND_CODEX_BIN", "codex"), "codex executable for launch and resume ($SESSIOND_CODEX_BIN)")
	piDirs := &stringList{vals: agents.Pi.DefaultRoots()}
	fs.Var(piDirs, "pi-dir", "Pi agent dir, repeatable (default $PI_CODING_AGENT_DIR, else ~/.pi/agent)")
	fs.StringVar(&o.piBin, "pi-bin", envOr("SESSIOND_PI_BIN", "pi"), "pi executable for launch and resume ($SESSIOND_PI_BIN)")
	copilotDirs := &stringList{vals: agents.Copilot.DefaultRoots()}
	fs.Var(copilotDirs, "copilot-dir", "GitHub Copilot CLI home, repeatable (default $COPILOT_HOME, else ~/.copilot)")
	geminiDirs := &stringList{vals: agents.Gemini.DefaultRoots()}
	fs.Var(geminiDirs, "gemini-dir", "Gemini CLI data folder, repeatable (default $GEMINI_CLI_HOME/.gemini, else ~/.gemini)")
	fs.StringVar(&o.geminiBin, "gemini-bin", envOr("SESSIOND_GEMINI_BIN", "gemini"), "gemini executable ($SESSIOND_GEMINI_BIN)")
	qwenDirs := &stringList{vals: agents.Qwen.DefaultRoots()}
	fs.Var(qwenDirs, "qwen-dir", "Qwen Code home, repeatable (default $QWEN_HOME, else ~/.qwen)")
	fs.StringVar(&o.qwenBin, "qwen-bin", envOr("SESSIOND_QWEN_BIN", "qwen"), "qwen executable for launch and resume ($SESSIOND_QWEN_BIN)")
	durs := &envDurations{fs: fs, keys: map[string]string{}, bad: map[string]error{}}
	durs.Bool(&o.learnRoots, "claude-learn-roots", "SESSIOND_CLAUDE_LEARN_ROOTS", true, "also read the config roots of live claude processes (their CLAUDE_CONFIG_DIR) ($SESSIOND_CLAUDE_LEARN_ROOTS)")
	durs.Bool(&o.codexLearnRoots, "codex-learn-roots", "SESSIOND_CODEX_LEARN_ROOTS", true, "also read the Codex homes of live codex processes (their CODEX_HOME) ($SESSIOND_CODEX_LEARN_ROOTS)")
	durs.Var(&o.repairGrace, "opencode-repair-grace", "SESSIOND_OPENCODE_REPAIR_GRACE", opencode.DefaultRepairGrace, "an OpenCode repair writes only data still for this long ($SESSIOND_OPENCODE_REPAIR_GRACE)")
	durs.Var(&o.interval, "reconcile-interval", "SESSIOND_RECONCILE_INTERVAL", 5*time.Second, "period of the reconcile pass ($SESSIOND_RECONCILE_INTERVAL)")
	durs.Var(&o.grace, "grace", "SESSIOND_GRACE", 30*time.Second, "grace period for launches and owner-less sessions ($SESSIOND_GRACE)")
	durs.Var(&o.stallAfter, "stall-after", "SESSIOND_STALL_AFTER", 20*time.Minute, "flag a busy session with no progress for this long as stalled ($SESSIOND_STALL_AFTER)")
	fs.StringVar(&o.logLevel, "log-level", envOr("SESSIOND_LOG_LEVEL", "info"), "debug, info, warn or error ($SESSIOND_LOG_LEVEL)")
	fs.StringVar(&o.logFormat, "log-format", envOr("SESSIOND_LOG_FORMAT", "console"), "console or json ($SESSIOND_LOG_FORMAT)")
	durs.Bool(&o.noExitEvts, "no-exit-events", "SESSIOND_NO_EXIT_EVENTS", false, "notice exits by periodic probes only, not pidfd/kqueue ($SESSIOND_NO_EXIT_EVENTS)")
	autoRepair := fs.String("auto-repair", envOr("SESSIOND_AUTO_REPAIR", ""), "comma-separated actions the watchdog may apply on its own to sessions interrupted past the grace period: claude-registry, opencode-offline, reap (default none) ($SESSIOND_AUTO_REPAIR)")
	durs.Bool(&o.notify, "notify", "SESSIOND_NOTIFY", false, "send a desktop notification (notify-send, osascript) when a session needs you: it waits for a permission, a question or its next prompt, is interrupted, or ends ($SESSIOND_NOTIFY)")
	fs.StringVar(&o.hooksDir, "hooks-dir", envOr("SESSIOND_HOOKS_DIR", defaultHooksDir()), "executables run on each status or activity change, with the change as JSON on stdin and SESSIOND_* variables; \"\" runs none ($SESSIOND_HOOKS_DIR; default $XDG_CONFIG_HOME/sessiond/hooks.d, else ~/.config/sessiond/hooks.d)")
	durs.Var(&o.hookTimeout, "hook-timeout", "SESSIOND_HOOK_TIMEOUT", reactions.DefaultTimeout, "a hook still running after this long is killed, with what it started ($SESSIOND_HOOK_TIMEOUT)")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (sessiond takes only flags; see -help)", fs.Arg(0))
	}
	if err := durs.check(); err != nil {
		return nil, err
	}
	o.claudeDirs = claude.vals
	o.codexDirs = codexDirs.vals
	o.piDirs = piDirs.vals
	o.copilotDirs = copilotDirs.vals
	o.geminiDirs = geminiDirs.vals
	o.qwenDirs = qwenDirs.vals
	var err error
	if o.autoRepair, err = daemon.ParsePolicies(*autoRepair); err != nil {
		return nil, err
	}
	if o.socket == "" {
		o.socket = api.DefaultSocket(o.stateDir)
	}
	return o, nil
}

func newLogger(level, format string, w io.Writer) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	ec := zap.NewProductionEncoderConfig()
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	var enc zapcore.Encoder
	switch format {
	case "json":
		enc = zapcore.NewJSONEncoder(ec)
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		enc = zapcore.NewConsoleEncoder(ec)
	default:
		return nil, fmt.Errorf("--log-format %q: want console or json", format)
	}
	// No sampling: every line matters when diagnosing a lost session.
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), lvl), zap.ErrorOutput(zapcore.AddSync(w))), nil
}

// buildAdapters is the list of agents sessiond observes. Adding an agent
// is one line here.
func buildAdapters(o *options, log *zap.Logger) []adapters.Adapter {
	return []adapters.Adapter{
		claude.New(claude.Config{Roots: o.claudeDirs, DefaultRoot: filepath.Join(home(), ".claude"), Binary: o.claudeBin, NoLearnedRoots: !o.learnRoots, Logger: log.Named("claude")}),
		// Offline repairs back OpenCode's database up under sessiond's own
		// state dir: sessiond's data, kept with its store.
		opencode.New(opencode.Config{DataDir: o.opencodeDir, Binary: o.opencodeBin, Logger: log.Named("opencode"),
			ServerPassword: os.Getenv("OPENCODE_SERVER_PASSWORD"), ServerUsername: os.Getenv("OPENCODE_SERVER_USERNAME"),
			BackupDir: filepath.Join(o.stateDir, "backups", "opencode"), RepairGrace: o.repairGrace}),
		codex.New(codex.Config{Roots: o.codexDirs, Binary: o.codexBin, NoLearnedRoots: !o.codexLearnRoots, Logger: log.Named("codex")}),
		pi.New(pi.Config{Roots: o.piDirs, Binary: o.piBin, Logger: log.Named("pi")}),
		copilot.New(copilot.Config{Roots: o.copilotDirs, Logger: log.Named("copilot")}),
		gemini.New(gemini.Config{Roots: o.geminiDirs, Binary: o.geminiBin, Logger: log.Named("gemini")}),
		qwen.New(qwen.Config{Roots: o.qwenDirs, Binary: o.qwenBin, Logger: log.Named("qwen")}),
	}
}

// reactionsConfig is what runs on changes. A --notify with no notifier
// on PATH is not an error: sessiond runs, logs it, and health says so.
func reactionsConfig(o *options, log *zap.Logger) reactions.Config {
	rc := reactions.Config{HooksDir: o.hooksDir, Timeout: o.hookTimeout}
	if o.notify {
		n, err := reactions.FindNotifier()
		if err != nil {
			log.Warn("--notify: no desktop notifications", zap.Error(err))
			rc.NotifyOff = err.Error()
		}
		rc.Notifier = n
	}
	return rc
}

// run is sessiond with its arguments, output and lifetime passed in, so
// tests run it in-process: it serves until ctx ends or a signal stops it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return ExitOK
	}
	if err != nil {
		fmt.Fprintln(stderr, "sessiond:", err)
		return ExitUsage
	}
	if o.showVersion {
		fmt.Fprintln(stdout, "sessiond", buildinfo.Version(version))
		return ExitOK
	}
	log, err := newLogger(o.logLevel, o.logFormat, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "sessiond:", err)
		return ExitUsage
	}
	defer log.Sync()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	hints := make(chan struct{}, 1)
	go func() {
		stopping := false
		for sig := range sigs {
			if sig == syscall.SIGHUP {
				select {
				case hints <- struct{}{}:
				default:
				}
				continue
			}
			if stopping {
				log.Warn("second signal: exiting at once", zap.String("signal", sig.String()))
				log.Sync()
				os.Exit(ExitError)
			}
			stopping = true
			log.Info("signal received: stopping", zap.String("signal", sig.String()))
			cancel()
		}
	}()

	err = daemon.Run(ctx, daemon.Config{
		StateDir: o.stateDir, Socket: o.socket,
		Adapters: buildAdapters(o, log),
		Interval: o.interval, Grace: o.grace, StallAfter: o.stallAfter,
		NoExitEvents: o.noExitEvts, AutoRepair: o.autoRepair,
		Version: buildinfo.Version(version), Logger: log, Hints: hints,
		FirstStartMemoryLimit: firstStartMemoryLimit(),
		MemoryTarget:          memoryTarget(),
		FirstStartProcs:       firstStartProcs(),
		Reactions:             reactionsConfig(o, log),
	})
	var already *daemon.AlreadyRunningError
	switch {
	case errors.As(err, &already):
		log.Error("not starting", zap.Error(err))
		return ExitAlreadyRunning
	case err != nil:
		log.Error("sessiond failed", zap.Error(err))
		return ExitError
	}
	return ExitOK
}
