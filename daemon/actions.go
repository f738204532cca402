package daemon

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/actions"
	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// maxSignalTimeout keeps stop and reap inside the handler timeout.
const maxSignalTimeout = 25 * time.Second

// actionInput reads an action's session and body, and takes the
// session's action lock (acting.go): the record returned is the session
// as stored once the lock is held. On success the caller must call
// unlock when its action is done.
func (s *server) actionInput(w http.ResponseWriter, r *http.Request) (rec *session.Record, req api.ActionRequest, timeout time.Duration, unlock func(), ok bool) {
	ref := r.PathValue("id")
	rec, err := s.store.Lookup(ref)
	if err != nil {
		s.lookupError(w, ref, err)
		return nil, req, 0, nil, false
	}
	if r.ContentLength != 0 && !decodeBody(w, r, &req) {
		return nil, req, 0, nil, false
	}
	timeout = 10 * time.Second
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d <= 0 || d > maxSignalTimeout {
			writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("timeout %q: want a duration between 0 and %s", req.Timeout, maxSignalTimeout))
			return nil, req, 0, nil, false
		}
		timeout = d
	}
	unlock, err = s.acting.lock(r.Context(), rec.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return nil, req, 0, nil, false
	}
	if rec, err = s.store.Get(rec.ID); err != nil {
		unlock()
		s.lookupError(w, ref, err)
		return nil, req, 0, nil, false
	}
	return rec, req, timeout, unlock, true
}

func repairTarget(rec *session.Record) adapters.RepairTarget {
	t := adapters.RepairTarget{UpstreamID: rec.UpstreamID, Source: rec.Source, Cwd: rec.Cwd}
	if rec.Resume != nil {
		t.Root = rec.Resume.Root
	}
	return t
}

// summarize counts outcomes for the event log and the answer.
func summarize(action string, applied bool, steps []session.Step) string {
	n := map[string]int{}
	for _, st := range steps {
		n[st.Outcome]++
	}
	var parts []string
	for _, o := range []string{session.OutcomeDone, session.OutcomePlanned, session.OutcomePending, session.OutcomeFailed, session.OutcomeSkipped} {
		if n[o] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[o], o))
		}
	}
	if len(parts) == 0 {
		parts = []string{"nothing to do"}
	}
	verb := action
	if !applied {
		verb += " (dry run)"
	}
	return verb + ": " + strings.Join(parts, ", ")
}

// actionNotRecorded is the 500 answer of an action carried out but not
// recorded: an api.Error for clients that read only that, and the whole
// ActionResult, so the steps that were carried out are not lost.
type actionNotRecorded struct {
	api.Error
	api.ActionResult
}

// finish records an applied action as an event, reconciles at once so the
// status reflects what the action did, and answers with the session. An
// action whose event the store refused answers 500 (api.CodeNotRecorded) with
// its steps: it happened, and the event log does not say so.
func (s *server) finish(w http.ResponseWriter, r *http.Request, rec *session.Record, action string, applied bool, steps []session.Step) {
	if steps == nil {
		steps = []session.Step{}
	}
	sum := summarize(action, applied, steps)
	var recErr error
	if applied {
		recErr = s.tracker.AppendActionFrom(rec, sum, originOf(r))
		if _, err := s.tracker.Reconcile(context.Background(), "action"); err != nil {
			s.log.Warn("reconcile after action", zap.String("action", action), zap.Error(err))
		}
		if fresh, err := s.store.Get(rec.ID); err == nil {
			rec = fresh
		}
	}
	res := api.ActionResult{Action: action, Applied: applied, Steps: steps, Summary: sum, Session: api.FromRecord(rec)}
	if recErr != nil {
		msg := fmt.Sprintf("%s was carried out (%s; the steps are in this answer) but is not in the event log: %v", action, sum, recErr)
		writeJSON(w, http.StatusInternalServerError, actionNotRecorded{Error: api.Error{Error: msg, Code: api.CodeNotRecorded}, ActionResult: res})
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// repairSession: POST /v1/sessions/{id}/repair. A dry run unless apply.
func (s *server) repairSession(w http.ResponseWriter, r *http.Request) {
	rec, req, _, unlock, ok := s.actionInput(w, r)
	if !ok {
		return
	}
	defer unlock()
	rp, ok := s.repairers[rec.Agent]
	if !ok {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("sessiond cannot repair %s sessions", rec.Agent))
		return
	}
	var steps []session.Step
	var err error
	if req.Apply {
		steps, err = rp.ApplyRepair(r.Context(), repairTarget(rec))
	} else {
		steps, err = rp.PlanRepair(r.Context(), repairTarget(rec))
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "repair: "+err.Error())
		return
	}
	s.finish(w, r, rec, "repair", req.Apply, steps)
}

// abortSession: POST /v1/sessions/{id}/abort, the stuck-busy escape hatch.
// An agent with an abort of its own (OpenCode's server) does it; otherwise
// a dead owner's session is repaired, and a live one cannot be aborted
// from outside (stop it instead).
func (s *server) abortSession(w http.ResponseWriter, r *http.Request) {
	rec, _, _, unlock, ok := s.actionInput(w, r)
	if !ok {
		return
	}
	defer unlock()
	if ab, ok := s.aborters[rec.Agent]; ok {
		steps, err := ab.Abort(r.Context(), repairTarget(rec))
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "abort: "+err.Error())
			return
		}
		s.finish(w, r, rec, "abort", true, steps)
		return
	}
	if pid := s.liveOwner(rec); pid != 0 {
		writeError(w, http.StatusConflict, api.CodeAlreadyRunning, fmt.Sprintf("%s cannot be told to abort a turn from outside; its owner pid %d is alive: use stop", rec.Agent, pid))
		return
	}
	rp, ok := s.repairers[rec.Agent]
	if !ok {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("sessiond cannot abort %s sessions", rec.Agent))
		return
	}
	steps, err := rp.ApplyRepair(r.Context(), repairTarget(rec))
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "abort (repair of a dead owner's session): "+err.Error())
		return
	}
	s.finish(w, r, rec, "abort", true, steps)
}

