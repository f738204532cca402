package tracker

import (
	"fmt"

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
	err := t.cfg.Store.Batch(func(tx *state.Tx) error {
		_, err := tx.Append(session.Event{Type: session.EventAction, SessionID: rec.ID, Agent: rec.Agent,
			From: rec.Status, To: rec.Status, Time: t.cfg.Now(), Reason: reason})
		return err
	})
	if err != nil {
		t.log.Warn("record action event", zap.String("session", rec.ID), zap.Error(err))
		return fmt.Errorf("record action %q on session %s: %w", reason, rec.ID, err)
	}
	return nil
}
