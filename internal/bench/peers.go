package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/internal/testkit/testenv"
	"github.com/sessiond/sessiond/session"
)

// peers: Claude Code's own lister, `claude agents --json`, and `sessionctl
// ls --json` list the same config root: live owner processes with true
// registry entries and transcripts, and the entries a kill -9 left behind.
// Both wall times, and whether the two agree on which sessions live.
func (r *runner) peers(ctx context.Context) error {
	bin := r.opt.ClaudeBin
	if bin == "" {
		r.add("peers", "skipped", "SESSIOND_CLAUDE_BIN is not set: no real claude CLI to compare with", "", nil,
			"install the pinned Claude Code with `bash scripts/install-agents.sh > /tmp/agents.env; export $(cat /tmp/agents.env)`, or give -claude-bin")
		return nil
	}
	if st, err := os.Stat(bin); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		r.add("peers", "skipped", fmt.Sprintf("SESSIOND_CLAUDE_BIN=%s is not an executable file (%v)", bin, err), "", nil, "rerun scripts/install-agents.sh")
		return nil
	}
	version := "?"
	if out, err := exec.CommandContext(ctx, bin, "--version").Output(); err == nil {
		if f := strings.Fields(string(out)); len(f) > 0 {
			version = f[0]
		}
	}

	dir, owners, done, err := r.ownersWorld("peers")
	if err != nil {
		return err
	}
	defer done()
	live := map[string]bool{}
	for i := range r.opt.PeerOwners {
		o, err := owners.Start(fmt.Sprintf("/home/u/src/peer-%02d", i%10))
		if err != nil {
			return err
		}
		live[o.SessionID] = true
	}
	// Entries a kill -9 leaves: the file stays, the process is gone.
	dead := max(1, r.opt.PeerOwners/4)
	for i := range dead {
		o, err := owners.Start(fmt.Sprintf("/home/u/src/peer-%02d", i%10))
		if err != nil {
			return err
		}
		o.kill()
		o.wait()
	}

	d, err := r.startDaemon(dir, daemonConfig{ClaudeDirs: []string{owners.Root.Dir}})
	if err != nil {
		return err
	}
	defer d.Stop()
	if err := d.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	if _, err := d.WaitStatus(ctx, string(session.StatusRunning), len(live), time.Minute); err != nil {
		return err
	}

	// Claude Code's lister runs offline with a home of its own and the
	// config root in CLAUDE_CONFIG_DIR; it needs nothing else (no login:
	// it only reads <root>/sessions and checks each pid with kill(pid, 0)
	// and /proc/<pid>/stat's start time).
	home := filepath.Join(dir, "claude-home")
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	claudeEnv := append(testenv.Isolated(home, filepath.Join(dir, "none.sock"), filepath.Join(dir, "none")),
		"CLAUDE_CONFIG_DIR="+owners.Root.Dir, "DISABLE_TELEMETRY=1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_ERROR_REPORTING=1")
	ctlEnv := testenv.Isolated(d.Home, d.Socket, d.StateDir)

	claude, err := timeRuns(ctx, r.opt.PeerRuns, home, claudeEnv, bin, []string{"agents", "--json"}, decodeAgents)
	if err != nil {
		return fmt.Errorf("claude agents --json: %w", err)
	}
	ctl, err := timeRuns(ctx, r.opt.PeerRuns, home, ctlEnv, r.opt.Bins.Sessionctl, []string{"ls", "--json"}, decodeRunning)
	if err != nil {
		return fmt.Errorf("sessionctl ls --json: %w", err)
	}

	world := fmt.Sprintf("%d live owners (sleep processes) with true registry entries (procStart, this host's pidDomain) and transcripts, plus %d entry(ies) of killed owners (kill -9 leaves the file), in one config root", len(live), dead)
	how := fmt.Sprintf("%s; wall time of the process, %d runs after one warm-up; CPU is the child's user+system time", world, r.opt.PeerRuns)
	r.add("peers", fmt.Sprintf("`claude agents --json` (Claude Code %s)", version), runsValue(claude), "", nil,
		how+"; run with HOME=<a temp home>, CLAUDE_CONFIG_DIR=<the root>, telemetry, updates and error reports off, offline")
	r.add("peers", "`sessionctl ls --json`", runsValue(ctl), "", nil,
		how+"; against a sessiond started on the root (--claude-dir), once it showed every live session running: sessionctl asks the running daemon, whose own passes are not in this figure, while claude agents reads and checks the registry itself on every call")
	r.add("peers", "live set", agreement(live, claude.ids, ctl.ids), "the same", ptr(sameSet(claude.ids, ctl.ids) && sameSet(ctl.ids, live)),
		"session ids claude lists against those sessionctl shows running, and both against the owners started (each run's answer must be the same)")
	return nil
}

