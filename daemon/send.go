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
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// A prompt goes to a session the way its user would give it: an idle
// running session gets it where it reads prompts (its agent's server, else
// its tmux pane), a stopped one is resumed with it (the resume rules), a
// busy or waiting one refuses it unless it is queued, to be delivered once
// when the session is idle or stopped.

// notIdleError: the session is busy, waiting, starting or unknown.
type notIdleError struct{ rec *session.Record }

func (e *notIdleError) Error() string {
	what := string(e.rec.Status)
	if e.rec.Status == session.StatusRunning {
		what = string(e.rec.Activity)
		if w := e.rec.WaitingFor; w != nil && e.rec.Activity == session.ActivityWaiting {
			what += " for " + string(w.Kind)
		}
	}
	return fmt.Sprintf("session %s is %s: a prompt now would interrupt it (send with --when-idle to queue it)", e.rec.ID, what)
}

// sendError is a failed delivery with its HTTP answer.
type sendError struct {
	status int
	code   string
	msg    string
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
	via, err := s.deliver(r.Context(), rec, req.Prompt, req.Mode)
	var busy *notIdleError
	var se *sendError
	switch {
	case err == nil:
		s.tracker.AppendAction(rec, "prompt delivered via "+via)
		writeJSON(w, http.StatusOK, api.SendResponse{Delivered: true, Via: via, Session: s.current(rec)})
	case errors.As(err, &busy) && req.WhenIdle:
		x := session.Send{ID: state.NewID(), SessionID: rec.ID, Prompt: req.Prompt, Mode: req.Mode,
			State: session.SendQueued, CreatedAt: time.Now().UTC()}
		x.UpdatedAt = x.CreatedAt
		if err := s.store.PutSend(x); err != nil {
			writeError(w, http.StatusInternalServerError, api.CodeInternal, "queue the prompt: "+err.Error())
			return
		}
		s.tracker.AppendAction(rec, fmt.Sprintf("prompt %s queued until the session is idle", x.ID))
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
// it must wait; a *sendError for an answer of the API's).
func (s *server) deliver(ctx context.Context, rec *session.Record, prompt, mode string) (via string, err error) {
	switch {
	case rec.Status.Terminal():
		return s.resumeWith(ctx, rec, prompt, mode)
	case rec.Status != session.StatusRunning || rec.Activity != session.ActivityIdle:
		return "", &notIdleError{rec}
	}
	if p, ok := s.prompters[rec.Agent]; ok {
		via, ok, err := p.Prompt(ctx, repairTarget(rec), prompt)
		if err != nil {
			return "", &sendError{http.StatusBadGateway, api.CodeUnavailable, err.Error()}
		}
		if ok {
			return via, nil
		}
	}
	if rec.Pane == nil {
		return "", &sendError{http.StatusUnprocessableEntity, api.CodeCannotType,
			fmt.Sprintf("session %s is idle, but sessiond has no way to hand it a prompt: its agent (pid %d) runs in no tmux pane and no %s server has it", rec.ID, ownerPID(rec), rec.Agent)}
	}
	if err := s.launcher.Type(ctx, *rec.Pane, prompt); err != nil {
		return "", &sendError{http.StatusBadGateway, api.CodeUnavailable, fmt.Sprintf("type into session %s's tmux pane: %v", rec.ID, err)}
	}
	return "tmux pane " + rec.Pane.ID + " of " + rec.Pane.Socket, nil
}

func ownerPID(rec *session.Record) int {
	if rec.Owner == nil {
		return 0
	}
	return rec.Owner.PID
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
	return "", &sendError{rr.Code, e.Code, "resume " + rec.ID + " with the prompt: " + e.Error}
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
	sends, err := s.store.Sends()
	if err != nil {
		writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
		return
	}
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
// and every second.
type sendQueue struct {
	s    *server
	log  *zap.Logger
	kick chan struct{}

	mu sync.Mutex
	// last is when a prompt was last delivered to each session: the
	// next waits until the session has been busy and idle again since.
	last map[string]time.Time
}

// finishedKept is how long delivered, failed and cancelled sends are
// listed (sessionctl sends --all) before they are dropped.
const finishedKept = 7 * 24 * time.Hour

func newSendQueue(s *server, log *zap.Logger) *sendQueue {
	return &sendQueue{s: s, log: log, kick: make(chan struct{}, 1), last: map[string]time.Time{}}
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
	sends, err := q.s.store.Sends()
	if err != nil {
		q.log.Error("cannot read the queued prompts", zap.Error(err))
		return
	}
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
	sends, err := q.s.store.Sends()
	if err != nil {
		q.log.Error("cannot read the queued prompts", zap.Error(err))
		return
	}
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
		if err != nil || !q.ready(rec) {
			continue
		}
		if _, err := q.s.store.UpdateSend(x.ID, func(x *session.Send) error {
			if x.State != session.SendQueued {
				return state.ErrSendState // cancelled meanwhile
			}
			x.State, x.UpdatedAt = session.SendDelivering, time.Now().UTC()
			return nil
		}); err != nil {
			continue
		}
		via, err := q.s.deliver(ctx, rec, x.Prompt, x.Mode)
		var busy *notIdleError
		if errors.As(err, &busy) { // changed since: not sent, back in the queue
			_, _ = q.s.store.UpdateSend(x.ID, func(x *session.Send) error { x.State = session.SendQueued; return nil })
			continue
		}
		q.finish(x.ID, via, err)
		if err == nil {
			q.mu.Lock()
			q.last[rec.ID] = time.Now()
			q.mu.Unlock()
			q.s.tracker.AppendAction(rec, fmt.Sprintf("queued prompt %s delivered via %s", x.ID, via))
		}
	}
}

// ready says whether rec can take a prompt now: stopped (a resume), or
// idle and not just given one (its activity changed since).
func (q *sendQueue) ready(rec *session.Record) bool {
	if rec.Status.Terminal() {
		return true
	}
	if rec.Status != session.StatusRunning || rec.Activity != session.ActivityIdle {
		return false
	}
	q.mu.Lock()
	last, ok := q.last[rec.ID]
	q.mu.Unlock()
	return !ok || rec.ActivitySince != nil && rec.ActivitySince.After(last)
}

func (q *sendQueue) finish(id, via string, err error) {
	x, uerr := q.s.store.UpdateSend(id, func(x *session.Send) error {
		x.UpdatedAt = time.Now().UTC()
		if err != nil {
			x.State, x.Error = session.SendFailed, err.Error()
		} else {
			x.State, x.Via = session.SendDelivered, via
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
