package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/launch"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// A prompt goes to a session the way its user would give it: an idle
// running session gets it where it reads prompts (its agent's server, else
// its tmux pane), a stopped one is resumed with it (the resume rules), a
// busy or waiting one refuses it unless it is queued, to be delivered once
// when the session is idle or stopped.

// notIdleError: the session is busy, waiting, starting or unknown, or it
// has not shown activity since the last prompt it was handed (pending).
type notIdleError struct {
	rec     *session.Record
	pending bool
}

func (e *notIdleError) Error() string {
	if e.pending {
		return fmt.Sprintf("session %s was handed a prompt at %s and has not taken it up yet (no activity since): another now would land on top of it (send with --when-idle to queue it)",
			e.rec.ID, e.rec.PromptAt.UTC().Format(time.RFC3339))
	}
	what := string(e.rec.Status)
	if e.rec.Status == session.StatusRunning {
		what = string(e.rec.Activity)
		if w := e.rec.WaitingFor; w != nil && e.rec.Activity == session.ActivityWaiting {
			what += " for " + string(w.Kind)
		}
	}
	return fmt.Sprintf("session %s is %s: a prompt now would interrupt it (send with --when-idle to queue it)", e.rec.ID, what)
}

// sendError is a failed delivery with its HTTP answer. later says that
// nothing reached the session and the reason may pass (its agent is not
// in its pane's foreground now): a queued prompt stays queued.
type sendError struct {
	status int
	code   string
	msg    string
	later  bool
}

func (e *sendError) Error() string { return e.msg }

// sendSession: POST /v1/sessions/{id}/send.
func (s *server) sendSession(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("id")
	rec, err := s.store.Lookup(ref)
	if err != nil {
		s.lookupError(w, ref, err)
		return
	}
	var req api.SendRequest
	if !decodeBody(w, r, &req) {
		return
	}
	if strings.TrimSpace(req.Prompt) == "" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "an empty prompt: nothing to send")
		return
	}
	if req.Mode != "" && req.Mode != "headless" && req.Mode != "tmux" {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("mode %q: want headless or tmux", req.Mode))
		return
	}
	unlock, err := s.acting.lock(r.Context(), rec.ID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable, err.Error())
		return
	}
	defer unlock()
	// As it stands now, under the lock: what the caller looked up may be
	// a delivery or a stop ago.
	if rec, err = s.store.Get(rec.ID); err != nil {
		s.lookupError(w, ref, err)
		return
	}
	via, err := s.deliver(r.Context(), rec, req.Prompt, req.Mode)
	var busy *notIdleError
	var se *sendError
	switch {
	case err == nil:
		s.tracker.AppendActionFrom(rec, "prompt delivered via "+via, originOf(r))
		writeJSON(w, http.StatusOK, api.SendResponse{Delivered: true, Via: via, Session: s.current(rec)})
	case req.WhenIdle && (errors.As(err, &busy) || errors.As(err, &se) && se.later):
		x := session.Send{ID: state.NewID(), SessionID: rec.ID, Prompt: req.Prompt, Mode: req.Mode,
			State: session.SendQueued, CreatedAt: time.Now().UTC()}
		x.UpdatedAt = x.CreatedAt
		if se != nil {
			x.Error = "waiting: " + se.msg
		}
		if err := s.store.PutSend(x); err != nil {
			writeError(w, http.StatusInternalServerError, api.CodeInternal, "queue the prompt: "+err.Error())
			return
		}
		s.tracker.AppendActionFrom(rec, fmt.Sprintf("prompt %s queued until the session is idle", x.ID), originOf(r))
		s.sendQueue.wake()
		writeJSON(w, http.StatusAccepted, api.SendResponse{Queued: &x, Session: api.FromRecord(rec)})
	case errors.As(err, &busy):
		writeError(w, http.StatusConflict, api.CodeBusy, err.Error())
	case errors.As(err, &se):
		writeError(w, se.status, se.code, se.msg)
	default:
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	}
}

