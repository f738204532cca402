package tracker

import (
	"cmp"
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
//
// Any process of the user can post a hook naming any session, so what is
// kept is bounded and kept apart by sender (hookBox): the latest hook
// from the recorded owner's tree has a place of its own that no other
// sender's hook takes (a stranger's hook used to displace the owner's
// PermissionRequest, and the wait disappeared); other senders' hooks
// share a few places per session; ids no record has share a bounded map.
// Taking a hook does no work proportional to the store.

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

// latestFrom is the newest of hooks that came from owner's tree, or nil.
func latestFrom(hooks []*hookEvidence, owner proc.Identity) *hookEvidence {
	var out *hookEvidence
	for _, h := range hooks {
		if h.from(owner) && (out == nil || h.At.After(out.At)) {
			out = h
		}
	}
	return out
}

// sameMoment is how far before the data's last write a hook may be and
// still be about the same prompt.
const sameMoment = 2 * time.Second

// Bounds on the hooks kept.
const (
	// hookKeep is how long a received hook waits for a pass that can use
	// it: one that knows its session and its owner. Passes run every few
	// seconds; a hook no pass takes in that time is dropped.
	hookKeep = 10 * time.Minute
	// hookOthers is how many hooks are kept per session beside its
	// recorded owner's: from a new owner no pass has recorded yet (a
	// resume's first hooks), or from a stranger. A flood of strangers'
	// hooks churns these places only.
	hookOthers = 8
	// hookUnknownIDs is how many upstream ids no record has are kept
	// (a session started since the last pass, or an id nobody has); the
	// oldest goes first.
	hookUnknownIDs = 256
)

// hookBox holds the hooks received until passes decide them.
type hookBox struct {
	mu sync.Mutex
	// known are the hooks of sessions a record has, unknown of ids none
	// has (yet), each bounded by hookUnknownIDs.
	known, unknown map[hookKey]*hookPlaces
}

type hookKey struct{ agent, upstream string }

// hookPlaces are one session's hooks: the latest from its recorded
// owner's tree, and the latest few from other senders, oldest first.
type hookPlaces struct {
	owner  *hookEvidence
	others []*hookEvidence
	last   time.Time
}

func (pl *hookPlaces) put(h *hookEvidence, fromOwner bool) {
	pl.last = h.At
	if fromOwner {
		pl.owner = h
		return
	}
	if len(pl.others) == hookOthers {
		copy(pl.others, pl.others[1:])
		pl.others = pl.others[:hookOthers-1]
	}
	pl.others = append(pl.others, h)
}

// put keeps h for the session it names. rec is that session's record, nil
// when none has its id; fromOwner says whether h came from the tree of
// the owner (or a candidate) rec names.
func (b *hookBox) put(agent string, h *hookEvidence, known, fromOwner bool) {
	k := hookKey{agent, h.UpstreamID}
	b.mu.Lock()
	defer b.mu.Unlock()
	m := &b.known
	if !known {
		m = &b.unknown
	}
	if *m == nil {
		*m = map[hookKey]*hookPlaces{}
	}
	pl := (*m)[k]
	if pl == nil {
		if !known && len(b.unknown) >= hookUnknownIDs {
			b.dropOldestUnknown()
		}
		pl = &hookPlaces{}
		(*m)[k] = pl
	}
	pl.put(h, fromOwner && known)
}

// dropOldestUnknown makes room among the ids no record has: a walk of at
// most hookUnknownIDs entries.
func (b *hookBox) dropOldestUnknown() {
	var oldest hookKey
	var at time.Time
	first := true
	for k, pl := range b.unknown {
		if first || pl.last.Before(at) {
			oldest, at, first = k, pl.last, false
		}
	}
	delete(b.unknown, oldest)
}

// snapshot is the hooks a pass decides with, by session (a copy: hooks
// arriving during the pass wait for the next one, so a record is decided
// the same way in plan and in commit). It drops what is older than
// hookKeep: the pass pays for that, not a request.
func (b *hookBox) snapshot(now time.Time) map[hookKey][]*hookEvidence {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.known) == 0 && len(b.unknown) == 0 {
		return nil
	}
	out := make(map[hookKey][]*hookEvidence, len(b.known)+len(b.unknown))
	for _, m := range []map[hookKey]*hookPlaces{b.known, b.unknown} {
		for k, pl := range m {
			if now.Sub(pl.last) > hookKeep {
				delete(m, k)
				continue
			}
			hs := out[k]
			if pl.owner != nil {
				hs = append(hs, pl.owner)
			}
			out[k] = append(hs, pl.others...)
		}
	}
	return out
}

// Hook takes a hook an agent ran as evidence of the activity of the
// session it names. from is the hook process and its ancestors, nearest
// first (the daemon reads them from the socket's peer). A pass follows
// after the hint debounce. Events that say nothing of activity are not
// kept.
//
// It looks up the one record of that upstream id (an index lookup, never
// a scan), to keep a hook from the recorded owner's tree apart from the
// others'.
func (t *Tracker) Hook(agent string, h adapters.Hook, from []proc.Identity) {
	if h.Activity == "" || h.UpstreamID == "" {
		return
	}
	known, fromOwner := false, false
	if rec, err := t.cfg.Store.ByUpstream(agent, h.UpstreamID); err == nil {
		known = true
		for _, id := range recordedOwners(rec) {
			fromOwner = fromOwner || slices.Contains(from, id)
		}
	}
	t.hooks.put(agent, &hookEvidence{Hook: h, At: t.cfg.Now(), From: from}, known, fromOwner)
	if known {
		// A pass soon takes it. One for an id no record has waits for
		// the pass its session's own data brings (the agent writes its
		// files as it starts): a flood of forged ids runs no passes.
		t.Hint()
	}
}

// recordedOwners are the owner and candidates a record names.
func recordedOwners(rec *session.Record) []proc.Identity {
	ids := slices.Clone(rec.Candidates)
	if rec.Owner != nil {
		ids = append(ids, *rec.Owner)
	}
	return ids
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
	h := latestFrom(ev.hooks, owner)
	if h == nil {
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