type runs struct {
	wall, cpu Percentiles
	ids       map[string]bool
}

func runsValue(r runs) string {
	return fmt.Sprintf("p50 %s, max %s (CPU p50 %s); %d live listed", dur(r.wall.P50), dur(r.wall.Max), dur(r.cpu.P50), len(r.ids))
}

// timeRuns runs a command n times after a warm-up and decodes each output
// to a set of live session ids, which must not change between runs.
func timeRuns(ctx context.Context, n int, dir string, env []string, bin string, args []string, decode func([]byte) (map[string]bool, error)) (runs, error) {
	var out runs
	var wall, cpu []time.Duration
	for i := 0; i <= n; i++ {
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Dir = env, dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		t0 := time.Now()
		b, err := cmd.Output()
		el := time.Since(t0)
		if err != nil {
			return out, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
		}
		ids, err := decode(b)
		if err != nil {
			return out, fmt.Errorf("decode %.200q: %w", b, err)
		}
		if i > 0 && !sameSet(ids, out.ids) {
			return out, fmt.Errorf("run %d listed %d live sessions, the one before %d", i, len(ids), len(out.ids))
		}
		out.ids = ids
		if i > 0 {
			wall = append(wall, el)
			cpu = append(cpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
		}
	}
	out.wall, out.cpu = percentile(wall), percentile(cpu)
	return out, nil
}

// decodeAgents reads `claude agents --json`: a list of
// {pid, cwd, kind, startedAt, sessionId, name, status}, live ones only.
func decodeAgents(b []byte) (map[string]bool, error) {
	var l []struct {
		SessionID string `json:"sessionId"`
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, a := range l {
		ids[a.SessionID] = true
	}
	return ids, nil
}

// decodeRunning reads `sessionctl ls --json` and keeps the running ones.
func decodeRunning(b []byte) (map[string]bool, error) {
	ss, err := decodeSessions(b)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, s := range ss {
		if s.Status == session.StatusRunning {
			ids[s.UpstreamID] = true
		}
	}
	return ids, nil
}

// decodeSessions reads a session list as sessionctl prints it: the
// daemon's {"sessions": [...]}, or a bare list.
func decodeSessions(b []byte) ([]api.Session, error) {
	var l []api.Session
	if err := json.Unmarshal(b, &l); err == nil {
		return l, nil
	}
	var wrapped api.SessionList
	if err := json.Unmarshal(b, &wrapped); err != nil {
		return nil, err
	}
	return wrapped.Sessions, nil
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// agreement says how the two live sets compare.
func agreement(live, claude, ctl map[string]bool) string {
	if sameSet(claude, ctl) && sameSet(ctl, live) {
		return fmt.Sprintf("the same %d sessions live in both, exactly the live owners", len(live))
	}
	diff := func(a, b map[string]bool) []string {
		var out []string
		for k := range a {
			if !b[k] {
				out = append(out, k)
			}
		}
		sort.Strings(out)
		return out
	}
	var parts []string
	if d := diff(claude, ctl); len(d) > 0 {
		parts = append(parts, fmt.Sprintf("only claude lists %s", shortList(d)))
	}
	if d := diff(ctl, claude); len(d) > 0 {
		parts = append(parts, fmt.Sprintf("only sessionctl shows running %s", shortList(d)))
	}
	if d := diff(live, claude); len(d) > 0 {
		parts = append(parts, fmt.Sprintf("live but not listed by claude: %s", shortList(d)))
	}
	if d := diff(live, ctl); len(d) > 0 {
		parts = append(parts, fmt.Sprintf("live but not running in sessionctl: %s", shortList(d)))
	}
	return "differ: " + strings.Join(parts, "; ")
}

func shortList(ids []string) string {
	s := slices.Clone(ids)
	more := ""
	if len(s) > 3 {
		more = fmt.Sprintf(" and %d more", len(s)-3)
		s = s[:3]
	}
	return strings.Join(s, ", ") + more
}