// reapSession: POST /v1/sessions/{id}/reap. Terminates tool processes
// positively attributed to the dead session by a fresh observation (an
// orphan_processes issue with its Process), never anything else: a
// suspect the adapter names without one is left alone. A dry run unless apply. The terminator signals a process
// group as one when every live process of it is among these targets (a
// killed agent's MCP servers stay in its group), else each pid alone, and
// probes each identity before each signal.
func (s *server) reapSession(w http.ResponseWriter, r *http.Request) {
	rec, req, timeout, unlock, ok := s.actionInput(w, r)
	if !ok {
		return
	}
	defer unlock()
	livePID := s.liveOwner(rec)
	obs, err := s.tracker.Observe(r.Context(), rec.Agent, rec.UpstreamID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, "reap needs a fresh look at the processes: "+err.Error())
		return
	}
	var targets []actions.Target
	suspects := 0
	if obs != nil {
		for _, p := range obs.Problems {
			switch {
			case p.Kind != session.ProblemOrphanProcesses:
			case p.Process != nil:
				targets = append(targets, actions.Target{ID: *p.Process, What: p.Detail})
			default:
				suspects++ // named without proof it is this session's: never a target
			}
		}
	}
	// A live owner's tool processes are not orphans. But an orphan the
	// adapter attributes (the process tree proves it its own agent
	// process's, and that process is dead) stays one when the session has
	// a live owner again: the real OpenCode's `opencode serve` in the same
	// directory takes over a session whose `opencode run` was killed, and
	// the run's python3 must still be reapable.
	if livePID != 0 && len(targets) == 0 {
		writeError(w, http.StatusConflict, api.CodeAlreadyRunning, fmt.Sprintf("owner pid %d is alive: its tool processes are not orphans (stop the session instead)", livePID))
		return
	}
	var steps []session.Step
	switch {
	case len(targets) == 0:
		detail := "no live process is attributed to this session"
		if suspects > 0 {
			detail += fmt.Sprintf("; %d suspect process(es) carry its marker with no proof they are its, and are never reaped (its orphan_processes problems say which)", suspects)
		}
		steps = []session.Step{session.StepSkipped("nothing to reap", rec.ID, detail)}
	case req.Apply:
		steps = s.terminator.Terminate(r.Context(), targets, timeout, req.Force)
	default:
		steps = s.terminator.Plan(targets, timeout, req.Force)
	}
	s.finish(w, r, rec, "reap", req.Apply, steps)
}

// stopSession: POST /v1/sessions/{id}/stop. SIGTERM to the owner (its
// process group when sessiond launched it), SIGKILL after the timeout. The
// status change comes from the tracker noticing the exit, not from here.
func (s *server) stopSession(w http.ResponseWriter, r *http.Request) {
	rec, req, timeout, unlock, ok := s.actionInput(w, r)
	if !ok {
		return
	}
	defer unlock()
	var alive []proc.Identity
	for _, id := range ownerAndCandidates(rec) {
		if s.tracker.Probe(id).Liveness == proc.Alive {
			alive = append(alive, id)
		}
	}
	switch {
	case len(alive) == 0:
		writeError(w, http.StatusConflict, api.CodeNotRunning, fmt.Sprintf("session %s is not running (%s)", rec.ID, rec.Status))
		return
	case len(alive) > 1:
		writeError(w, http.StatusConflict, api.CodeOwnerAmbiguous, fmt.Sprintf("session %s could be owned by %d live processes; sessiond will not guess which to stop", rec.ID, len(alive)))
		return
	}
	what := "owner"
	if rec.Launched {
		what = "owner and its process group (launched by sessiond)"
	}
	steps := s.terminator.Terminate(r.Context(), []actions.Target{{ID: alive[0], Group: rec.Launched, What: what}}, timeout, req.Force)
	// A prompt queued before the stop would resume the session its user
	// just stopped: they go with it.
	if n, err := s.cancelQueued(rec.ID, "cancelled: the session was stopped (sessionctl stop)"); err != nil {
		steps = append(steps, session.StepFailed("cancel the queued prompts", rec.ID, "", err))
	} else if n > 0 {
		steps = append(steps, session.StepDone("cancel the queued prompts", rec.ID, fmt.Sprintf("%d queued prompt(s) cancelled: a stopped session is not resumed by a prompt queued before", n)))
	}
	s.finish(w, r, rec, "stop", true, steps)
}

func ownerAndCandidates(rec *session.Record) []proc.Identity {
	var ids []proc.Identity
	if rec.Owner != nil {
		ids = append(ids, *rec.Owner)
	}
	for _, c := range rec.Candidates {
		if rec.Owner == nil || c != *rec.Owner {
			ids = append(ids, c)
		}
	}
	return ids
}

// originOf is who a request says it acts for (api.OriginHeader), kept to
// one printable line of at most 200 bytes: it goes into the event log.
func originOf(r *http.Request) string {
	o := strings.Map(func(c rune) rune {
		if c < 0x20 || c == 0x7f {
			return -1
		}
		return c
	}, r.Header.Get(api.OriginHeader))
	if len(o) > 200 {
		o = strings.ToValidUTF8(o[:200], "")
	}
	return o
}
