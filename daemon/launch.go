package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/api"
	"github.com/sessiond/sessiond/launch"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// decodeBody reads a JSON request body, refusing unknown fields so a typo
// is an error rather than a silently ignored option.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, "bad request body: "+err.Error())
		return false
	}
	return true
}

func (s *server) launcherFor(w http.ResponseWriter, agent string) adapters.Launcher {
	if l, ok := s.launchers[agent]; ok {
		return l
	}
	var names []string
	for n := range s.launchers {
		names = append(names, n)
	}
	writeError(w, http.StatusBadRequest, api.CodeBadRequest, fmt.Sprintf("unknown agent %q (sessiond can launch: %v)", agent, names))
	return nil
}

// startError answers a failed start: the request's fault (missing binary,
// bad cwd, bad mode) is 400, anything else 500. No record is left behind.
func (s *server) startError(w http.ResponseWriter, err error) {
	var ue *launch.UsageError
	if errors.As(err, &ue) {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	s.log.Error("launch failed", zap.Error(err))
	writeError(w, http.StatusInternalServerError, api.CodeInternal, err.Error())
}

// launchSession: POST /v1/sessions. It answers as soon as the process is
// recorded; it never waits on the agent's output to learn an id.
func (s *server) launchSession(w http.ResponseWriter, r *http.Request) {
	var req api.LaunchRequest
	if !decodeBody(w, r, &req) {
		return
	}
	l := s.launcherFor(w, req.Agent)
	if l == nil {
		return
	}
	cwd, err := launch.ResolveCwd(req.Cwd)
	if err != nil {
		s.startError(w, err)
		return
	}
	spec := adapters.LaunchSpec{Cwd: cwd, Prompt: req.Prompt, Args: req.Args, Mode: req.Mode}
	cmd, err := l.NewCommand(spec)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	rec, st, err := s.start(req.Agent, cmd, req.Mode, req.Env)
	if err != nil {
		s.startError(w, err)
		return
	}
	if o := originOf(r); o != "" {
		// Who launched it, for the event log (created says what, not who).
		s.tracker.AppendActionFrom(rec, "launched", o)
	}
	writeJSON(w, http.StatusCreated, api.LaunchResponse{Session: api.FromRecord(rec), Attach: st.AttachCommand(), LogPath: st.LogPath})
}

// start runs cmd as a new session record.
func (s *server) start(agent string, cmd adapters.Command, mode string, env map[string]string) (*session.Record, *launch.Started, error) {
	id := state.NewID()
	var st *launch.Started
	rec, err := s.tracker.Launch(func() (*session.Record, error) {
		var err error
		if st, err = s.launcher.Start(id, cmd, mode, env); err != nil {
			return nil, err
		}
		owner := st.Identity
		return &session.Record{ID: id, Agent: agent, UpstreamID: cmd.UpstreamID, Owner: &owner, Cwd: st.Cwd,
			Mode: modeName(mode), Tmux: st.Tmux, LogPath: st.LogPath}, nil
	})
	if err != nil && rec == nil {
		return nil, nil, err
	}
	if err != nil {
		// Untracked, the process would be an orphan nobody knows of.
		s.launcher.Kill(st)
		return nil, nil, fmt.Errorf("record launched session: %w", err)
	}
	s.follow(rec.ID, st, cmd)
	return rec, st, nil
}

func modeName(m string) string {
	if m == "" {
		return launch.ModeHeadless
	}
	return m
}

// follow collects the exit of a process sessiond is the parent of, and
// links an upstream id the agent shows only in its output.
func (s *server) follow(id string, st *launch.Started, cmd adapters.Command) {
	go func() {
		if x, ok := s.launcher.Wait(st); ok {
			s.tracker.NoteExit(id, x)
		}
	}()
	if cmd.UpstreamID != "" || cmd.OutputID == nil {
		return
	}
	go func() {
		if up := launch.WaitForID(s.stopping, st.LogPath, cmd.OutputID, 2*time.Minute); up != "" {
			if err := s.tracker.LinkUpstream(id, up, "the agent's output"); err != nil {
				s.log.Warn("link upstream id", zap.String("session", id), zap.String("upstream", up), zap.Error(err))
			}
		}
	}()
}

// resumeSession: POST /v1/sessions/{id}/resume.
func (s *server) resumeSession(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("id")
	rec, err := s.store.Lookup(ref)
	if err != nil {
		s.lookupError(w, ref, err)
		return
	}
	var req api.ResumeRequest
	if !decodeBody(w, r, &req) {
		return
	}
	cur := rec.Resume
	if err := cur.Check(rec); err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	l := s.launcherFor(w, cur.Agent)
	if l == nil {
		return
	}
	fork, err := resumeForks(&req, cur)
	if err != nil {
		s.startError(w, err)
		return
	}
	// Single writer: two processes on one conversation corrupt it. This
	// early answer spares the existence check; adopt checks again, under
	// the lock it launches under.
	if !fork {
		if err := s.singleWriter(rec); err != nil {
			writeError(w, http.StatusConflict, api.CodeAlreadyRunning, err.Error())
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	ex, exErr := l.Exists(ctx, *cur)
	cancel()
	spec := adapters.LaunchSpec{Cwd: cur.Cwd, Prompt: req.Prompt, Args: req.Args, Mode: req.Mode}
	if req.Cwd != "" {
		spec.Cwd = req.Cwd
	}
	switch ex {
	case adapters.ExistenceUnknown:
		// Never silently reset a conversation on a transient error.
		writeError(w, http.StatusServiceUnavailable, api.CodeUnavailable,
			fmt.Sprintf("cannot tell whether %s session %s still exists (%v); nothing was launched, try again", cur.Agent, cur.UpstreamID, exErr))
		return
	case adapters.Missing:
		s.resumeFresh(w, rec, l, spec, req, exErr)
		return
	}
	if fork {
		s.forkSession(w, rec, l, spec, req.Mode)
		return
	}
	cmd, err := l.ResumeCommand(*cur, spec, false)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	s.adopt(w, rec, cmd, req.Mode, "resumed", api.LaunchResponse{})
}

// resumeForks resolves the cwd a resume asks for, in req, and says
// whether the resume forks: when asked to, or when that cwd is not the
// cursor's. A different cwd forks: the history goes with it, the old
// session is left as it is.
func resumeForks(req *api.ResumeRequest, cur *session.ResumeCursor) (bool, error) {
	fork := req.Fork
	if req.Cwd != "" {
		cwd, err := launch.ResolveCwd(req.Cwd)
		if err != nil {
			return false, err
		}
		if recorded, err := filepath.EvalSymlinks(cur.Cwd); err != nil || recorded != cwd {
			fork = true
		}
		req.Cwd = cwd
	}
	return fork, nil
}

// forkSession starts rec's conversation, with its history, as a new
// session, and records the fork on rec.
func (s *server) forkSession(w http.ResponseWriter, rec *session.Record, l adapters.Launcher, spec adapters.LaunchSpec, mode string) {
	cur := rec.Resume
	cmd, err := l.ResumeCommand(*cur, spec, true)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	nrec, st, err := s.start(cur.Agent, cmd, mode, nil)
	if err != nil {
		s.startError(w, err)
		return
	}
	s.tracker.AppendAction(rec, fmt.Sprintf("forked into session %s", nrec.ID))
	writeJSON(w, http.StatusCreated, api.LaunchResponse{Session: api.FromRecord(nrec), Attach: st.AttachCommand(), LogPath: st.LogPath,
		Forked: true, Reason: fmt.Sprintf("forked from %s with its history", rec.ID)})
}

// resumeFresh starts a new upstream session under the same sessiond id
// when the old one is confirmed gone.
func (s *server) resumeFresh(w http.ResponseWriter, rec *session.Record, l adapters.Launcher, spec adapters.LaunchSpec, req api.ResumeRequest, why error) {
	cmd, err := l.NewCommand(spec)
	if err != nil {
		writeError(w, http.StatusBadRequest, api.CodeBadRequest, err.Error())
		return
	}
	reason := fmt.Sprintf("upstream session %s is gone (%v); started a fresh one", rec.UpstreamID, why)
	s.adopt(w, rec, cmd, req.Mode, "started fresh", api.LaunchResponse{Fresh: true, Reason: reason})
}

// adopt starts cmd as the new owner of rec, unless rec has a live owner
// by then: the check runs in the tracker under the lock the start and its
// record run under, so of concurrent resumes exactly one starts and the
// others get 409.
func (s *server) adopt(w http.ResponseWriter, rec *session.Record, cmd adapters.Command, mode, verb string, resp api.LaunchResponse) {
	var st *launch.Started
	nrec, err := s.tracker.Adopt(rec.ID, s.singleWriter, func() (proc.Identity, error) {
		var err error
		if st, err = s.launcher.Start(rec.ID, cmd, mode, nil); err != nil {
			return proc.Identity{}, err
		}
		return st.Identity, nil
	}, verb, func(r *session.Record) {
		r.Mode, r.Tmux, r.LogPath, r.Cwd = modeName(mode), st.Tmux, st.LogPath, st.Cwd
		if cmd.UpstreamID != r.UpstreamID {
			r.UpstreamID = cmd.UpstreamID
			r.Resume = nil // confirmed again when the agent's data shows it
		}
	})
	var running *ownerAliveError
	if errors.As(err, &running) {
		writeError(w, http.StatusConflict, api.CodeAlreadyRunning, err.Error())
		return
	}
	if err != nil && st == nil {
		s.startError(w, err)
		return
	}
	if err != nil {
		s.launcher.Kill(st)
		writeError(w, http.StatusInternalServerError, api.CodeInternal, "record resumed session: "+err.Error())
		return
	}
	s.follow(rec.ID, st, cmd)
	resp.Session, resp.Attach, resp.LogPath = api.FromRecord(nrec), st.AttachCommand(), st.LogPath
	writeJSON(w, http.StatusOK, resp)
}

// ownerAliveError refuses a resume of a session whose owner (or a
// candidate owner) lives: a second process on one conversation corrupts it.
type ownerAliveError struct {
	id  string
	pid int
}

func (e *ownerAliveError) Error() string {
	return fmt.Sprintf("session %s is already running as pid %d; stop it first, or resume with fork", e.id, e.pid)
}

// singleWriter returns an *ownerAliveError if rec has a live owner or
// candidate, else nil.
func (s *server) singleWriter(rec *session.Record) error {
	if pid := s.liveOwner(rec); pid != 0 {
		return &ownerAliveError{id: rec.ID, pid: pid}
	}
	return nil
}

// liveOwner returns the pid of a live owner or candidate of rec, or 0.
func (s *server) liveOwner(rec *session.Record) int {
	for _, id := range ownerAndCandidates(rec) {
		if s.tracker.Probe(id).Liveness == proc.Alive {
			return id.PID
		}
	}
	return 0
}
