package realagents

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/session"
)

// invariantEvery is how often watchLiveNeverDead lists the sessions.
const invariantEvery = 100 * time.Millisecond

// claimGrace is how long a session may stay stopped or interrupted while a
// live process claims it in the agent's own data (a registry entry, or an
// owner the test identified) before the watch calls it a violation: a
// revived session (invariant 4) is noticed at the next pass, not at once.
// An owner sessiond itself names gets no grace.
const claimGrace = 2 * time.Second

// liveWatch is a running check of docs/design.md's first invariant from outside:
// no session whose owner process lives is ever reported stopped or
// interrupted.
type liveWatch struct {
	w    *world
	stop chan struct{}
	done chan struct{}

	claudeRoots []string

	mu       sync.Mutex
	checks   int
	failures int
	lastErr  error
	maxGap   time.Duration
	reported map[string]bool
	// claims are owners the test identified: agent/upstream -> pid.
	claims map[string]claim
	// since is when each claim was first seen broken, by agent/upstream/pid.
	since map[string]time.Time
}

// claim is a live process that owns an upstream session, as the agent's
// data or the test knows it.
type claim struct {
	agent, upstream string
	pid             int
	ticks           uint64
	how             string
}

// watchLiveNeverDead starts a goroutine that, every 100 ms until the test
// ends, lists every session of the world's daemon and fails the test when
// one is stopped or interrupted while its owner lives, as the test itself
// reads /proc (the pid exists, is not a zombie, and has the expected start
// ticks). The owner is the one sessiond names (or any of its candidates);
// and, because the seed bug reports a live owner as dead without naming
// it, also every live claude that a registry entry in the world's roots
// (and extraClaudeRoots) names with its procStart, and every owner the
// test declared with claim; those get claimGrace. Start it after the
// daemon; its cleanup stops it before the daemon's.
func (w *world) watchLiveNeverDead(extraClaudeRoots ...string) *liveWatch {
	w.t.Helper()
	lw := &liveWatch{w: w, stop: make(chan struct{}), done: make(chan struct{}), reported: map[string]bool{},
		claudeRoots: append([]string{w.claudeRoot()}, extraClaudeRoots...),
		claims:      map[string]claim{}, since: map[string]time.Time{}}
	c := api.NewClient(w.Socket)
	go func() {
		defer close(lw.done)
		tick := time.NewTicker(invariantEvery)
		defer tick.Stop()
		last := time.Now()
		for {
			lw.check(c)
			now := time.Now()
			lw.mu.Lock()
			if gap := now.Sub(last); gap > lw.maxGap {
				lw.maxGap = gap
			}
			lw.mu.Unlock()
			last = now
			select {
			case <-lw.stop:
				return
			case <-tick.C:
			}
		}
	}()
	w.t.Cleanup(lw.end)
	return lw
}

// claim tells the watch that the live process pid owns the agent's upstream
// session (an owner the agent's data does not name: OpenCode's).
func (lw *liveWatch) claim(agent, upstream string, pid int) {
	lw.w.t.Helper()
	ticks, ok := procStart(pid)
	if !ok {
		lw.w.t.Fatalf("claim: %s session %s: pid %d is not alive", agent, upstream, pid)
	}
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.claims[agent+"/"+upstream+"/"+itoa(pid)] = claim{agent: agent, upstream: upstream, pid: pid, ticks: ticks, how: "the test identified"}
}

// end stops the watch and logs what it did.
func (lw *liveWatch) end() {
	select {
	case <-lw.stop:
		return
	default:
	}
	close(lw.stop)
	<-lw.done
	lw.mu.Lock()
	defer lw.mu.Unlock()
	line := fmt.Sprintf("invariant watch: %d checks, %d list errors, longest gap %s, %d violations",
		lw.checks, lw.failures, lw.maxGap.Round(time.Millisecond), len(lw.reported))
	if lw.lastErr != nil {
		line += fmt.Sprintf(" (last error: %v)", lw.lastErr)
	}
	lw.w.t.Log(line)
	recordTiming("  " + lw.w.t.Name() + ": " + line)
}

