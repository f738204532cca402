package tracker

import (
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// Launch calls start, which starts an agent process and returns its record,
// and records it before the launch request returns: the session is
// starting, owned by that process, and its exit is watched from this
// moment. The record carries the agent, upstream id (when chosen up
// front), cwd, owner and launch details; Launch sets the status. No pass
// runs between the start and the record. A pass that
// ran between the two could see the new process's data (an OpenCode fork
// writes its session at once) before the record exists, and record the
// session a second time, as discovered. If start fails nothing is
// recorded; a record that fails to commit is returned with the error, so
// the caller can kill the process it started.
func (t *Tracker) Launch(start func() (*session.Record, error)) (*session.Record, error) {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	rec, err := start()
	if err != nil {
		return nil, err
	}
	return rec, t.recordLaunch(rec)
}

func (t *Tracker) recordLaunch(rec *session.Record) error {
	if rec.Owner == nil {
		return fmt.Errorf("record launch: no owner process")
	}
	now := t.cfg.Now()
	rec.Status = session.StatusStarting
	rec.StatusReason = fmt.Sprintf("launched as pid %d; waiting for the agent's data", rec.Owner.PID)
	rec.Activity = session.ActivityUnknown
	rec.Launched = true
	rec.LaunchedAt = &now
	rec.OwnerEvidence = launchEvidence
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = now
	}
	if rec.Problems == nil {
		rec.Problems = []session.Problem{}
	}
	err := t.cfg.Store.Create(rec, session.Event{Type: session.EventCreated, To: rec.Status, Time: now,
		Activity: rec.Activity, Reason: rec.StatusReason})
	if errors.Is(err, state.ErrConflict) {
		// The agent may write its data (Claude's registry entry) before this
		// record commits; a pass that ran in between recorded the session
		// as discovered. That record is this launch: take it over.
		var got *session.Record
		if got, err = t.takeOverDiscovered(rec, now, err); err == nil {
			*rec = *got
		}
	}
	if err != nil {
		return err
	}
	t.watch(*rec.Owner)
	return nil
}

// takeOverDiscovered turns the record a pass made for a just-launched
// process's upstream id into the launch's record: same id, the launch's
// owner and details, starting again. Only a record not launched by
// sessiond, with no owner or this very process as owner, is taken over;
// anything else is a real conflict and conflict is returned.
func (t *Tracker) takeOverDiscovered(rec *session.Record, now time.Time, conflict error) (*session.Record, error) {
	old, err := t.cfg.Store.ByUpstream(rec.Agent, rec.UpstreamID)
	if err != nil {
		return nil, conflict
	}
	same := func(o *proc.Identity) bool {
		return o == nil || (o.PID == rec.Owner.PID && o.StartTicks == rec.Owner.StartTicks)
	}
	if old.Launched || !same(old.Owner) {
		return nil, conflict
	}
	return t.cfg.Store.Update(old.ID, func(r *session.Record) ([]session.Event, error) {
		if r.Launched || !same(r.Owner) {
			return nil, conflict
		}
		from := r.Status
		o := *rec.Owner
		r.Owner, r.OwnerInferred, r.OwnerEvidence, r.Candidates = &o, false, rec.OwnerEvidence, nil
		r.Launched, r.LaunchedAt, r.Mode, r.Tmux, r.LogPath = true, rec.LaunchedAt, rec.Mode, rec.Tmux, rec.LogPath
		r.Exit, r.StoppedAt = nil, nil
		if r.Cwd == "" {
			r.Cwd = rec.Cwd
		}
		r.Status, r.StatusReason, r.Activity = rec.Status, rec.StatusReason, rec.Activity
		return []session.Event{{Type: session.EventStatus, Time: now, From: from, To: r.Status, Activity: r.Activity, WaitingFor: r.WaitingFor,
			Reason: r.StatusReason + " (its data was discovered first)"}}, nil
	})
}

// Adopt makes a process that start starts the owner of an existing session
// (a resume): the session is starting again, with the new owner, and an
// event records it. upd may set launch details (mode, log path, upstream
// id). start runs under the pass lock, as in Launch: a fresh upstream
// session's data must not be seen by a pass before the record names it.
//
// check, if set, is given the session as stored now and may refuse the
// adoption (the API's single-writer check: no live owner). It runs under
// the same lock as start and the commit, so two concurrent adoptions
// cannot both pass it: the second sees the owner the first recorded. If
// check or start fails nothing changes and its error is returned as is.
func (t *Tracker) Adopt(id string, check func(*session.Record) error, start func() (proc.Identity, error), reason string, upd func(*session.Record)) (*session.Record, error) {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	if check != nil {
		cur, err := t.cfg.Store.Get(id)
		if err != nil {
			return nil, fmt.Errorf("read session %s before adopting a new owner: %w", id, err)
		}
		if err := check(cur); err != nil {
			return nil, err
		}
	}
	owner, err := start()
	if err != nil {
		return nil, err
	}
	now := t.cfg.Now()
	rec, err := t.cfg.Store.Update(id, func(r *session.Record) ([]session.Event, error) {
		from := r.Status
		o := owner
		r.Owner, r.OwnerInferred, r.OwnerEvidence, r.Candidates = &o, false, launchEvidence, nil
		r.Launched, r.LaunchedAt, r.Exit, r.StoppedAt = true, &now, nil, nil
		r.Status, r.Activity = session.StatusStarting, session.ActivityUnknown
		r.StatusReason = fmt.Sprintf("%s as pid %d; waiting for the agent's data", reason, owner.PID)
		// Problems of the previous run are history now.
		var keep []session.Problem
		for _, p := range r.Problems {
			if p.Kind == session.ProblemOrphanProcesses {
				keep = append(keep, p)
			}
		}
		r.Problems = append([]session.Problem{}, keep...)
		if upd != nil {
			upd(r)
		}
		return []session.Event{{Type: session.EventStatus, Time: now, From: from, To: r.Status, Activity: r.Activity, WaitingFor: r.WaitingFor, Reason: r.StatusReason}}, nil
	})
	if err != nil {
		return nil, err
	}
	t.watch(owner)
	return rec, nil
}

// NoteExit records how a launched owner ended, when sessiond was its
// parent and collected the status, then reconciles at once. The status
// change itself comes from the pass (the owner probes dead), as for any
// other death.
func (t *Tracker) NoteExit(id string, st session.ExitStatus) {
	_, err := t.cfg.Store.Update(id, func(r *session.Record) ([]session.Event, error) {
		if r.Owner == nil || r.Owner.PID != st.PID {
			return nil, nil // the session has another owner by now
		}
		x := st
		r.Exit = &x
		return nil, nil
	})
	if err != nil {
		t.log.Warn("record exit status", zap.String("session", id), zap.Error(err))
	}
	t.Kick()
}

// LinkUpstream records the upstream id of a launched session whose agent
// chose it (OpenCode), as an event. It never replaces a known id, and a
// conflict (a record of that id already exists) is returned.
func (t *Tracker) LinkUpstream(id, upstreamID, evidence string) error {
	t.passMu.Lock()
	defer t.passMu.Unlock()
	_, err := t.cfg.Store.Update(id, func(r *session.Record) ([]session.Event, error) {
		if r.UpstreamID != "" {
			return nil, nil
		}
		r.UpstreamID = upstreamID
		return []session.Event{{Type: session.EventUpdated, Time: t.cfg.Now(), From: r.Status, To: r.Status,
			Activity: r.Activity, WaitingFor: r.WaitingFor, Reason: "upstream id " + upstreamID + " linked from " + evidence}}, nil
	})
	return err
}
