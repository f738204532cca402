package tracker

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/session"
	"github.com/sessiond/sessiond/state"
)

// AppendAction records a user action on a session (a repair, a reap, a
// stop, a fork) as an event, so the event log says what was done to it;
// the record itself is left as it is. It lives here so that the tracker
// is the only code that writes to the store's records and events. The
// error is logged here and returned, so a handler can tell the user that
// what was done is not in the event log (callers that cannot, ignore it).
func (t *Tracker) AppendAction(rec *session.Record, reason string) error {
	return t.AppendActionFrom(rec, reason, "")
}

// AppendActionFrom is AppendAction with the action's origin: who asked
// for it (session.Event.Origin).
func (t *Tracker) AppendActionFrom(rec *session.Record, reason, origin string) error {
	err := t.cfg.Store.Batch(func(tx *state.Tx) error {
		_, err := tx.Append(session.Event{Type: session.EventAction, SessionID: rec.ID, Agent: rec.Agent,
			From: rec.Status, To: rec.Status, Time: t.cfg.Now(), Reason: reason, Origin: origin})
		return err
	})
	if err != nil {
		t.log.Warn("record action event", zap.String("session", rec.ID), zap.Error(err))
		return fmt.Errorf("record action %q on session %s: %w", reason, rec.ID, err)
	}
	return nil
}

// NotePrompt records on session id when sessiond hands it a prompt (at),
// or puts back the earlier value when the prompt never reached it (a
// delivery that failed before anything was typed). The record says it,
// not the daemon's memory, so the rule that the next prompt waits for
// the session's activity since (session.Record.PromptPending) holds for
// every path a prompt takes and across restarts. It returns the value it
// replaced.
func (t *Tracker) NotePrompt(id string, at *time.Time) (prev *time.Time, err error) {
	_, err = t.cfg.Store.Update(id, func(r *session.Record) ([]session.Event, error) {
		prev = r.PromptAt
		if at == nil {
			r.PromptAt = nil
		} else {
			v := at.UTC()
			r.PromptAt = &v
		}
		return nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("record the prompt delivered to session %s: %w", id, err)
	}
	return prev, nil
}