// current is rec as stored now, or rec if it cannot be read.
func (s *server) current(rec *session.Record) api.Session {
	if now, err := s.store.Get(rec.ID); err == nil {
		return api.FromRecord(now)
	}
	return api.FromRecord(rec)
}

// deliver hands prompt to rec now, or says why not (a *notIdleError when
// it must wait; a *sendError for an answer of the API's). The caller
// holds rec's action lock and read rec under it.
//
// An idle session's prompt is recorded on it (Tracker.NotePrompt) before
// it goes: until the session shows activity after that moment, it takes
// no other, whichever way that one comes (send, the queue, after a
// restart). When the prompt never reached it, the record is put back.
func (s *server) deliver(ctx context.Context, rec *session.Record, prompt, mode string) (via string, err error) {
	if rec.Status.Terminal() {
		// A resume launches the agent with the prompt; the session is
		// starting, then busy with it, and takes no other meanwhile.
		at := time.Now()
		prev, err := s.tracker.NotePrompt(rec.ID, &at)
		if err != nil {
			return "", &sendError{http.StatusInternalServerError, api.CodeInternal, err.Error(), false}
		}
		via, err := s.resumeWith(ctx, rec, prompt, mode)
		if err != nil {
			// The resume answers before it launches anything, or fails
			// to launch: the prompt went nowhere.
			_, _ = s.tracker.NotePrompt(rec.ID, prev)
		}
		return via, err
	}
	switch {
	case rec.Status != session.StatusRunning || rec.Activity != session.ActivityIdle:
		return "", &notIdleError{rec: rec}
	case rec.PromptPending():
		return "", &notIdleError{rec: rec, pending: true}
	case rec.Owner == nil:
		return "", &sendError{http.StatusConflict, api.CodeNotHeld, fmt.Sprintf("session %s names no owner process to hand the prompt to", rec.ID), true}
	}
	at := time.Now()
	prev, err := s.tracker.NotePrompt(rec.ID, &at)
	if err != nil {
		return "", &sendError{http.StatusInternalServerError, api.CodeInternal, err.Error(), false}
	}
	via, reached, err := s.handOver(ctx, rec, prompt)
	if err != nil && !reached {
		if _, rerr := s.tracker.NotePrompt(rec.ID, prev); rerr != nil {
			s.log.Warn("a prompt that never reached its session is still recorded as delivered", zap.String("session", rec.ID), zap.Error(rerr))
		}
	}
	return via, err
}

// handOver gives prompt to the live, idle session rec where it reads
// prompts: its agent's server, else its tmux pane. reached says whether
// any of it may have got there.
func (s *server) handOver(ctx context.Context, rec *session.Record, prompt string) (via string, reached bool, err error) {
	owner := *rec.Owner
	if p, ok := s.prompters[rec.Agent]; ok {
		// Right before it goes: the owner is still that process.
		if r := s.tracker.Probe(owner); r.Liveness != proc.Alive {
			return "", false, &sendError{http.StatusConflict, api.CodeNotHeld, fmt.Sprintf("session %s's agent (pid %d) is not alive now (%s): nothing was sent", rec.ID, owner.PID, r.Reason), true}
		}
		via, ok, err := p.Prompt(ctx, repairTarget(rec), prompt)
		if err != nil {
			return "", ok, &sendError{http.StatusBadGateway, api.CodeUnavailable, err.Error(), false}
		}
		if ok {
			return via, true, nil
		}
	}
	if rec.Pane == nil {
		return "", false, &sendError{http.StatusUnprocessableEntity, api.CodeCannotType,
			fmt.Sprintf("session %s is idle, but sessiond has no way to hand it a prompt: its agent (pid %d) runs in no tmux pane and no %s server has it", rec.ID, owner.PID, rec.Agent), false}
	}
	err = s.launcher.Type(ctx, *rec.Pane, owner, prompt)
	var te *launch.TypeError
	var nh *launch.NotHeldError
	switch {
	case err == nil:
		return "tmux pane " + rec.Pane.ID + " of " + rec.Pane.Socket, true, nil
	case errors.As(err, &te) && !te.Typed && errors.As(err, &nh):
		return "", false, &sendError{http.StatusConflict, api.CodeNotHeld, fmt.Sprintf("nothing was typed into session %s's tmux pane %s: %v", rec.ID, rec.Pane.ID, nh), true}
	case errors.As(err, &te) && !te.Typed:
		return "", false, &sendError{http.StatusBadGateway, api.CodeUnavailable, fmt.Sprintf("nothing was typed into session %s's tmux pane: %v", rec.ID, err), false}
	}
	return "", true, &sendError{http.StatusBadGateway, api.CodeUnavailable, fmt.Sprintf("type into session %s's tmux pane: %v", rec.ID, err), false}
}

