package realagents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/daemontest"
	"github.com/sessiond/sessiond/internal/testkit/fakemodel"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

func TestMain(m *testing.M) {
	code := m.Run()
	daemontest.Cleanup()
	writeTimings()
	os.Exit(code)
}

// timingsEnv names a file that gets every scenario's timings: `go test
// ./...` shows a passing package's output to no one, and CI wants them.
const timingsEnv = "SESSIOND_REALAGENTS_TIMINGS"

var (
	timingsMu sync.Mutex
	timings   []string
)

func recordTiming(line string) {
	timingsMu.Lock()
	defer timingsMu.Unlock()
	timings = append(timings, line)
}

// writeTimings appends the run's timings to $SESSIOND_REALAGENTS_TIMINGS.
func writeTimings() {
	path := os.Getenv(timingsEnv)
	if path == "" || len(timings) == 0 {
		return
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintf(os.Stderr, "realagents: write timings: %v\n", err)
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "real-agents tier, %s\n%s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(timings, "\n"))
}

// The environment variables that name the installed CLIs.
const (
	claudeBinEnv   = "SESSIOND_CLAUDE_BIN"
	opencodeBinEnv = "SESSIOND_OPENCODE_BIN"
	// markerEnv is set in every process a test starts, to its own value,
	// so cleanup finds and kills exactly the test's processes, tool
	// children reparented to PID 1 included.
	markerEnv = "SESSIOND_REALAGENTS_TEST"
)

// agentBin returns the CLI named by env, or skips the test loudly.
func agentBin(t *testing.T, env, pkg string) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		skipLoudly(t, "REAL AGENTS NOT TESTED: this tier reads /proc and runs on Linux only (GOOS=%s)", runtime.GOOS)
	}
	p := os.Getenv(env)
	if p == "" {
		skipLoudly(t, "REAL AGENTS NOT TESTED: %s is not set. Run `eval \"$(scripts/install-agents.sh)\"; export %s %s %s %s` "+
			"to install the pinned %s and test against it", env, claudeBinEnv, opencodeBinEnv, codexBinEnv, copilotBinEnv, pkg)
	}
	st, err := os.Stat(p)
	if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		skipLoudly(t, "REAL AGENTS NOT TESTED: %s=%s is not an executable file (%v); rerun scripts/install-agents.sh", env, p, err)
	}
	// The agents' long tool call is a python3 sleep (Claude refuses a bare
	// sleep as a tool command).
	if _, err := exec.LookPath("python3"); err != nil {
		skipLoudly(t, "REAL AGENTS NOT TESTED: python3 is not on PATH (%v); the scenarios' long tool call needs it", err)
	}
	return p
}

// skipLoudly skips the test and puts the reason in the timings file too,
// where CI shows it (go test ./... hides a passing package's skips).
func skipLoudly(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	recordTiming("SKIPPED " + t.Name() + ": " + msg)
	t.Skip(msg)
}

// world is one scenario: a daemontest.Env whose every process talks to its
// own fake model server and writes only under its temp HOME.
type world struct {
	*daemontest.Env
	t      *testing.T
	model  *fakemodel.Server
	marker string
	began  time.Time
	last   time.Time
}

// newWorld makes the env, the model server, the agents' configuration and
// the cleanup that kills every process the test started.
func newWorld(t *testing.T) *world {
	e := daemontest.NewEnv(t)
	model := fakemodel.New(t)
	w := &world{Env: e, t: t, model: model, marker: e.Dir, began: time.Now()}
	w.last = w.began
	home := e.Home
	// Shared across tests and runs: whatever OpenCode fetches from npm.
	npmCache := filepath.Join(realCacheDir(), "sessiond-agents", "npm")
	e.Extra = append(e.Extra,
		markerEnv+"="+w.marker,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"TMPDIR="+filepath.Join(e.Dir, "tmp"),
		// Claude Code, offline.
		"ANTHROPIC_BASE_URL="+model.URL,
		"ANTHROPIC_API_KEY=sk-ant-fake-key",
		"ANTHROPIC_AUTH_TOKEN=",
		"DISABLE_TELEMETRY=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"DISABLE_ERROR_REPORTING=1",
		// OpenCode, offline.
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"npm_config_cache="+npmCache,
		"OPENAI_API_KEY=",
	)
	for _, d := range []string{filepath.Join(e.Dir, "tmp"), filepath.Join(home, ".config", "opencode"), filepath.Join(home, "proj")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.writeOpenCodeConfig()
	// Registered after NewEnv's removal of the dir, so it runs before it.
	t.Cleanup(func() {
		n := daemontest.KillByEnv(markerEnv, w.marker)
		if n > 0 {
			t.Logf("cleanup: killed %d leftover process(es)", n)
		}
		total := fmt.Sprintf("%s total %s", t.Name(), time.Since(w.began).Round(time.Millisecond))
		if t.Failed() {
			total += " (FAILED)"
		} else if t.Skipped() {
			total += " (skipped)"
		}
		t.Logf("timing: %s", total)
		recordTiming(total)
	})
	return w
}

// realCacheDir is the invoking user's cache dir (tests never write there
// except for the shared npm cache).
func realCacheDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return d
	}
	return os.TempDir()
}

