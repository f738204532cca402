package opencode

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// memoTTL is how long a process is remembered as a session's owner after it
// was last seen, so tool processes it leaves behind can be attributed.
const memoTTL = 24 * time.Hour

// ownerMemo remembers a process that owned sessions.
type ownerMemo struct {
	id       proc.Identity
	sessions map[string]bool
	seen     time.Time
}

// orphans finds tool processes whose OPENCODE_PID names a dead opencode
// process, attributed to the sessions that process owned when it was seen.
func (a *Adapter) orphans(snap *proc.Snapshot) map[string][]adapters.Issue {
	out := map[string][]adapters.Issue{}
	if snap == nil {
		return out
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	pids := make([]int, 0)
	for pid, p := range snap.Procs {
		if p.Env["OPENCODE_PID"] != "" && p.State != 'Z' && p.State != 'X' {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	for _, pid := range pids {
		p := snap.Procs[pid]
		ownerPID, err := strconv.Atoi(p.Env["OPENCODE_PID"])
		if err != nil || ownerPID <= 0 {
			continue
		}
		if o := snap.Procs[ownerPID]; o != nil && o.State != 'Z' && o.State != 'X' && o.Identity.StartTicks <= p.Identity.StartTicks {
			if _, _, ok := commandLine(o.Argv); ok {
				continue // its opencode lives
			}
		}
		m, ok := a.memo[ownerPID]
		if !ok || m.id.StartTicks > p.Identity.StartTicks {
			a.log.Debug("orphaned OpenCode tool process with an unknown owner", zap.Int("pid", pid), zap.Int("opencode_pid", ownerPID))
			continue
		}
		cmd := strings.Join(p.Argv, " ")
		if len(cmd) > 80 {
			cmd = cmd[:80] + "…"
		}
		var since time.Time
		if t, err := a.cfg.StartTimer.StartTime(p.Identity); err == nil {
			since = t
		}
		// The identity lets reap signal exactly this process.
		id := p.Identity
		is := adapters.Issue{
			Kind:    session.ProblemOrphanProcesses,
			Key:     strconv.Itoa(pid),
			Detail:  fmt.Sprintf("pid %d (%s) still runs; its opencode (pid %d) is dead", pid, cmd, ownerPID),
			Since:   since,
			Process: &id,
		}
		for sid := range m.sessions {
			out[sid] = append(out[sid], is)
		}
	}
	return out
}