// check lists the sessions once and reports every violation not reported
// before.
func (lw *liveWatch) check(c *api.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	list, err := c.Sessions(ctx, api.ListOptions{All: true})
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if err != nil {
		lw.failures++
		lw.lastErr = err
		return
	}
	lw.checks++
	now := time.Now()
	byUpstream := map[string]api.Session{}
	for _, s := range list {
		byUpstream[s.Agent+"/"+s.UpstreamID] = s
		if !dead(s) {
			continue
		}
		for pid, who := range liveOwners(s) {
			lw.report(s, "owner "+itoa(pid), who)
		}
	}
	// Owners the agents' data (and the test) name.
	claims := lw.claudeClaims()
	for k, c := range lw.claims {
		if t, ok := procStart(c.pid); ok && t == c.ticks {
			claims[k] = c
		}
	}
	for k, c := range claims {
		s, ok := byUpstream[c.agent+"/"+c.upstream]
		if !ok || !dead(s) {
			delete(lw.since, k)
			continue
		}
		first, seen := lw.since[k]
		if !seen {
			lw.since[k] = now
			continue
		}
		if now.Sub(first) >= claimGrace {
			lw.report(s, "claim "+itoa(c.pid), fmt.Sprintf("for %s pid %d (start %d), which %s, lives: %s",
				now.Sub(first).Round(time.Millisecond), c.pid, c.ticks, c.how, cmdline(c.pid)))
		}
	}
	for k := range lw.since {
		if _, ok := claims[k]; !ok {
			delete(lw.since, k)
		}
	}
}

func dead(s api.Session) bool {
	return s.Status == session.StatusStopped || s.Status == session.StatusInterrupted
}

// report fails the test once per session and owner (key).
func (lw *liveWatch) report(s api.Session, key, who string) {
	key = s.ID + "/" + key
	if lw.reported[key] {
		return
	}
	lw.reported[key] = true
	lw.w.t.Errorf("INVARIANT BROKEN at %s: %s session %s (upstream %s) reported %s (%s), problems %v, while %s",
		time.Since(lw.w.began).Round(time.Millisecond), s.Agent, s.ID, s.UpstreamID, s.Status, s.StatusReason, problemKinds(s), who)
}

// claudeClaims reads the registry entries of the watched roots: each one
// whose pid lives with the procStart it records names a live owner of its
// sessionId. Keyed like claims.
func (lw *liveWatch) claudeClaims() map[string]claim {
	out := map[string]claim{}
	for _, root := range lw.claudeRoots {
		ents, _ := os.ReadDir(filepath.Join(root, "sessions"))
		for _, e := range ents {
			pid, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".json"))
			if err != nil || !strings.HasSuffix(e.Name(), ".json") {
				continue
			}
			r, ok := readClaudeReg(root, pid)
			if !ok || r.SessionID == "" || r.ProcStart == "" {
				continue
			}
			if ticks, ok := procStart(pid); ok && strconv.FormatUint(ticks, 10) == r.ProcStart {
				out["claude/"+r.SessionID+"/"+itoa(pid)] = claim{agent: "claude", upstream: r.SessionID, pid: pid, ticks: ticks,
					how: "its registry entry " + filepath.Join(root, "sessions", e.Name()) + " names"}
			}
		}
	}
	return out
}

// liveOwners describes, by pid, the session's owner and candidates that
// are alive now.
func liveOwners(s api.Session) map[int]string {
	out := map[int]string{}
	if s.PID > 0 {
		if ticks, ok := procStart(s.PID); ok && (s.PIDStart == 0 || ticks == s.PIDStart) {
			out[s.PID] = fmt.Sprintf("its owner pid %d (start %d) lives: %s", s.PID, ticks, cmdline(s.PID))
		}
	}
	for _, pid := range s.CandidatePIDs {
		if _, ok := out[pid]; ok {
			continue
		}
		if _, ok := procStart(pid); ok {
			out[pid] = fmt.Sprintf("its candidate owner pid %d lives: %s", pid, cmdline(pid))
		}
	}
	return out
}

// procStart reads a live process's start ticks (field 22 of
// /proc/<pid>/stat); ok is false when it does not exist or is a zombie.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	return ticks, err == nil
}

// cmdline is a process's argv on one short line.
func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