// writeOpenCodeConfig points OpenCode at the fake model: an
// @ai-sdk/openai-compatible provider with one tool-calling model, bash and
// edit allowed, no autoupdate, no sharing.
func (w *world) writeOpenCodeConfig() {
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{"fake": map[string]any{
			"npm":     "@ai-sdk/openai-compatible",
			"name":    "Fake",
			"options": map[string]any{"baseURL": w.model.OpenAIBaseURL(), "apiKey": "fake-key"},
			"models":  map[string]any{"fake-model": map[string]any{"name": "Fake", "tool_call": true}},
		}},
		"model":       "fake/fake-model",
		"small_model": "fake/fake-model",
		"permission":  map[string]any{"bash": "allow", "edit": "allow"},
		"autoupdate":  false,
		"share":       "disabled",
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	if err := os.WriteFile(filepath.Join(w.Home, ".config", "opencode", "opencode.json"), b, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

// startDaemon starts sessiond and, when the test fails, logs every session
// and the event log while the daemon still answers.
func (w *world) startDaemon(args ...string) *daemontest.Daemon {
	w.t.Helper()
	d := w.StartDaemon(args...)
	w.t.Cleanup(func() {
		if !w.t.Failed() {
			return
		}
		ls, _, _ := w.Ctl("ls", "--all", "--json")
		ev, _, _ := w.Ctl("events")
		w.t.Logf("sessions at failure:\n%s\nevents:\n%s", tail(ls, 6000), tail(ev, 6000))
		w.logAgentLogs()
	})
	return d
}

// logAgentLogs logs the end of each log OpenCode wrote in this world: its
// terminal says only "Unexpected error", its own log says which.
func (w *world) logAgentLogs() {
	logs, _ := filepath.Glob(filepath.Join(w.Home, ".local", "share", "opencode", "log", "*.log"))
	for _, l := range logs {
		w.t.Logf("%s:\n%s", l, logTail(l))
	}
}

// proj is the project directory agents run in.
func (w *world) proj() string { return filepath.Join(w.Home, "proj") }

// step logs a scenario's timing: the time since the previous step and since
// the start.
func (w *world) step(what string) {
	now := time.Now()
	line := fmt.Sprintf("%-45s +%-8s at %s", what, now.Sub(w.last).Round(time.Millisecond), now.Sub(w.began).Round(time.Millisecond))
	w.t.Logf("timing: %s", line)
	recordTiming("  " + w.t.Name() + ": " + line)
	w.last = now
}

// launch runs `sessionctl --json launch` (or resume) and decodes the answer.
func (w *world) launch(args ...string) api.LaunchResponse {
	w.t.Helper()
	var r api.LaunchResponse
	w.CtlJSON(&r, args...)
	return r
}

// action runs `sessionctl --json <action> id [flags]`.
func (w *world) action(args ...string) api.ActionResult {
	w.t.Helper()
	var r api.ActionResult
	w.CtlJSON(&r, args...)
	return r
}

// waitFor polls cond until it holds or within passes (testenv.EventuallyOK
// on the world's test); cond describes what it saw for the failure message.
func (w *world) waitFor(within time.Duration, what string, cond func() (bool, string)) {
	w.t.Helper()
	testenv.EventuallyOK(w.t, within, what, cond)
}

// waitSession waits until the session satisfies cond.
func (w *world) waitSession(id string, within time.Duration, what string, cond func(api.Session) bool) api.Session {
	w.t.Helper()
	var s api.Session
	w.waitFor(within, "session "+id+": "+what, func() (bool, string) {
		s = w.Show(id)
		b, _ := json.Marshal(s)
		return cond(s), string(b)
	})
	return s
}

// events reads the daemon's event log.
func (w *world) events() []session.Event {
	w.t.Helper()
	out, errs, code := w.Ctl("--json", "events")
	if code != 0 {
		w.t.Fatalf("sessionctl events: exit %d: %s", code, errs)
	}
	var evs []session.Event
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var ev session.Event
		if err := dec.Decode(&ev); err != nil {
			w.t.Fatalf("decode events: %v", err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// waitInterrupted waits (generously: polling is slow on a loaded machine)
// until the session is interrupted with the given problems, then checks
// from the event log that sessiond recorded that within limit of the kill,
// and returns the session and that latency.
func (w *world) waitInterrupted(id string, killed time.Time, limit time.Duration, kinds ...session.ProblemKind) (api.Session, time.Duration) {
	w.t.Helper()
	s := w.waitSession(id, 15*time.Second, fmt.Sprintf("interrupted with %v", kinds), func(s api.Session) bool {
		return s.Status == session.StatusInterrupted && hasProblems(s, kinds...)
	})
	var at time.Time
	for _, ev := range w.events() {
		if ev.SessionID != s.ID || ev.To != session.StatusInterrupted || ev.Time.Before(killed) {
			continue
		}
		have := map[session.ProblemKind]bool{}
		for _, k := range ev.Problems {
			have[k] = true
		}
		all := true
		for _, k := range kinds {
			all = all && have[k]
		}
		if all {
			at = ev.Time
			break
		}
	}
	if at.IsZero() {
		w.t.Fatalf("no event records %s interrupted with %v", id, kinds)
	}
	took := at.Sub(killed)
	if took > limit {
		w.t.Errorf("sessiond recorded %s interrupted with %v %s after the kill, want within %s", id, kinds, took.Round(time.Millisecond), limit)
	}
	return s, took
}

func hasProblems(s api.Session, kinds ...session.ProblemKind) bool {
	for _, k := range kinds {
		if s.Problem(k) == nil {
			return false
		}
	}
	return true
}

// problemDetails joins the details of every problem of a kind.
func problemDetails(s api.Session, kind session.ProblemKind) string {
	var out []string
	for _, p := range s.Problems {
		if p.Kind == kind {
			out = append(out, p.Detail)
		}
	}
	return strings.Join(out, "\n")
}

func problemKinds(s api.Session) []string {
	var out []string
	for _, p := range s.Problems {
		out = append(out, string(p.Kind))
	}
	return out
}

// start runs an agent (or any program) outside sessiond, in its own process
// group, with the world's environment, stdin from /dev/null and its output
// in a file under the test dir.
func (w *world) start(name, dir string, argv ...string) (*exec.Cmd, *daemontest.Buffer) {
	w.t.Helper()
	return w.startEnv(name, dir, nil, argv...)
}

// startEnv is start with env added to the world's environment (a
// CLAUDE_CONFIG_DIR, say).
func (w *world) startEnv(name, dir string, env []string, argv ...string) (*exec.Cmd, *daemontest.Buffer) {
	w.t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	// As a shell would: OpenCode takes its directory from $PWD.
	cmd.Env = append(append(w.Environ(), "PWD="+dir), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &daemontest.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		w.t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t := w.t
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("%s output:\n%s", name, tail(out.String(), 4000))
		}
	})
	return cmd, out
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// logTail is the end of a launched session's log, for failure messages.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	return tail(string(b), 3000)
}

// --- processes, read from /proc ---

// procInfo is what the tests need to know about a process.
type procInfo struct {
	PID, PPID, PGID int
	Comm            string
	Exe             string // the executable's path (/proc/pid/exe)
	Args            []string
	Env             map[string]string
}

func readProc(pid int) (procInfo, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procInfo{}, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 3 || f[0] == "Z" {
		return procInfo{}, false // a zombie is dead
	}
	p := procInfo{PID: pid}
	p.PPID, _ = strconv.Atoi(f[1])
	p.PGID, _ = strconv.Atoi(f[2])
	p.Comm = string(stat[bytes.IndexByte(stat, '(')+1 : i])
	p.Exe, _ = os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil {
		p.Args = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	}
	p.Env = map[string]string{}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid)); err == nil {
		for _, kv := range strings.Split(string(b), "\x00") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				p.Env[k] = v
			}
		}
	}
	return p, true
}

// procs lists live processes that match.
func procs(match func(procInfo) bool) []procInfo {
	ents, _ := os.ReadDir("/proc")
	var out []procInfo
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok && match(p) {
			out = append(out, p)
		}
	}
	return out
}

func alive(pid int) bool {
	_, ok := readProc(pid)
	return ok
}

func pids(ps []procInfo) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.PID)
	}
	return out
}

// isPython says whether p is the python3 a tool runs: the interpreter
// itself, by its executable. Neither the bash around it nor a version
// manager's shim on the way to it (pyenv's shims/python3 is a bash script,
// so its comm is "python3" for the few hundred ms it takes to find the real
// interpreter; a test that took it for the tool killed opencode too early,
// before any python3 existed to orphan).
func isPython(p procInfo) bool {
	return strings.HasPrefix(filepath.Base(p.Exe), "python3")
}

// longTool is a tool command that runs until killed (Claude refuses a bare
// sleep as a tool command).
const longTool = `python3 -c "import time; time.sleep(300)"`

func itoa(n int) string { return strconv.Itoa(n) }

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