// resumeWith resumes a stopped session with prompt, by the resume
// handler's own rules (existence, single writer, fresh start), and turns
// its answer into deliver's.
func (s *server) resumeWith(ctx context.Context, rec *session.Record, prompt, mode string) (string, error) {
	body, _ := json.Marshal(api.ResumeRequest{Prompt: prompt, Mode: mode})
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/sessions/"+rec.ID+"/resume", bytes.NewReader(body))
	req.SetPathValue("id", rec.ID)
	rr := httptest.NewRecorder()
	s.resumeSession(rr, req)
	if rr.Code == http.StatusOK {
		var lr api.LaunchResponse
		_ = json.Unmarshal(rr.Body.Bytes(), &lr)
		return fmt.Sprintf("resumed as pid %d", lr.Session.PID), nil
	}
	var e api.Error
	if err := json.Unmarshal(rr.Body.Bytes(), &e); err != nil || e.Error == "" {
		e = api.Error{Error: strings.TrimSpace(rr.Body.String()), Code: api.CodeInternal}
	}
	return "", &sendError{rr.Code, e.Code, "resume " + rec.ID + " with the prompt: " + e.Error, false}
}

// listSends: GET /v1/sends[?session=ID][&all=true].
func (s *server) listSends(w http.ResponseWriter, r *http.Request) {
	var id string
	if ref := r.URL.Query().Get("session"); ref != "" {
		rec, err := s.store.Lookup(ref)
		if err != nil {
			s.lookupError(w, ref, err)
			return
		}
		id = rec.ID
	}
	all := r.URL.Query().Get("all") == "true"
	sends, bad, err := s.store.Sends()
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
	s.sendQueue.noteBad(bad)
	out := []session.Send{}
	for _, x := range sends {
		if (id == "" || x.SessionID == id) && (all || !x.State.Final()) {
			out = append(out, x)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// cancelSend: DELETE /v1/sends/{id}.
func (s *server) cancelSend(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	x, err := s.store.UpdateSend(id, func(x *session.Send) error {
		if x.State != session.SendQueued {
			return state.ErrSendState
		}
		x.State, x.UpdatedAt = session.SendCancelled, time.Now().UTC()
		return nil
	})
	switch {
	case errors.Is(err, state.ErrNotFound):
		writeError(w, http.StatusNotFound, api.CodeNotFound, fmt.Sprintf("no queued prompt %q", id))
	case errors.Is(err, state.ErrSendState):
		writeError(w, http.StatusConflict, api.CodeNotQueued, fmt.Sprintf("prompt %s is %s, not queued: too late to cancel", id, x.State))
	case err != nil:
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
	default:
		writeJSON(w, http.StatusOK, x)
	}
}

// sendQueue delivers the queued prompts: each once, when its session is
// idle (or stopped: resumed with it). It looks after every store commit
// and every second. Whether a session is ready is read from its record
// alone (Record.PromptPending), so the rule that a prompt waits for the
// session's activity after the last one holds across restarts and
// whichever way the last one came.
type sendQueue struct {
	s    *server
	log  *zap.Logger
	kick chan struct{}

	mu sync.Mutex
	// bad are the sends that do not decode, already logged.
	bad map[string]bool
	// notBefore holds back the sessions whose last try found nothing to
	// deliver to (the agent not in its pane's foreground): each try asks
	// tmux and /proc, so they are spaced out.
	notBefore map[string]time.Time
}

// retryAfter spaces the tries of a prompt whose session's agent was not
// where the prompt would go.
const retryAfter = 5 * time.Second

// finishedKept is how long delivered, failed and cancelled sends are
// listed (sessionctl sends --all) before they are dropped.
const finishedKept = 7 * 24 * time.Hour

func newSendQueue(s *server, log *zap.Logger) *sendQueue {
	return &sendQueue{s: s, log: log, kick: make(chan struct{}, 1), bad: map[string]bool{}, notBefore: map[string]time.Time{}}
}

// wake makes the queue look now.
func (q *sendQueue) wake() {
	if q == nil {
		return
	}
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// noteBad logs each send that does not decode, once: it is kept in the
// store as it is and never delivered; the others go on.
func (q *sendQueue) noteBad(bad []state.BadSend) {
	if q == nil || len(bad) == 0 {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, b := range bad {
		if !q.bad[b.ID] {
			q.bad[b.ID] = true
			q.log.Error("a queued prompt in the store does not read: it is kept as it is and never delivered; the others go on", zap.String("send", b.ID), zap.Error(b.Err))
		}
	}
}

// run delivers until ctx ends. First it settles what a previous sessiond
// left: a send it was delivering may have arrived, so it is failed, never
// sent twice; finished sends past finishedKept are dropped.
func (q *sendQueue) run(ctx context.Context) {
	q.recover()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		changed := q.s.store.Changed()
		q.pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		case <-q.kick:
		}
	}
}

func (q *sendQueue) recover() {
	sends, bad, err := q.s.store.Sends()
	if err != nil {
		q.log.Error("cannot read the queued prompts", zap.Error(err))
		return
	}
	q.noteBad(bad)
	var drop []string
	for _, x := range sends {
		switch {
		case x.State == session.SendDelivering:
			_, err := q.s.store.UpdateSend(x.ID, func(x *session.Send) error {
				x.State, x.UpdatedAt = session.SendFailed, time.Now().UTC()
				x.Error = "sessiond stopped while delivering it; not sent again, as it may have arrived"
				return nil
			})
			q.log.Warn("a prompt was being delivered when sessiond stopped: failed, not sent twice", zap.String("send", x.ID), zap.String("session", x.SessionID), zap.Error(err))
		case x.State.Final() && time.Since(x.UpdatedAt) > finishedKept:
			drop = append(drop, x.ID)
		}
	}
	if err := q.s.store.DeleteSends(drop); err != nil {
		q.log.Warn("cannot drop old prompts", zap.Error(err))
	}
}

// pass delivers the queued sends whose sessions are ready, oldest first,
// at most one per session.
func (q *sendQueue) pass(ctx context.Context) {
	sends, bad, err := q.s.store.Sends()
	if err != nil {
		q.log.Error("cannot read the queued prompts", zap.Error(err))
		return
	}
	q.noteBad(bad)
	done := map[string]bool{}
	for _, x := range sends {
		if x.State != session.SendQueued || done[x.SessionID] {
			continue
		}
		done[x.SessionID] = true
		rec, err := q.s.store.Get(x.SessionID)
		if errors.Is(err, state.ErrNotFound) {
			q.finish(x.ID, "", fmt.Errorf("session %s is gone from the store", x.SessionID))
			continue
		}
		if err != nil || !ready(rec) || q.heldBack(rec.ID) {
			continue
		}
		q.deliver(ctx, x)
	}
}

// deliver delivers send x under its session's action lock: the session
// and the send are read again once it is held (a send, a stop or a
// cancel may have come first), and a stop waits for a delivery under way.
func (q *sendQueue) deliver(ctx context.Context, x session.Send) {
	unlock, err := q.s.acting.lock(ctx, x.SessionID)
	if err != nil {
		return // sessiond stops
	}
	defer unlock()
	rec, err := q.s.store.Get(x.SessionID)
	if err != nil || !ready(rec) {
		return
	}
	if _, err := q.s.store.UpdateSend(x.ID, func(x *session.Send) error {
		if x.State != session.SendQueued {
			return state.ErrSendState // cancelled meanwhile
		}
		x.State, x.UpdatedAt = session.SendDelivering, time.Now().UTC()
		return nil
	}); err != nil {
		return
	}
	via, err := q.s.deliver(ctx, rec, x.Prompt, x.Mode)
	var busy *notIdleError
	var se *sendError
	switch {
	case errors.As(err, &busy) || errors.As(err, &se) && se.later:
		// Nothing reached the session: back in the queue, saying why
		// it waits (written only when the reason changes).
		why := ""
		if se != nil {
			why = "waiting: " + se.msg
			q.mu.Lock()
			q.notBefore[x.SessionID] = time.Now().Add(retryAfter)
			q.mu.Unlock()
		}
		if _, uerr := q.s.store.UpdateSend(x.ID, func(s *session.Send) error {
			s.State = session.SendQueued
			if s.Error != why {
				s.Error, s.UpdatedAt = why, time.Now().UTC()
			}
			return nil
		}); uerr != nil {
			q.log.Error("cannot put a prompt back in the queue", zap.String("send", x.ID), zap.Error(uerr))
		}
		return
	}
	q.finish(x.ID, via, err)
	if err == nil {
		q.s.tracker.AppendAction(rec, fmt.Sprintf("queued prompt %s delivered via %s", x.ID, via))
	}
}

// heldBack says whether the last try for session id was too recent.
func (q *sendQueue) heldBack(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.notBefore[id]
	if ok && time.Now().After(t) {
		delete(q.notBefore, id)
		return false
	}
	return ok
}

// ready says whether rec can take a prompt now: stopped (a resume), or
// running, idle and not still taking up the last prompt it was handed.
func ready(rec *session.Record) bool {
	if rec.Status.Terminal() {
		return true
	}
	return rec.Status == session.StatusRunning && rec.Activity == session.ActivityIdle && !rec.PromptPending()
}

// cancelQueued cancels every queued prompt of session id, saying why: a
// session its user stopped must not be resumed by a prompt queued before.
// The caller holds the session's action lock.
func (s *server) cancelQueued(id, why string) (int, error) {
	sends, bad, err := s.store.Sends()
	if err != nil {
		return 0, err
	}
	s.sendQueue.noteBad(bad)
	n := 0
	for _, x := range sends {
		if x.SessionID != id || x.State != session.SendQueued {
			continue
		}
		_, err := s.store.UpdateSend(x.ID, func(x *session.Send) error {
			if x.State != session.SendQueued {
				return state.ErrSendState
			}
			x.State, x.UpdatedAt, x.Error = session.SendCancelled, time.Now().UTC(), why
			return nil
		})
		switch {
		case err == nil:
			n++
		case !errors.Is(err, state.ErrSendState):
			return n, err
		}
	}
	return n, nil
}

func (q *sendQueue) finish(id, via string, err error) {
	x, uerr := q.s.store.UpdateSend(id, func(x *session.Send) error {
		x.UpdatedAt = time.Now().UTC()
		if err != nil {
			x.State, x.Error = session.SendFailed, err.Error()
		} else {
			x.State, x.Via, x.Error = session.SendDelivered, via, ""
		}
		return nil
	})
	if err != nil {
		q.log.Warn("queued prompt not delivered", zap.String("send", id), zap.String("session", x.SessionID), zap.Error(err))
	} else {
		q.log.Info("queued prompt delivered", zap.String("send", id), zap.String("session", x.SessionID), zap.String("via", via))
	}
	if uerr != nil {
		q.log.Error("cannot record a queued prompt's end", zap.String("send", id), zap.Error(uerr))
	}
}
