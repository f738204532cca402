package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/sessiond/sessiond/reactions"
	"github.com/sessiond/sessiond/state"
)

// reactionFeed hands every committed event, in order, to the reactor
// (hooks.d, desktop notifications). It reads the event log after the
// commit, as an event stream client does, so a pass never waits on it.
type reactionFeed struct {
	rx    *reactions.Reactor
	st    *state.Store
	since uint64
	log   *zap.Logger
}

// startReactions makes the reactor, seeded with every session's state
// as of now, and the feed that will follow the log from here.
func startReactions(cfg Config, st *state.Store, log *zap.Logger) (*reactionFeed, error) {
	rc := cfg.Reactions
	rc.Socket = cfg.Socket
	rc.Logger = log.Named("reactions")
	since, err := st.LastSeq()
	if err != nil {
		return nil, fmt.Errorf("reactions: read the event log: %w", err)
	}
	recs, err := st.ListShared()
	if err != nil {
		return nil, fmt.Errorf("reactions: read the sessions: %w", err)
	}
	rx := reactions.New(rc)
	rx.Seed(recs...)
	if rc.HooksDir != "" || rc.Notifier != nil || rc.NotifyOff != "" {
		log.Info("reactions", zap.String("hooks_dir", rc.HooksDir), zap.Bool("notify", rc.Notifier != nil),
			zap.String("notify_off", rc.NotifyOff), zap.Duration("hook_timeout", rc.Timeout))
	}
	return &reactionFeed{rx: rx, st: st, since: since, log: log.Named("reactions")}, nil
}

// follow feeds the reactor until ctx ends.
func (f *reactionFeed) follow(ctx context.Context) {
	for {
		// The change signal is taken before the read, so a commit in
		// between still wakes us.
		changed := f.st.Changed()
		evs, err := f.st.Events(f.since, 500)
		if err != nil {
			f.log.Error("read the event log", zap.Uint64("since", f.since), zap.Error(err))
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		for _, ev := range evs {
			f.since = ev.Seq
			rec, err := f.st.Get(ev.SessionID)
			if err != nil && !errors.Is(err, state.ErrNotFound) {
				f.log.Warn("read the session of an event", zap.String("session", ev.SessionID), zap.Error(err))
			}
			f.rx.Observe(ev, rec)
		}
		if len(evs) == 500 {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		}
	}
}
