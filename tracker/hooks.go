package tracker

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sessiond/sessiond/adapters"
	"github.com/sessiond/sessiond/proc"
	"github.com/sessiond/sessiond/session"
)

// An agent's hooks say what its files cannot (Codex writes nothing while
// an approval is pending), but they are evidence of activity only, never
// of life: a hook never makes a session running, and kill -9 fires none.
// So a hook is kept per session until a pass decides that session, and
// decide takes it only when:
//   - the session's live owner is the hook process or one of its
//     ancestors (the hook came from that very process, not from a
//     process that merely names the session id), and
//   - it is newer than the agent's data: once the data moves after it
//     (a rollout line, a tool process started, a registry write), the
//     data says what happens now.
//
// Once decided, the record carries it (activity_source "hook"), so it
// holds across a restart of sessiond on the same terms.

// hookEvidence is one hook received, for the session it names.
type hookEvidence struct {
	adapters.Hook
	// At is when sessiond received it.
	At time.Time
	// From is the hook process and its ancestors, nearest first.
	From []proc.Identity
}

// from reports whether the hook came from id's process tree.
func (h *hookEvidence) from(id proc.Identity) bool {
	return slices.Contains(h.From, id)
}

// sameMoment is how far before the data's last write a hook may be and
// still be about the same prompt.
const sameMoment = 2 * time.Second

// hookKeep is how long a received hook waits for a pass that can use
// it: one that knows its session and its owner. Passes run every few
// seconds; a hook for a session no pass ever shows is dropped after it.
const hookKeep = 10 * time.Minute

// hookBox holds the latest hook per session until it is decided.
type hookBox struct {
	mu sync.Mutex
	by map[hookKey]*hookEvidence
}

type hookKey struct{ agent, upstream string }

func (b *hookBox) put(agent string, h *hookEvidence) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.by == nil {
		b.by = map[hookKey]*hookEvidence{}
	}
	for k, old := range b.by {
		if h.At.Sub(old.At) > hookKeep {
			delete(b.by, k)
		}
	}
	b.by[hookKey{agent, h.UpstreamID}] = h
}

// snapshot is the hooks a pass decides with (a copy: hooks arriving
// during the pass wait for the next one, so a record is decided the same
// way in plan and in commit).
func (b *hookBox) snapshot() map[hookKey]*hookEvidence {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.by) == 0 {
		return nil
	}
	return maps.Clone(b.by)
}

// Hook takes a hook an agent ran as evidence of the activity of the
// session it names. from is the hook process and its ancestors, nearest
// first (the daemon reads them from the socket's peer). A pass follows
// after the hint debounce. Events that say nothing of activity are not
// kept.
func (t *Tracker) Hook(agent string, h adapters.Hook, from []proc.Identity) {
	if h.Activity == "" || h.UpstreamID == "" {
		return
	}
	t.hooks.put(agent, &hookEvidence{Hook: h, At: t.cfg.Now(), From: from})
	t.Hint()
}

// activityOf decides a live session's activity, where it came from, what
// it waits for and since when: the adapter's data first, refined by a
// hook from the owner newer than the data, or by the hook the record
// already carries from that same owner.
func activityOf(rec *session.Record, ev evidence, owner proc.Identity) (session.Activity, session.ActivitySource, *session.WaitingFor, time.Time) {
	act, src, wait := rec.Activity, rec.ActivitySource, rec.WaitingFor
	var dataAt time.Time
	if o := ev.obs; o != nil {
		dataAt = o.LastActivity
		if o.ActivityAt.After(dataAt) {
			dataAt = o.ActivityAt
		}
		if o.Activity != "" {
			act, src, wait = o.Activity, o.ActivitySource, o.WaitingFor
		}
	} else if rec.LastActivityAt != nil {
		dataAt = *rec.LastActivityAt
	}
	at := dataAt
	h := ev.hook
	if h == nil || !h.from(owner) {
		h = carriedHook(rec, owner)
	}
	switch {
	case h != nil && h.At.After(dataAt):
		act, src, wait, at = h.Activity, session.SourceHook, h.WaitingFor, h.At
	case h != nil && h.Activity == act && wait != nil && h.WaitingFor != nil && h.WaitingFor.Kind == wait.Kind &&
		!h.At.Before(dataAt.Add(-sameMoment)):
		// The data says the same, in fewer words, at about the hook's
		// moment (Claude's registry: "permission prompt"): the hook adds
		// which tool and what for.
		w := *wait
		w.Tool, w.Input, w.Question = cmp.Or(w.Tool, h.WaitingFor.Tool), cmp.Or(w.Input, h.WaitingFor.Input), cmp.Or(w.Question, h.WaitingFor.Question)
		wait = &w
		if ev.obs == nil || ev.obs.Activity == "" {
			return act, src, wait, at
		}
	case ev.obs == nil || ev.obs.Activity == "":
		// Nothing new: what the record says stands (invariant 2).
		if act == "" {
			act = session.ActivityUnknown
		}
		return act, src, wait, at
	}
	switch {
	case act == "":
		act = session.ActivityUnknown
	case act == session.ActivityIdle && wait == nil:
		// Idle is the turn ended: the agent waits for the next prompt.
		wait = &session.WaitingFor{Kind: session.WaitingInput}
	case act == session.ActivityBusy || act == session.ActivityUnknown:
		wait = nil
	}
	return act, src, wait, at
}

// carriedHook is the hook a record's activity came from, while its owner
// is the one it came from.
func carriedHook(rec *session.Record, owner proc.Identity) *hookEvidence {
	if rec.ActivitySource != session.SourceHook || rec.ActivitySince == nil || rec.Owner == nil || *rec.Owner != owner || rec.Status != session.StatusRunning {
		return nil
	}
	return &hookEvidence{Hook: adapters.Hook{Activity: rec.Activity, WaitingFor: rec.WaitingFor}, At: *rec.ActivitySince, From: []proc.Identity{owner}}
}

// setActivity records a live session's activity, keeping activity_since
// while neither the activity nor what it waits for changed.
func setActivity(out, rec *session.Record, ev evidence, owner proc.Identity) {
	act, src, wait, at := activityOf(rec, ev, owner)
	same := rec.Status == session.StatusRunning && rec.Activity == act && rec.WaitingFor.Equal(wait) && rec.ActivitySince != nil
	if wait != nil {
		// A copy: wait may be the adapter's or a hook's, and a record
		// shares nothing with them (the store keeps created records as
		// they are, see state.Tx.CreateOwned).
		w := *wait
		wait = &w
	}
	out.Activity, out.ActivitySource, out.WaitingFor = act, src, wait
	if same {
		// The same activity, but its signal was set after the moment
		// recorded: the agent left it and came back between two passes
		// (a turn shorter than a pass: idle, busy, idle, all in Claude's
		// registry). The activity is as old as that signal, not older.
		if o := ev.obs; o != nil && o.Activity == act && o.ActivitySource == src && o.ActivityAt.After(*rec.ActivitySince) && !o.ActivityAt.After(ev.now) {
			at := o.ActivityAt
			out.ActivitySince = &at
		}
		return
	}
	if at.IsZero() || at.After(ev.now) {
		at = ev.now
	}
	out.ActivitySince = &at
}
