package daemon

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/lib/printable"
	"github.com/sessiond/sessiond/proc"
)

// hookAncestry bounds the walk from a hook's caller up to the session's
// owner: sessionctl, a shell or two, the agent (Codex runs hooks from its
// app-server daemon directly; Claude Code through a shell), with room.
const hookAncestry = 12

// hook takes a hook an agent ran: `sessionctl hook <agent>` posts the
// hook's JSON verbatim. The adapter reads it; the tracker keeps it with
// the caller's ancestry, and a pass takes it for the session it names
// only when that session's live owner is among them (tracker/hooks.go).
// The answer says what was read; the agent never waits on it (sessionctl
// answers the agent at once whatever happens here).
func (s *server) hook(w http.ResponseWriter, r *http.Request) {
	agent := r.PathValue("agent")
	reader := s.hookReaders[agent]
	if reader == nil {
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no agent %q that runs hooks (these do: %s)", agent, strings.Join(slices.Sorted(maps.Keys(s.hookReaders)), ", ")))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "read the hook payload: "+err.Error())
		return
	}
	h, err := reader.ReadHook(body)
	if err != nil {
		s.metrics.hooks.WithLabelValues(agent, "bad").Inc()
		s.log.Warn("a hook payload that does not read", zap.String("agent", agent), zap.Error(err))
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	res := api.HookResult{Agent: agent, SessionID: h.UpstreamID, Event: h.Event, Activity: h.Activity, WaitingFor: h.WaitingFor}
	// One hook is taken at a time (each is a walk up /proc and an index
	// lookup, well under a millisecond): a flood of them queues here
	// rather than take every core from the lists and passes.
	select {
	case s.hookTurn <- struct{}{}:
		defer func() { <-s.hookTurn }()
	case <-r.Context().Done():
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "too many hooks at once: "+r.Context().Err().Error())
		return
	}
	p, _ := r.Context().Value(peerKey).(peer)
	switch {
	case h.Activity == "":
		s.metrics.hooks.WithLabelValues(agent, "no_activity").Inc()
	case p.pid <= 0:
		s.metrics.hooks.WithLabelValues(agent, "no_caller").Inc()
		s.log.Warn("a hook whose caller is unknown is not taken", zap.String("agent", agent), zap.String("event", h.Event))
		res.Refused = "the caller's process is unknown"
	default:
		from, err := s.ancestors(p.pid, hookAncestry)
		if err != nil {
			// The caller exited before it could be read: nothing ties the
			// hook to a process.
			s.metrics.hooks.WithLabelValues(agent, "no_caller").Inc()
			s.log.Warn("a hook whose caller cannot be read is not taken", zap.String("agent", agent), zap.String("event", h.Event), zap.Int("caller_pid", p.pid), zap.Error(err))
			res.Refused = "the caller's process cannot be read: " + err.Error()
			break
		}
		if why := s.toolOfAnother(agent, h.UpstreamID, from); why != "" {
			s.metrics.hooks.WithLabelValues(agent, "foreign").Inc()
			s.log.Warn("a hook from a tool of another session is not taken", zap.String("agent", agent), zap.String("event", h.Event),
				zap.String("upstream_id", h.UpstreamID), zap.Int("caller_pid", p.pid), zap.String("why", why))
			res.Refused = why
			break
		}
		s.tracker.Hook(agent, h, from)
		res.Taken = true
		s.metrics.hooks.WithLabelValues(agent, "taken").Inc()
		s.log.Debug("hook", zap.String("agent", agent), zap.String("event", h.Event), zap.String("upstream_id", h.UpstreamID),
			zap.String("activity", string(h.Activity)), zap.Int("caller_pid", p.pid))
	}
	writeJSON(w, http.StatusAccepted, res)
}

// toolOfAnother says why a hook naming session upstream came from a tool
// of another session of agent, or "" when nothing says so: a process of
// its ancestry carries the agent's tool variable set to another id. Codex
// runs every TUI session's tools under its one app-server, the owner of
// them all, so the owner's tree alone cannot tell a tool of one session
// from the agent itself running a hook for another. An ancestor whose
// environment cannot be read (it exited, or is another user's) says
// nothing.
func (s *server) toolOfAnother(agent, upstream string, from []proc.Identity) string {
	name := s.toolVars[agent]
	if name == "" || s.markerEnv == nil {
		return ""
	}
	for _, id := range from {
		env, err := s.markerEnv(id.PID)
		if err != nil {
			continue
		}
		if v, ok := env[name]; ok && v != upstream {
			return fmt.Sprintf("pid %d, which sent it or is its ancestor, is a tool of %s session %s (%s), not of %s", id.PID, agent, oneline(v), name, upstream)
		}
	}
	return ""
}

// oneline cuts a value read from a process for a message.
func oneline(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return printable.Line(s)
}
