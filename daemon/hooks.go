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
	p, _ := r.Context().Value(peerKey).(peer)
	switch {
	case h.Activity == "":
		s.metrics.hooks.WithLabelValues(agent, "no_activity").Inc()
	case p.pid <= 0:
		s.metrics.hooks.WithLabelValues(agent, "no_caller").Inc()
		s.log.Warn("a hook whose caller is unknown is not taken", zap.String("agent", agent), zap.String("event", h.Event))
	default:
		from, err := s.ancestors(p.pid, hookAncestry)
		if err != nil {
			// The caller exited before it could be read: nothing ties the
			// hook to a process.
			s.metrics.hooks.WithLabelValues(agent, "no_caller").Inc()
			s.log.Warn("a hook whose caller cannot be read is not taken", zap.String("agent", agent), zap.String("event", h.Event), zap.Int("caller_pid", p.pid), zap.Error(err))
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
